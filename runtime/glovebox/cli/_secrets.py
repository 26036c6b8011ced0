"""The ``secrets`` commands: the home's encrypted store (set, list, rm) and a reference check.

A value is read from standard input, never from the command line (where
``ps`` and shell history would see it); no command prints a value.
"""

from __future__ import annotations

import sys

import click

from ..capabilities._providers import SecretUnavailable, get_secret
from ..capabilities._vault import SecretStore
from ._base import dump, home_of

__all__ = ["secrets"]

#: The most read from standard input for one value (bytes).
MAX_STDIN = 64 * 1024


@click.group()
def secrets() -> None:
    """Manage the home's encrypted secret store (encrypted://NAME) and check references."""


@secrets.command(name="set")
@click.argument("name")
@click.pass_context
def set_secret(ctx: click.Context, name: str) -> None:
    """Store the value read from standard input as NAME (one trailing newline is dropped)."""
    data = sys.stdin.buffer.read(MAX_STDIN + 1)
    if len(data) > MAX_STDIN:
        raise click.UsageError(f"the value is over {MAX_STDIN} bytes")
    value = data[:-1] if data.endswith(b"\n") else data
    try:
        SecretStore(home_of(ctx)).set(name, value)
    except (ValueError, SecretUnavailable) as error:
        raise click.UsageError(str(error)) from None
    click.echo(f"stored encrypted://{name}")


@secrets.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@click.pass_context
def list_secrets(ctx: click.Context, as_json: bool) -> None:
    """List the store's entries and when each was set (never a value)."""
    entries = SecretStore(home_of(ctx)).names()
    if as_json:
        click.echo(dump(entries))
        return
    if not entries:
        click.echo("the store holds no secret")
    for entry in entries:
        click.echo(f"encrypted://{entry['name']}  set {entry['updated']}")


@secrets.command(name="rm")
@click.argument("name")
@click.pass_context
def remove_secret(ctx: click.Context, name: str) -> None:
    """Remove NAME from the store (exit 1 when there is no such entry)."""
    try:
        removed = SecretStore(home_of(ctx)).remove(name)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if not removed:
        click.echo(f"no entry {name!r} in the store", err=True)
        ctx.exit(1)
    click.echo(f"removed encrypted://{name}")


@secrets.command(name="check")
@click.argument("reference")
@click.pass_context
def check_secret(ctx: click.Context, reference: str) -> None:
    """Read REFERENCE (env://, file://, keyring://, exec://, encrypted://) and say whether it has a value.

    Prints the value's length, never the value; exit 1 when it cannot be read.
    """
    try:
        value = get_secret(reference)
    except SecretUnavailable as error:
        click.echo(f"unavailable: {error}", err=True)
        ctx.exit(1)
    click.echo(f"ok: {len(value)} bytes")
