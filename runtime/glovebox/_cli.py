"""The ``glovebox`` command line. Thin: parse, call the library, format.

Exit codes: 0 success; 1 a failed call, a refused registration/build, a
refused approval, a policy with problems or a tampered audit log; 2 a usage
error (bad flags, --input that is not JSON).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ._build import build as build_tool
from ._cli_policy import approve, audit, policy
from ._errors import GloveboxError
from ._result import ToolInfo
from ._runtime import Runtime

__all__ = ["main"]


def _runtime(ctx: click.Context) -> Runtime:
    home = ctx.find_root().params.get("home")
    policy = ctx.find_root().params.get("policy")
    return Runtime(home=home, policy=policy)


def _fail(error: GloveboxError) -> None:
    click.echo(f"error [{error.code}]: {error.message}", err=True)
    sys.exit(error.exit_code)


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="GLOVEBOX_HOME", type=click.Path(file_okay=False), help="Store, caches and index.")
@click.option("--policy", envvar="GLOVEBOX_POLICY", type=click.Path(dir_okay=False), help="Policy file.")
@click.version_option(package_name="glovebox")
def cli(home: str | None, policy: str | None) -> None:
    """Run AI-agent tools as WebAssembly components, one fresh sandbox per call."""


@cli.command()
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="Where to write the .wasm component.")
def build(src: str, out: str | None) -> None:
    """Build a tool from C source into a component (SRC.wasm by default)."""
    try:
        path = build_tool(src, out)
    except GloveboxError as error:
        _fail(error)
    click.echo(str(path))


@cli.command()
@click.argument("wasm", type=click.Path(exists=True, dir_okay=False))
@click.option("--manifest", type=click.Path(exists=True, dir_okay=False), help="Manifest file (.toml or .json).")
@click.option("--json", "as_json", is_flag=True, help="Print the registered tool as JSON.")
@click.pass_context
def register(ctx: click.Context, wasm: str, manifest: str | None, as_json: bool) -> None:
    """Validate and register a .wasm component."""
    with _runtime(ctx) as rt:
        try:
            info = rt.register(wasm, manifest)
        except GloveboxError as error:
            _fail(error)
    if as_json:
        click.echo(_dump(info.to_dict()))
    else:
        click.echo(f"registered {info.name}@{info.version} {info.digest}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def tools(ctx: click.Context, as_json: bool) -> None:
    """List the registered tools."""
    with _runtime(ctx) as rt:
        infos = rt.tools()
    if as_json:
        click.echo(_dump([info.to_dict() for info in infos]))
        return
    if not infos:
        click.echo("no tools registered (add one with `glovebox register TOOL.wasm`)")
        return
    click.echo(_table(infos))


def _table(infos: list[ToolInfo]) -> str:
    rows = [("NAME", "VERSION", "DIGEST", "DESCRIPTION")]
    rows += [(i.name, i.version, i.digest[7:19], i.description[:60]) for i in infos]
    widths = [max(len(row[col]) for row in rows) for col in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    )


def _parse_input(raw: str) -> Any:
    text = sys.stdin.read() if raw == "-" else raw
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


@cli.command()
@click.argument("name")
@click.option("--input", "raw_input", required=True, help="The input as JSON text ('-' reads stdin).")
@click.option("--principal", help="Who is calling (default: anonymous).")
@click.pass_context
def call(ctx: click.Context, name: str, raw_input: str, principal: str | None) -> None:
    """Call tool NAME (or NAME@VERSION); print the result envelope."""
    try:
        value = _parse_input(raw_input)
    except click.BadParameter as exc:
        exc.param_hint = "'--input'"
        raise
    with _runtime(ctx) as rt:
        result = rt.call(name, value, principal=principal)
    click.echo(_dump(result.to_dict()))
    sys.exit(0 if result.ok else 1)


@cli.command()
@click.option("--keep", type=click.Path(file_okay=False), help="Use (and keep) this home instead of a temporary one.")
def demo(keep: str | None) -> None:
    """Build the examples, register them in a throw-away home and show the sandbox at work."""
    from ._demo import run_demo

    sys.exit(run_demo(Path(keep) if keep else None))


cli.add_command(policy)
cli.add_command(approve)
cli.add_command(audit)


def main() -> None:
    """Entry point of the ``glovebox`` console script."""
    cli(prog_name="glovebox")
