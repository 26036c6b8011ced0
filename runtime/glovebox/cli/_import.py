"""The ``import`` command group: whole APIs as tools (thin: parse, call the library, print).

An importer is one module (``glovebox.importers._openapi``, ...) plus its CLI
subcommand, a :class:`click.Command`. Built-ins are listed in
:data:`DEFAULT_IMPORTERS`; another package adds one the same way, through
the entry-point group ``glovebox.importers`` (name = ``"module:command"``)::

    [project.entry-points."glovebox.importers"]
    har = "glovebox_har.cli:har"

Commands load only when the group lists or runs them; a plug-in cannot
replace a built-in of the same name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..importers import MAX_SPEC_BYTES, ImportResult, SecretHint, import_graphql, import_openapi, import_sql
from ._base import dump, open_runtime, progress_of

__all__ = ["DEFAULT_IMPORTERS", "ENTRY_POINT_GROUP", "ImporterGroup", "import_group"]

#: The entry-point group another package registers an importer's CLI subcommand in.
ENTRY_POINT_GROUP = "glovebox.importers"
#: The built-in importers: subcommand name to ``"module:command"``, registered as a plug-in's are.
DEFAULT_IMPORTERS = {
    "openapi": "glovebox.cli._import:openapi",
    "graphql": "glovebox.cli._import:graphql",
    "sql": "glovebox.cli._import:sql",
    "mcp": "glovebox.cli._import:import_mcp_command",
}

F = TypeVar("F", bound=Callable[..., Any])

_WIDENING = "Accept a re-import that lets an existing tool reach more (a new host, method, path or secret)."
_POLICY_OUT = "Write the policy fragment to FILE (default: print it)."


def _diff_options(command: F) -> F:
    """The options every import shares: --accept-widening, --dry-run, --json."""
    options = [
        click.option("--accept-widening", is_flag=True, help=_WIDENING),
        click.option("--dry-run", is_flag=True, help="Show what would change; register nothing."),
        click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


_max_bytes = click.option(
    "--max-spec-bytes",
    type=click.IntRange(min=1),
    default=MAX_SPEC_BYTES,
    show_default=True,
    help="The largest document read.",
)


class ImporterGroup(click.Group):
    """The ``import`` group: the built-in importers, then those of the ``glovebox.importers`` entry points
    (loaded when listed or run)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(_plugins()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = _plugins().get(cmd_name)
        if entry is None:
            return None
        command = entry.load()
        if isinstance(command, click.Command):
            return command
        problem = f"importer {cmd_name!r} ({entry.value}) is not a click command"

        def refuse() -> None:
            raise click.ClickException(problem)

        return click.Command(cmd_name, callback=refuse, help=problem, add_help_option=False)


def _load(target: str) -> click.Command:
    import importlib

    module, _, attr = target.partition(":")
    command = getattr(importlib.import_module(module), attr)
    assert isinstance(command, click.Command)
    return command


def _plugins() -> dict[str, Any]:
    """The importers other packages register, by name (a built-in's name is never taken)."""
    from importlib.metadata import entry_points

    return {e.name: e for e in entry_points(group=ENTRY_POINT_GROUP) if e.name not in DEFAULT_IMPORTERS}


@click.group("import", cls=ImporterGroup)
def import_group() -> None:
    """Register whole APIs (OpenAPI, GraphQL, remote MCP servers, SQL databases) as tools."""


@click.command("openapi")
@click.argument("spec")
@click.option("--name", help="API name: the tools' and scopes' prefix (default: from info.title).")
@click.option("--server", help="Base URL to call (default: the spec's first server).")
@click.option("--policy-out", type=click.Path(dir_okay=False), help=_POLICY_OUT)
@click.option(
    "--strict", is_flag=True, help="Refuse the whole document if one operation cannot be imported (default: skip it)."
)
@click.option(
    "--include",
    multiple=True,
    metavar="PATTERN",
    help=(
        "Import only operations with this tag or operationId, or a path when it starts with / (a glob;"
        " repeatable; default: every operation)."
    ),
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="PATTERN",
    help="Leave out operations matching PATTERN (as --include; default: none).",
)
@click.option(
    "--rename",
    multiple=True,
    metavar="OLD=NEW|FILE",
    callback=lambda ctx, param, values: _renames(values),
    help=(
        "Name a tool yourself: OLD an operationId, 'METHOD /path' or the tool name the import would make, NEW the"
        " name (<api>- added unless it starts so); or a YAML/JSON file mapping OLD to NEW (repeatable; default:"
        " the generated names)."
    ),
)
@_max_bytes
@_diff_options
@click.pass_context
def openapi(ctx: click.Context, /, spec: str, **options: Any) -> None:
    """Register each operation of the OpenAPI 3.x or Swagger 2.0 document SPEC (a file or a URL) as a tool.

    An operation that cannot be a tool is skipped, with its reason in the report, unless --strict.
    """
    _import(ctx, import_openapi, spec, **options)


def _renames(values: tuple[str, ...]) -> dict[str, str]:
    from ..importers._rename import parse_renames

    try:
        return parse_renames(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--rename") from exc


@click.command("graphql")
@click.argument("schema", type=click.Path(exists=True, dir_okay=False))
@click.option("--endpoint", required=True, help="The GraphQL endpoint URL the tools POST to.")
@click.option("--name", help="API name: the tools' and scopes' prefix (default: the file's stem).")
@click.option("--depth", type=click.IntRange(min=1, max=8), default=2, show_default=True, help="Selection depth.")
@click.option("--policy-out", type=click.Path(dir_okay=False), help=_POLICY_OUT)
@click.option(
    "--bearer-env",
    metavar="VAR",
    help="Send the environment variable VAR as 'Authorization: Bearer <value>' (the host adds it; default: none).",
)
@click.option(
    "--bearer-secret",
    metavar="REF",
    help="Send the secret REF as 'Authorization: Bearer <value>' instead of --bearer-env: "
    "connection://API/{principal} (each principal's OAuth connection), keyring://SERVICE/USER, exec://... "
    "(default: none).",
)
@click.option(
    "--header-env",
    "header_env",
    multiple=True,
    metavar="HEADER=VAR",
    help="Send the environment variable VAR in HEADER (repeatable; the host adds it; default: none).",
)
@_max_bytes
@_diff_options
@click.pass_context
def graphql(ctx: click.Context, /, schema: str, header_env: tuple[str, ...], **options: Any) -> None:
    """Register each Query and Mutation field of the GraphQL schema SCHEMA (SDL or introspection JSON).

    A tool whose answer is an object takes `fields`, a GraphQL selection set checked against the schema.
    """
    headers = {}
    for pair in header_env:
        header, sep, env = pair.partition("=")
        if not sep or not header or not env:
            raise click.UsageError(f"--header-env {pair!r}: expected HEADER=VAR")
        headers[header] = env
    from ..importers._graphql import check_bearer

    try:  # before the home is opened: a usage error
        check_bearer(options.get("bearer_env"), options.get("bearer_secret"))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    _import(ctx, import_graphql, schema, header_env=headers, **options)


@click.command("sql")
@click.argument("dsn")
@click.option("--name", required=True, help="Database alias: the tools are NAME-query and NAME-execute.")
@click.option("--policy-out", type=click.Path(dir_okay=False), help=_POLICY_OUT)
@click.option(
    "--password-env", metavar="VAR", help="PostgreSQL: the environment variable holding the password (default: none)."
)
@click.option(
    "--password-file",
    metavar="PATH",
    type=click.Path(dir_okay=False),
    help="PostgreSQL: a file holding the password (default: none).",
)
@click.option(
    "--password-ref",
    metavar="REF",
    help="PostgreSQL: a secret reference for the password: keyring://SERVICE/USER, exec://..., encrypted://NAME,"
    " env://VAR, file:///path (default: none).",
)
@click.option("--dry-run", is_flag=True, help="Show what would change; register nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def sql(
    ctx: click.Context,
    /,
    dsn: str,
    password_env: str | None,
    password_file: str | None,
    password_ref: str | None,
    **options: Any,
) -> None:
    """Register the database DSN (sqlite:///path.db or postgresql://user@host/db) as two tools:
    NAME-query (SELECT only) and NAME-execute."""
    if sum(1 for given in (password_env, password_file, password_ref) if given) > 1:
        raise click.UsageError("give one of --password-env, --password-file or --password-ref")
    password = None
    if password_ref:
        if "://" not in password_ref:
            raise click.UsageError("--password-ref takes a reference such as keyring://SERVICE/USER")
        password = {"source": password_ref}
    elif password_env:
        password = {"provider": "env", "source": password_env}
    elif password_file:
        password = {"provider": "file", "source": str(Path(password_file).resolve())}
    _import(ctx, import_sql, dsn, password=password, **options)


def _import(
    ctx: click.Context,
    run: Callable[..., ImportResult],
    source: str | None,
    *,
    as_json: bool,
    policy_out: str | None = None,
    **options: Any,
) -> None:
    """Run one import with the command's options and print its result (steps on a terminal, unless -q)."""
    import time

    say, started = progress_of(ctx), time.perf_counter()
    with open_runtime(ctx) as rt:
        result = run(rt, source, progress=say, **options)
    if say is not None:
        say(f"done in {time.perf_counter() - started:.1f} s")
    _report(result, policy_out, as_json)


def _secret_line(hint: SecretHint) -> str:
    """What the operator provides for one secret of an import."""
    if hint.source.startswith("connection://"):  # an OAuth scheme: a connection per principal
        value = hint.format.replace("{value}", f"<{hint.source}>")
        api = hint.source.removeprefix("connection://").partition("/")[0]
        return f"secret: glovebox connect {api} --account PRINCIPAL, for each principal ({hint.header}: {value})"
    if hint.source:  # another reference: the host reads it where it points
        return f"secret: from {hint.source} ({hint.header}: {hint.format.replace('{value}', f'<{hint.source}>')})"
    return f"secret: set {hint.env} ({hint.header}: {hint.format.replace('{value}', '<' + hint.env + '>')})"


def _report(result: ImportResult, policy_out: str | None, as_json: bool) -> None:
    """Print what an import did, the same way for every kind: the diff, secrets, notes, the policy fragment."""
    if policy_out is not None:
        Path(policy_out).write_text(result.policy_yaml(), encoding="utf-8")
    if as_json:
        click.echo(dump(result.to_dict()))
        return
    verb = "would import" if result.dry_run else "imported"
    click.echo(
        f"{verb} {result.api} ({result.kind}): {len(result.added)} added, {len(result.changed)} changed, "
        f"{len(result.removed)} removed, {len(result.unchanged)} unchanged"
    )
    for label, names in (("+", result.added), ("~", result.changed)):
        for tool in names:
            click.echo(f"  {label} {result.ref(tool)}")
    for tool in result.removed:
        click.echo(f"  - {tool}")
    for line in result.widened:
        click.echo(f"  widened: {line}")
    if result.skipped:
        click.echo(f"skipped {len(result.skipped)} operation(s) that cannot be tools:")
    for skip in result.skipped:
        click.echo(f"  ! {skip['operation']}: {skip['reason']}")
    for hint in result.secrets:
        click.echo(_secret_line(hint))
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if policy_out is not None:
        click.echo(f"policy fragment written to {policy_out}")
    elif result.policy:
        click.echo("--- policy fragment (merge into your policy) ---")
        click.echo(result.policy_yaml(), nl=False)


@click.command("mcp")
@click.argument("url", required=False)
@click.option(
    "--command",
    metavar="'CMD ARGS...'",
    help="A local server instead of URL: the command line that starts it (stdio; split like a shell; default: none).",
)
@click.option(
    "--env",
    "env",
    multiple=True,
    metavar="NAME=VALUE",
    help="A --command server's environment variable (repeatable; default: none; it gets no other of the host's).",
)
@click.option(
    "--env-secret",
    "env_secrets",
    multiple=True,
    metavar="NAME=SECRET_NAME",
    help="Give a --command server the host's variable SECRET_NAME as NAME (repeatable; names stored; default: none).",
)
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "bwrap", "none"]),
    default="auto",
    show_default=True,
    help="A --command server's OS sandbox: bubblewrap where it runs (auto), always (bwrap), or none.",
)
@click.option("--name", "prefix", help="Tool name prefix (default: the server's name).")
@click.option("--scope", "scopes", multiple=True, help="Scope a caller needs (repeatable; default PREFIX:call).")
@click.option(
    "--header-secret",
    "header_secrets",
    multiple=True,
    metavar="HEADER=SECRET_NAME",
    help="Send the environment variable SECRET_NAME in HEADER (repeatable; only the name is stored; default: none).",
)
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=1),
    help="Deadline of each call (limits.timeout_ms; default: the manifest default).",
)
@click.option(
    "--output-bytes",
    type=click.IntRange(min=1),
    help="Largest output of a call (limits.output_bytes; default: the manifest default).",
)
@click.option(
    "--propagate-trace",
    is_flag=True,
    help="Send each call's W3C trace context to the server (off: the server learns no trace ids).",
)
@click.option(
    "--watch",
    is_flag=True,
    help="After the import, stay connected and refresh (audited; a widening is held) whenever the server "
    "says its tools, resources or prompts changed, until interrupted.",
)
@_diff_options
@click.pass_context
def import_mcp_command(
    ctx: click.Context, /, url: str | None, prefix: str | None, scopes: tuple[str, ...], watch: bool, **options: Any
) -> None:
    """Register (or refresh) every tool of the MCP server at URL (streamable HTTP), or of the local
    server --command starts (stdio); a server URL's resources, prompts and completions become read
    tools (PREFIX-read-resource, PREFIX-get-prompt, PREFIX-complete)."""
    from ..importers import import_mcp

    if (url is None) == (options["command"] is None):
        raise click.UsageError("give the server's URL or --command 'CMD ARGS...' (one of them)")
    if watch and url is None:
        raise click.UsageError(
            "--watch follows a server URL's list changes; a --command server is refreshed by importing it again"
        )
    _import(ctx, import_mcp, url, name=prefix, scopes=scopes or None, **options)
    if watch:
        assert url is not None
        keep = ("header_secrets", "timeout_ms", "output_bytes", "propagate_trace")
        _watch_mcp(ctx, url, name=prefix, scopes=scopes or None, **{k: options[k] for k in keep if k in options})


def _watch_mcp(ctx: click.Context, url: str, **settings: Any) -> None:
    """Refresh the import on each list change the server tells, printing one line each, until interrupted."""
    import anyio

    from ..importers._mcpwatch import watch_mcp

    def said(result: Any) -> None:
        remote = result.meta.get("remote", {})
        click.echo(f"refresh of {url}: {remote.get('status')} {remote.get('code', '')}".rstrip())

    click.echo(f"watching {url} for list changes (Ctrl-C to stop)")
    with open_runtime(ctx) as rt, contextlib.suppress(KeyboardInterrupt):
        anyio.run(lambda: watch_mcp(rt, url, on_refresh=said, **settings))


for _name, _target in DEFAULT_IMPORTERS.items():  # the built-ins, registered from the same list a reader sees
    import_group.add_command(_load(_target), _name)
