"""The ``glovebox`` command line. Thin: parse, call the library, format.

Library errors become exit codes in one place, the root group
(:class:`glovebox.cli._base.GloveboxGroup`): 0 success; 1 a failed call, a
refused registration/build/signature/approval, a policy with problems or a
tampered audit log, anything unexpected (``error [internal_error]``); 2 a usage
error (bad flags, --input that is not JSON or breaks the JSON rules).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from ..core._errors import GloveboxError
from ..core._jsonlimits import JsonRejected
from ..core._jsonlimits import loads as loads_json
from ..model._result import ToolInfo
from ..oci import generate_oci_keypair, sign_reference
from ..registry._compiled import file_sha256
from ..registry._keyring import Keyring, generate_keypair
from ..registry._keyring import sign as sign_artifact
from ..runtime._runtime import Runtime
from ..toolchains._build import build as build_tool
from ..toolchains._build import sdk_dir
from ..toolchains._scaffold import LANGUAGES, scaffold
from ._base import GloveboxGroup, accept_global_options, dump, home_of, open_runtime, progress_of
from ._breaker import breaker, describe_breaker
from ._connections import connect, connections
from ._import import import_group
from ._oci import INSECURE_HELP, pull, push
from ._policy import approvals, approve, audit, policy
from ._runs import run, runs
from ._secrets import secrets
from ._serve import export, mcp, serve
from ._sql import sql

__all__ = ["main"]


@click.group(cls=GloveboxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home", type=click.Path(file_okay=False), help="Store, caches and index (default: GLOVEBOX_HOME, else per user)."
)
@click.option("--policy", type=click.Path(dir_okay=False), help="Policy file (default: GLOVEBOX_POLICY, else none).")
@click.option("-v", "--verbose", is_flag=True, help="Log the host's warnings and errors, with tracebacks, to stderr.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on a terminal (they never go anywhere else).")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"], case_sensitive=False),
    help="json: the host's log, one line per call, as JSON lines on stderr (default: GLOVEBOX_LOG_FORMAT, else text).",
)
@click.version_option(package_name="glovebox")
def cli(home: str | None, policy: str | None, verbose: bool, quiet: bool, log_format: str | None) -> None:
    """Run AI-agent tools as WebAssembly components, one fresh sandbox per call."""


@cli.command()
@click.argument("src", type=click.Path(exists=True))
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False),
    help="Where to write the .wasm component (default: SRC with .wasm for its suffix: tool.c makes tool.wasm; "
    "a Rust or Go project DIR makes DIR/DIR.wasm).",
)
@click.option(
    "--overwrite-manifest",
    is_flag=True,
    help="Replace OUT-STEM.glovebox.toml even when glovebox did not write it (by default the build refuses).",
)
@click.pass_context
def build(ctx: click.Context, src: str, out: str | None, overwrite_manifest: bool) -> None:
    """Build a tool from C, Python, JavaScript or TypeScript source, or a Rust or Go project, into a component.

    SRC is a source file, or a project: its folder, Cargo.toml or go.mod. Prints the component's path.

    The manifest goes beside the output as OUT-STEM.glovebox.toml (generated, or
    for C the glovebox.toml beside SRC when it is this tool's), never over a file
    glovebox did not write. Caches (Zig's, Python builds') live in the home. A step
    that takes a while says so on stderr, terminal or not (-q: not at all).
    """
    started = time.monotonic()
    progress = progress_of(ctx)
    if ctx.find_root().params.get("quiet"):
        progress = _silent
    built = build_tool(
        src, out, home=ctx.find_root().params.get("home"), progress=progress, overwrite_manifest=overwrite_manifest
    )
    if progress is not None and progress is not _silent:
        progress(f"built {built} in {time.monotonic() - started:.1f} s")
    click.echo(str(built))


def _silent(line: str) -> None:
    """Where ``-q`` sends a build's steps: nowhere."""


@cli.command()
@click.argument("source", metavar="WASM|oci://REF|DIR")
@click.option(
    "--manifest",
    type=click.Path(exists=True, dir_okay=False),
    help="Manifest file, .toml or .json (default: STEM.glovebox.toml beside WASM, else the folder's glovebox.toml).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the registered tool as JSON.")
@click.option(
    "--key",
    "keys",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="oci:// or DIR: require a cosign signature by this public key (repeatable; default: only the policy's keys).",
)
@click.option("--insecure", is_flag=True, help=INSECURE_HELP)
@click.option("--accept-widening", is_flag=True, help="oci://: let a new digest of a tag reach more than before.")
@click.pass_context
def register(
    ctx: click.Context,
    source: str,
    manifest: str | None,
    as_json: bool,
    keys: tuple[str, ...],
    insecure: bool,
    accept_widening: bool,
) -> None:
    """Validate and register a .wasm component, an oci:// artifact or an OCI layout directory.

    A local file warns when agents would get no description or schema. A component exporting
    its own typed functions instead of glovebox's `call` becomes one tool per function,
    NAME-FUNCTION, with schemas from its WIT types. An oci:// tag is resolved once and
    registered by its digest, its signature checked before anything runs.
    """
    oci = source.startswith("oci://") or Path(source).is_dir()
    if not oci and not Path(source).is_file():
        raise click.BadParameter(f"{source!r} is not a file, an oci:// reference or a directory", param_hint="SOURCE")
    if oci and manifest is not None:
        raise click.BadParameter("an oci:// artifact carries its manifest", param_hint="--manifest")
    with open_runtime(ctx) as rt:
        if oci:
            infos = [rt.register_oci(source, keys=list(keys), insecure=insecure, accept_widening=accept_widening)]
        else:
            infos = rt.register_all(source, manifest)
    if as_json:  # one tool as an object (as always); a component's several functions as a list
        click.echo(dump(infos[0].to_dict() if len(infos) == 1 else [info.to_dict() for info in infos]))
    else:
        for info in infos:
            signed = f" (signed by {info.signer})" if oci and info.signer else ""
            click.echo(f"registered {info.name}@{info.version} {info.digest}{signed}")


@cli.command()
@click.argument("pattern", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--no-deprecated", is_flag=True, help="Hide deprecated versions.")
@click.option("--signed/--unsigned", default=None, help="Only signed (or only unsigned) versions.")
@click.pass_context
def tools(ctx: click.Context, pattern: str | None, as_json: bool, no_deprecated: bool, signed: bool | None) -> None:
    """List the registered tools (PATTERN filters names, e.g. 'text-*'), with any breaker not closed."""
    with open_runtime(ctx) as rt:
        infos = rt.tools(pattern, include_deprecated=not no_deprecated, signed=signed)
        states = [state for state in rt.breakers() if state.state != "closed"]
    if as_json:
        click.echo(dump([info.to_dict() for info in infos]))
        return
    if not infos:
        click.echo("no tools registered (add one with `glovebox register TOOL.wasm`)")
        return
    tripped = {state.key: describe_breaker(state) for state in states if state.scope == "tool"}
    click.echo(_table(infos, tripped))
    for state in states:
        if state.scope == "host":
            click.echo(f"breaker of host {state.key}: {describe_breaker(state)}")


def _table(infos: list[ToolInfo], tripped: dict[str, str]) -> str:
    rows = [("NAME", "VERSION", "KIND", "DIGEST", "DESCRIPTION")]
    rows += [(i.name, i.version, i.kind, i.digest[7:19], _describe(i, tripped.get(i.name))) for i in infos]
    widths = [max(len(row[col]) for row in rows) for col in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4]
        for row in rows
    )


def _describe(info: ToolInfo, tripped: str | None = None) -> str:
    flags = [f"signed by {info.signer}"] if info.signer else []
    flags += [f"DEPRECATED: {info.deprecated}"] if info.deprecated else []
    flags += [f"breaker {tripped}"] if tripped else []
    return info.description[:60] + (f"  [{'; '.join(flags)}]" if flags else "")


@cli.command()
@click.argument("ref")
@click.pass_context
def show(ctx: click.Context, ref: str) -> None:
    """Show one tool (NAME or NAME@VERSION) as JSON: manifest, digest, signer."""
    with open_runtime(ctx) as rt:
        info = rt.tool(ref)
    click.echo(dump(info.to_dict()))


@cli.command()
@click.argument("ref")
@click.option("--all", "all_versions", is_flag=True, help="With a bare NAME: remove every version.")
@click.pass_context
def remove(ctx: click.Context, ref: str, all_versions: bool) -> None:
    """Remove NAME@VERSION (or, with --all, every version of NAME)."""
    if "@" not in ref and not all_versions:  # the library refuses too; this says it in the CLI's words
        raise click.UsageError(f"{ref!r} names every version; give NAME@VERSION or add --all")
    with open_runtime(ctx) as rt:
        removed = rt.remove(ref, all_versions=all_versions)
    for info in removed:
        click.echo(f"removed {info.name}@{info.version}")


@cli.command()
@click.pass_context
def gc(ctx: click.Context) -> None:
    """Delete leftovers of interrupted registrations and removals (steps on a terminal, unless -q)."""
    with open_runtime(ctx) as rt:
        removed = rt.gc(progress=progress_of(ctx))
    for path in removed:
        click.echo(f"removed {path}")
    click.echo(f"{len(removed)} leftover file(s) removed")


@cli.command()
@click.argument("ref")
@click.option("-m", "--message", default="", help="Why, and what to use instead (default: no message).")
@click.pass_context
def deprecate(ctx: click.Context, ref: str, message: str) -> None:
    """Deprecate NAME@VERSION (or every version of NAME)."""
    with open_runtime(ctx) as rt:
        marked = rt.deprecate(ref, message)
    for info in marked:
        click.echo(f"deprecated {info.name}@{info.version}: {info.deprecated}")


@cli.group()
def keys() -> None:
    """Manage signing keys and the keys this registry trusts."""


@keys.command("generate")
@click.argument("name")
@click.option(
    "-d",
    "--dir",
    "directory",
    default=".",
    type=click.Path(file_okay=False),
    show_default=True,
    help="Where to write the keys.",
)
@click.option("--oci", is_flag=True, help="An ECDSA P-256 pair for cosign signatures of oci:// artifacts.")
def keys_generate(name: str, directory: str, oci: bool) -> None:
    """Create a key pair NAME.key (private) and NAME.pub in DIR: Ed25519, or ECDSA P-256 with --oci."""
    private, public = generate_oci_keypair(name, directory) if oci else generate_keypair(name, directory)
    click.echo(f"private key: {private} (keep it secret)\npublic key:  {public}")


@keys.command("trust")
@click.argument("public_key", type=click.Path(exists=True, dir_okay=False))
@click.pass_context
def keys_trust(ctx: click.Context, public_key: str) -> None:
    """Trust signatures made with PUBLIC_KEY (copied into GLOVEBOX_HOME/trusted_keys)."""
    click.echo(f"trusted {Keyring(home_of(ctx)).trust(public_key)}")


@keys.command("list")
@click.pass_context
def keys_list(ctx: click.Context) -> None:
    """List the trusted public keys."""
    signers = Keyring(home_of(ctx)).keys()
    for signer in signers:
        click.echo(signer)
    if not signers:
        click.echo("no trusted keys (add one with `glovebox keys trust KEY.pub`)")


@cli.command()
@click.argument("target", metavar="WASM|oci://REF")
@click.option("--key", "key_path", required=True, type=click.Path(exists=True, dir_okay=False), help="Private key.")
@click.option("--manifest", type=click.Path(exists=True, dir_okay=False), help="Manifest file (default: beside WASM).")
@click.option(
    "--oci",
    is_flag=True,
    help="TARGET is an oci:// artifact: store a cosign signature of its digest in the registry (ECDSA P-256 key).",
)
@click.option("--insecure", is_flag=True, help=INSECURE_HELP)
def sign(target: str, key_path: str, manifest: str | None, oci: bool, insecure: bool) -> None:
    """Sign WASM together with its manifest (writes WASM.sig), or with --oci an artifact in a registry."""
    if oci:
        pinned, key_id = sign_reference(target, key_path, insecure=insecure)
        click.echo(f"signed {pinned} with cosign key {key_id}")
        return
    if not Path(target).is_file():
        raise click.BadParameter(f"{target!r} is not a file (give --oci for an oci:// artifact)", param_hint="WASM")
    click.echo(str(sign_artifact(target, key_path, manifest=manifest)))


@cli.command()
@click.argument("name")
@click.option(
    "--lang",
    type=click.Choice(LANGUAGES),
    default="c",
    show_default=True,
    help="The tool's language: C, Python, TypeScript, Rust (a Cargo package) or Go (a module).",
)
@click.option(
    "-d", "--dir", "parent", default=".", show_default=True, type=click.Path(file_okay=False), help="Where NAME/ goes."
)
def new(name: str, lang: str, parent: str) -> None:
    """Start a tool NAME: its source, manifest and a test input in NAME/, and the commands to try it."""
    made = scaffold(name, lang, parent)
    for path in made.files:
        click.echo(f"wrote {path}")
    click.echo("\nbuild, register and call it:")
    for command in made.commands:
        click.echo(f"  {command}")


@cli.command("sdk-path")
def sdk_path() -> None:
    """Print where this installation keeps the guest SDK: the C header, the WIT world, the examples.

    The first line is the directory alone (for scripts: `cc -I "$(glovebox sdk-path | head -1)/c"`).
    """
    sdk = sdk_dir()
    click.echo(str(sdk))
    parts = [
        ("c/glovebox.h", "the C SDK, one header"),
        ("wit/", "the WIT world a tool's component implements"),
        ("python/", "the Python guest helper (glovebox_guest)"),
        ("rust/glovebox-guest/", "the Rust guest crate (glovebox build points cargo at it)"),
        ("go/", "the Go guest package glovebox/guest/glovebox and the WASI preview-1 adapter"),
        ("examples/", "example tools, each with its manifest"),
    ]
    for part, what in parts:
        if (sdk / part.rstrip("/")).exists():
            click.echo(f"  {part:<20} {what}")


@cli.command()
@click.argument("target", metavar="WASM|oci://REF|DIR")
@click.option("--manifest", type=click.Path(exists=True, dir_okay=False), help="Manifest file (default: beside WASM).")
@click.option("--signature", type=click.Path(dir_okay=False), help="Signature file (default: WASM.sig).")
@click.option("--oci", is_flag=True, help="TARGET is an oci:// artifact or an OCI layout: check its cosign signature.")
@click.option(
    "--key",
    "keys",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="With --oci: a cosign public key that may have signed it (repeatable; default: only the policy's keys).",
)
@click.option("--insecure", is_flag=True, help=INSECURE_HELP)
@click.pass_context
def verify(
    ctx: click.Context,
    target: str,
    manifest: str | None,
    signature: str | None,
    oci: bool,
    keys: tuple[str, ...],
    insecure: bool,
) -> None:
    """Check a tool artifact's signature against its manifest and the trusted keys, or with --oci
    an OCI artifact's cosign signature (nothing is registered).

    (The audit log's hash chain is checked by `glovebox audit verify`.)
    """
    if oci:
        with open_runtime(ctx) as rt:
            pinned, signer = rt.verify_oci(target, keys=list(keys), insecure=insecure)
        click.echo(f"ok: {pinned} signed by {signer}")
        return
    if not Path(target).is_file():
        raise click.BadParameter(f"{target!r} is not a file (give --oci for an oci:// artifact)", param_hint="WASM")
    signer = Keyring(home_of(ctx)).verify(target, manifest=manifest, signature=signature)
    click.echo(f"ok: {Path(target).name} sha256:{file_sha256(Path(target))} signed by {signer}")


def _parse_input(raw: str) -> Any:
    data = sys.stdin.buffer.read() if raw == "-" else raw
    try:
        return loads_json(data)
    except JsonRejected as exc:
        problem = str(exc)
        message = problem.removeprefix("is ") if problem.startswith("is not JSON") else f"the input {problem}"
        raise click.BadParameter(message) from exc


def _check_needs_no_input(rt: Runtime, name: str) -> None:
    """Refuse a call without ``--input`` to a tool whose input schema requires fields (click's words)."""
    try:
        schema = rt.tool(name).manifest.input_schema
    except GloveboxError:
        return  # an unknown or hidden tool: the call's envelope says so
    required = schema.get("required") if isinstance(schema, dict) else None
    if required:
        raise click.UsageError(f"Missing option '--input': {name} requires {', '.join(map(str, required))}")


@cli.command()
@click.argument("name")
@click.option(
    "--input",
    "raw_input",
    help="The input as JSON text ('-' reads stdin; default: {} for a tool whose input schema requires nothing).",
)
@click.option("--principal", help="Who is calling (default: anonymous).")
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Make the call N times in this one process; print the last envelope, and the first and warm "
    "duration_ms on stderr (a single CLI call is a cold process).",
)
@click.pass_context
def call(ctx: click.Context, name: str, raw_input: str | None, principal: str | None, repeat: int) -> None:
    """Call tool NAME (or NAME@VERSION); print the result envelope (exit 1 when the call failed).

    Its duration_ms is that of a cold process (the component loaded, the caches
    empty); --repeat N shows what the same call costs warm.
    """
    try:
        value = _parse_input(raw_input) if raw_input is not None else {}
    except click.BadParameter as exc:
        exc.param_hint = "'--input'"
        raise
    with open_runtime(ctx) as rt:
        if raw_input is None:
            _check_needs_no_input(rt, name)
        durations = []
        for _ in range(repeat):
            result = rt.call(name, value, principal=principal)
            durations.append(float(result.meta.get("duration_ms", 0.0)))
    click.echo(dump(result.to_dict()))
    if repeat > 1:
        click.echo(_timings(durations), err=True)
    sys.exit(0 if result.ok else 1)


