"""``glovebox connect NAME`` and ``glovebox connections list|revoke|rm``: OAuth connections of a home.

The command parses and hands over to :mod:`glovebox.connections`; a refusal
prints ``error [CODE]: message`` (the codes of :class:`ConnectError`) and
exits 1. No command prints a token.
"""

from __future__ import annotations

import time
import webbrowser
from datetime import UTC, datetime
from pathlib import Path

import click

from ..connections import (
    CALLBACK_PATH,
    DEFAULT_ACCOUNT,
    ConnectError,
    ConnectionRecord,
    ConnectionStore,
    ConnectSettings,
    begin,
    device_flow,
    prepare,
    revoke,
    wait,
)
from ..core._errors import GloveboxError
from ..core._settings import policy_file
from ..policy import load_policy
from ._base import CliError, dump, home_of

__all__ = ["connect", "connections"]


def _issuers(ctx: click.Context) -> list[str]:
    path = ctx.find_root().params.get("policy") or policy_file()
    if path is None:
        return []
    try:
        return list(load_policy(path).connections.issuers)
    except GloveboxError as error:
        raise CliError("invalid_policy", str(error)) from None


def _imported_resource(home: Path, name: str) -> str | None:
    """The URL the import named ``name`` calls: a remote MCP server's URL (from its tools' stored
    descriptors), or an OpenAPI/GraphQL API's base URL (from its operations); None when nothing is imported
    under that name.

    Raises:
        click.UsageError: the name's tools call several servers (which one to connect is for --resource).
    """
    if not (home / "registry.sqlite").exists():
        return None
    from ..registry._registry import Registry
    from ..remote._proxy import load_descriptor

    registry = Registry(home)
    urls: set[str] = set()
    try:
        for info in registry.entries(include_deprecated=False):
            operation = info.manifest.operation
            if operation is not None:
                if operation.api == name:
                    urls.add(operation.url)
            elif info.kind == "mcp-remote" and info.name.startswith(f"{name}-"):
                try:
                    descriptor = load_descriptor(registry.descriptor_path(info.digest), info.digest)
                except GloveboxError:
                    continue  # gone or changed on disk: names no server
                if descriptor.command is None:  # a stdio server has no URL to connect
                    urls.add(descriptor.url)
    finally:
        registry.close()
    if len(urls) > 1:
        raise click.UsageError(f"the tools of {name!r} call {', '.join(sorted(urls))}; say which with --resource URL")
    return urls.pop() if urls else None


def _settings(name: str, **given: str | None) -> ConnectSettings:
    try:
        return ConnectSettings(name=name, **{k: v for k, v in given.items() if v is not None})
    except ValueError as error:
        raise click.UsageError(str(error)) from None


