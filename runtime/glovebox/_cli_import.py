"""``glovebox import``: whole APIs as tools (``import mcp URL``)."""

from __future__ import annotations

import click

from ._cli_base import dump, open_runtime

__all__ = ["import_group"]


@click.group("import")
def import_group() -> None:
    """Register whole APIs as tools (all of an import's tools or none)."""


@import_group.command("mcp")
@click.argument("url")
@click.option("--name", "prefix", help="Tool name prefix (default: the server's name).")
@click.option("--scope", "scopes", multiple=True, help="Scope a caller needs (repeatable; default PREFIX:call).")
@click.option(
    "--header-secret",
    "header_secrets",
    multiple=True,
    metavar="HEADER=SECRET_NAME",
    help="Send the environment variable SECRET_NAME in HEADER (repeatable; only the name is stored).",
)
@click.option("--timeout-ms", type=click.IntRange(min=1), help="Deadline of each call (limits.timeout_ms).")
@click.option("--output-bytes", type=click.IntRange(min=1), help="Largest output of a call (limits.output_bytes).")
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
@click.pass_context
def import_mcp_command(
    ctx: click.Context,
    url: str,
    prefix: str | None,
    scopes: tuple[str, ...],
    header_secrets: tuple[str, ...],
    timeout_ms: int | None,
    output_bytes: int | None,
    as_json: bool,
) -> None:
    """Register (or refresh) every tool of the remote MCP server at URL (streamable HTTP)."""
    from .importers import import_mcp

    with open_runtime(ctx) as rt:
        result = import_mcp(
            rt,
            url,
            name=prefix,
            scopes=scopes or None,
            header_secrets=header_secrets,
            timeout_ms=timeout_ms,
            output_bytes=output_bytes,
        )
    click.echo(dump(result.to_dict()) if as_json else "\n".join(result.lines()))