def _timings(durations: list[float]) -> str:
    """``N calls: first X ms; warm (the other N-1) p50 Y ms, min Z ms`` from each call's duration_ms."""
    warm = sorted(durations[1:])
    return (
        f"{len(durations)} calls: first {durations[0]:.3f} ms; warm (the other {len(warm)}) "
        f"p50 {warm[len(warm) // 2]:.3f} ms, min {warm[0]:.3f} ms"
    )


@cli.command()
@click.option(
    "--keep",
    type=click.Path(file_okay=False),
    help="Use (and keep) this home (default: a temporary one, removed afterwards).",
)
def demo(keep: str | None) -> None:
    """Build the examples, register them in a throw-away home and show the sandbox at work."""
    from ._demo import run_demo

    sys.exit(run_demo(Path(keep) if keep else None))


cli.add_command(policy)
cli.add_command(breaker)
cli.add_command(approve)
cli.add_command(approvals)
cli.add_command(audit)
cli.add_command(serve)
cli.add_command(mcp)
cli.add_command(export)
cli.add_command(import_group)
cli.add_command(sql)
cli.add_command(secrets)
cli.add_command(connect)
cli.add_command(connections)
cli.add_command(run)
cli.add_command(runs)
cli.add_command(push)
cli.add_command(pull)
accept_global_options(cli)


def main() -> None:
    """Entry point of the ``glovebox`` console script."""
    cli(prog_name="glovebox")