@click.command()
@click.argument("name")
@click.option(
    "--resource",
    help="URL of the API or remote MCP server; its RFC 9728 metadata names the issuer (default: the URL the "
    "import named NAME calls: its server URL, or its API's base URL).",
)
@click.option(
    "--issuer", help="The authorization server's issuer URL (default: the one the resource's metadata names)."
)
@click.option("--account", default=DEFAULT_ACCOUNT, show_default=True, help="The account this connection is for.")
@click.option("--scope", default="", help="Scopes to ask for, space-separated (default: none asked).")
@click.option("--client-id", help="A registered client's id (default: dynamic client registration, RFC 7591).")
@click.option("--client-secret-ref", help="A secret reference holding --client-id's secret (default: a public client).")
@click.option("--device", is_flag=True, help="Use the device flow (RFC 8628) in this terminal instead of the browser.")
@click.option(
    "--console",
    "console_url",
    default="http://127.0.0.1:8000",
    show_default=True,
    help="The glovebox serve whose console receives the browser's callback.",
)
@click.option("--no-browser", is_flag=True, help="Print the URL to open instead of opening a browser.")
@click.option("--timeout-s", default=300.0, show_default=True, help="Seconds to wait for the authorization.")
@click.pass_context
def connect(
    ctx: click.Context,
    name: str,
    resource: str | None,
    issuer: str | None,
    account: str,
    scope: str,
    client_id: str | None,
    client_secret_ref: str | None,
    device: bool,
    console_url: str,
    no_browser: bool,
    timeout_s: float,
) -> None:
    """Connect NAME (an imported API or remote MCP server) to an account with OAuth 2.1.

    The token is then named connection://NAME/ACCOUNT (a policy's secrets, --header-secret).
    """
    home = home_of(ctx)
    if resource is None:
        resource = _imported_resource(home, name)
        if resource is None and issuer is None:
            raise click.UsageError(
                f"{name!r} is not an imported API or remote MCP server of {home}; "
                "give the URL to connect with --resource URL (or the authorization server with --issuer URL)"
            )
    settings = _settings(
        name, resource=resource, issuer=issuer, account=account, scope=scope,
        client_id=client_id, client_secret_ref=client_secret_ref,
    )  # fmt: skip
    store = ConnectionStore(home)
    redirect = None if device else console_url.rstrip("/") + CALLBACK_PATH
    try:
        prepared = prepare(settings, _issuers(ctx), redirect)
        if device:
            record = device_flow(prepared, store, _show_device)
        else:
            assert redirect is not None
            url, state = begin(prepared, redirect, store)
            click.echo(f"open this URL to authorize {name} (account {account}):\n{url}", err=True)
            if not no_browser:
                webbrowser.open(url)
            record = wait(store, state, timeout_s)
    except ConnectError as error:
        raise CliError(error.code, error.message) from None
    click.echo(
        f"connected {record.name}/{record.account} with {record.issuer}: connection://{record.name}/{record.account}"
    )


def _show_device(uri: str, code: str, complete: str | None) -> None:
    click.echo(f"open {complete or uri} and enter the code {code}", err=True)


@click.group()
def connections() -> None:
    """List and revoke the home's OAuth connections (glovebox connect makes them)."""


def _row(record: ConnectionRecord, now: float) -> dict[str, object]:
    expires = record.expires_at
    return {
        "name": record.name,
        "account": record.account,
        "status": record.status(now),
        "issuer": record.issuer,
        "resource": record.resource,
        "scope": record.scope,
        "expires": datetime.fromtimestamp(expires, UTC).isoformat(timespec="seconds") if expires else None,
        "reference": f"connection://{record.name}/{record.account}",
    }


@connections.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@click.pass_context
def list_connections(ctx: click.Context, as_json: bool) -> None:
    """Each connection: its status (valid, refreshable, expired, revoked), issuer and expiry (never a token)."""
    try:
        rows = [_row(record, time.time()) for record in ConnectionStore(home_of(ctx)).records()]
    except ConnectError as error:
        raise CliError(error.code, error.message) from None
    if as_json:
        click.echo(dump(rows))
        return
    if not rows:
        click.echo("no connection; glovebox connect NAME makes one")
    for row in rows:
        click.echo(f"{row['name']}/{row['account']}  {row['status']}  {row['issuer']}  expires {row['expires'] or '-'}")


@connections.command(name="revoke")
@click.argument("name")
@click.option("--account", default=DEFAULT_ACCOUNT, show_default=True, help="The account whose connection to revoke.")
@click.pass_context
def revoke_connection(ctx: click.Context, name: str, account: str) -> None:
    """Revoke NAME's tokens at the server (RFC 7009, when it offers it) and mark it revoked here."""
    try:
        record, told = revoke(ConnectionStore(home_of(ctx)), name, account)
    except ConnectError as error:
        raise CliError(error.code, error.message) from None
    where = "at the server and here" if told else "here (the server offers no revocation)"
    click.echo(f"revoked {record.key} {where}")


@connections.command(name="rm")
@click.argument("name")
@click.option("--account", default=DEFAULT_ACCOUNT, show_default=True, help="The account whose connection to remove.")
@click.pass_context
def remove_connection(ctx: click.Context, name: str, account: str) -> None:
    """Forget NAME (its record and every token; revoke it first to tell the server)."""
    store = ConnectionStore(home_of(ctx))
    try:
        store.remove(store.get(name, account))
    except ConnectError as error:
        raise CliError(error.code, error.message) from None
    click.echo(f"removed {name}/{account}")
