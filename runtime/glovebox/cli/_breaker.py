"""The ``breaker`` commands: list and reset the circuit breakers of a home (thin, like the rest of the CLI)."""

from __future__ import annotations

import click

from ..guards import BreakerState
from ._base import dump, open_runtime

__all__ = ["breaker", "describe_breaker"]


@click.group()
def breaker() -> None:
    """List and reset the circuit breakers of the policy's guards."""


@breaker.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@click.pass_context
def list_breakers(ctx: click.Context, as_json: bool) -> None:
    """List the breakers that are open, half-open, or closed with failures counted."""
    with open_runtime(ctx) as rt:
        states = rt.breakers()
    if as_json:
        click.echo(dump([state.to_dict() for state in states]))
        return
    if not states:
        click.echo("no breaker is open or counting failures")
    for state in states:
        click.echo(f"{state.scope} {state.key}: {describe_breaker(state)}")


@breaker.command()
@click.argument("tool", required=False)
@click.option(
    "--host",
    help="Reset the breaker of this upstream host instead of a tool's (default: none; with neither, every breaker).",
)
@click.pass_context
def reset(ctx: click.Context, tool: str | None, host: str | None) -> None:
    """Close the breaker of TOOL (or of --host H); with neither, close every breaker of the home."""
    if tool is not None and host is not None:
        raise click.UsageError("give a TOOL or --host H, not both")
    with open_runtime(ctx) as rt:
        closed = rt.reset_breakers(tool=tool, host=host)
    what = f"tool {tool}" if tool else f"host {host}" if host else "every breaker"
    click.echo(f"reset {what}: {closed} breaker{'s' if closed != 1 else ''} closed")


def describe_breaker(state: BreakerState) -> str:
    """``open (retry in 812 ms)``, ``half-open (a probe is running)`` or ``closed (2 recent failures)``."""
    if state.state == "open":
        return f"open (retry in {state.retry_after_ms} ms)"
    if state.state == "half_open":
        return "half-open (a probe is running)"
    return f"closed ({state.failures} recent failure{'s' if state.failures != 1 else ''})"
