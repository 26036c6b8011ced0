"""The ``sql`` command group: what an operator sets up on a database for a grant (thin, like the rest)."""

from __future__ import annotations

import re

import click

from ..capabilities._postgres import role_statements
from ..core._settings import policy_file as policy_from_env
from ..policy import load_policy

__all__ = ["sql"]


@click.group("sql")
def sql() -> None:
    """Set databases up for the sql capability's grants."""


@sql.command("role")
@click.argument("alias")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False), help="Policy file (default: --policy).")
@click.option("--role", "role", help="The role's name (default: glovebox_ALIAS).")
@click.pass_context
def role(ctx: click.Context, alias: str, policy_file: str | None, role: str | None) -> None:
    """Print the SQL that makes a PostgreSQL role holding only what the policy grants ALIAS.

    Run it as the database's owner, give the role a password, and make it the
    DSN's user: then the server refuses, whatever the host believed, every
    privilege the grant does not hold (file reads, COPY TO PROGRAM, DDL, ...).
    """
    source = policy_file or ctx.find_root().params.get("policy") or policy_from_env()
    if not source:
        raise click.UsageError("give --policy FILE (or set GLOVEBOX_POLICY)")
    document = load_policy(source)
    grants = [(rule.tool, grant) for rule in document.grants for grant in rule.sql if grant.database == alias]
    if not grants:
        raise click.UsageError(f"the policy {source} grants no database {alias!r}")
    name = role or "glovebox_" + re.sub(r"[^a-z0-9_]", "_", alias)
    for tool, grant in grants:
        if grant.engine != "postgresql":
            raise click.UsageError(f"{alias!r} is a SQLite database: it has no roles (its authorizer holds the grant)")
        click.echo(f"-- {alias} as granted to tools {tool!r}: run as the database's owner")
        for line in role_statements(grant, name):
            click.echo(line)
