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

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..importers import MAX_SPEC_BYTES, ImportResult, import_graphql, import_openapi, import_sql
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
@_max_bytes
@_diff_options
@click.pass_context
def openapi(ctx: click.Context, /, spec: str, **options: Any) -> None:
    """Register each operation of the OpenAPI 3.x document SPEC (a file or a URL) as a tool.

    An operation that cannot be a tool is skipped, with its reason in the report, unless --strict.
    """
    _import(ctx, import_openapi, spec, **options)


@click.command("graphql")
@click.argument("schema", type=click.Path(exists=True, dir_okay=False))
@click.option("--endpoint", required=True, help="The GraphQL endpoint URL the tools POST to.")
@click.option("--name", help="API name: the tools' and scopes' prefix (default: the file's stem).")
@click.option("--depth", type=click.IntRange(min=1, max=8), default=2, show_default=True, help="Selection depth.")
@click.option("--policy-out", type=click.Path(dir_okay=False), help=_POLICY_OUT)
@_max_bytes
@_diff_options
@click.pass_context
def graphql(ctx: click.Context, /, schema: str, **options: Any) -> None:
    """Register each Query and Mutation field of the GraphQL schema SCHEMA (SDL or introspection JSON)."""
    _import(ctx, import_graphql, schema, **options)


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
    source: str,
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
        click.echo(f"secret: set {hint.env} ({hint.header}: {hint.format.replace('{value}', '<' + hint.env + '>')})")
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if policy_out is not None:
        click.echo(f"policy fragment written to {policy_out}")
    elif result.policy:
        click.echo("--- policy fragment (merge into your policy) ---")
        click.echo(result.policy_yaml(), nl=False)


@click.command("mcp")
@click.argument("url")
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
@_diff_options
@click.pass_context
def import_mcp_command(
    ctx: click.Context, /, url: str, prefix: str | None, scopes: tuple[str, ...], **options: Any
) -> None:
    """Register (or refresh) every tool of the remote MCP server at URL (streamable HTTP)."""
    from ..importers import import_mcp

    _import(ctx, import_mcp, url, name=prefix, scopes=scopes or None, **options)


for _name, _target in DEFAULT_IMPORTERS.items():  # the built-ins, registered from the same list a reader sees
    import_group.add_command(_load(_target), _name)
