"""The ``policy``, ``approve`` and ``audit`` commands (thin, like the rest of the CLI)."""

from __future__ import annotations

import json
import sys

import click

from ..audit._log import AuditLog, record_json
from ..guards import BreakerState
from ..policy import dead_entries, load_policy, policy_schema
from ..policy._guards import Guards
from ..runtime._runtime import Runtime
from ._base import dump, home_of, open_runtime
from ._breaker import describe_breaker

__all__ = ["approve", "audit", "policy"]


@click.group()
def policy() -> None:
    """Check, explain and describe policy documents."""


@policy.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.pass_context
def check(ctx: click.Context, file: str) -> None:
    """Validate FILE and report rules that can never match a registered tool (exit 1 if any)."""
    document = load_policy(file)
    with Runtime(home=home_of(ctx)) as rt:
        problems = dead_entries(document, rt.tools())
    for problem in problems:
        click.echo(f"{file}: {problem}")
    if problems:
        sys.exit(1)
    click.echo(f"{file}: ok ({len(document.rules)} rules, {len(document.principals)} principals)")


@policy.command()
@click.option("--principal", required=True, help="Who would call.")
@click.option("--tool", "tool", required=True, help="Tool NAME or NAME@VERSION.")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False), help="Policy file (default: --policy).")
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
@click.pass_context
def explain(ctx: click.Context, principal: str, tool: str, policy_file: str | None, as_json: bool) -> None:
    """Print what the policy decides for PRINCIPAL calling TOOL, and why."""
    with open_runtime(ctx, policy_file) as rt:
        decision = rt.explain(tool, principal=principal)
        name = rt.tool(tool).name
        states = [s for s in rt.breakers() if (s.scope, s.key) == ("tool", name)] if decision.guards.breaker else []
    if as_json:
        document = decision.to_dict()
        if states:
            document["breaker_state"] = states[0].to_dict()
        click.echo(dump(document))
        return
    click.echo(f"decision: {decision.action}")
    for line in decision.reason:
        click.echo(f"  because {line}")
    click.echo("limits: " + json.dumps(decision.limits.model_dump()))
    click.echo("grants: " + json.dumps(decision.grants.model_dump(mode="json", exclude_defaults=True)))
    click.echo("quotas:" + ("" if decision.quotas else " none"))
    for index, quota in decision.quotas:
        bounds = quota.model_dump(exclude_none=True, exclude={"tool", "principals"})
        shown = ", ".join(f"{name} {value}" for name, value in bounds.items())
        click.echo(f"  quotas[{index}] (tool {quota.tool!r}, principals {quota.principals}): {shown}, per principal")
    _echo_guards(decision.guards, states)


def _echo_guards(guards: Guards, states: list[BreakerState]) -> None:
    """The ``guards:`` lines of ``policy explain``: what is in force for the tool, and why."""
    shown = ["idempotent" if guards.idempotent else "not idempotent"]
    if guards.retries is not None:
        shown.append(f"retries {guards.retries.attempts} attempts on {', '.join(guards.retries.retry_on)}")
    if guards.breaker is not None:
        shown.append(f"breaker on {', '.join(guards.breaker.scopes)}")
    click.echo("guards: " + ", ".join(shown))
    for line in guards.reason:
        click.echo(f"  because {line}")
    if guards.breaker is not None:
        click.echo("breaker: " + (describe_breaker(states[0]) if states else "closed"))


@policy.command()
def schema() -> None:
    """Print the JSON Schema of policy documents."""
    click.echo(json.dumps(policy_schema(), indent=2, sort_keys=True))


@click.command()
@click.argument("approval_id")
@click.option("--principal", required=True, help="Who approves (needs the policy's approver scope).")
@click.pass_context
def approve(ctx: click.Context, approval_id: str, principal: str) -> None:
    """Approve a pending approval_required call, so it can run once."""
    with open_runtime(ctx) as rt:
        approval = rt.approve(approval_id, principal=principal)
    click.echo(f"approved {approval.id}: {approval.principal} may call {approval.tool} once with that input")


@click.group()
def audit() -> None:
    """Read, verify and export the audit log."""


@audit.command()
@click.option("-n", "count", default=20, show_default=True, help="How many records.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
def tail(ctx: click.Context, count: int, as_json: bool) -> None:
    """Print the newest audit records."""
    log = AuditLog(home_of(ctx))
    for record in log.tail(count):
        if as_json:
            click.echo(record_json(record))
        else:
            click.echo(
                f"{record['seq']:>6} {record['time']} {record['principal']} {record['tool']} "
                f"{record['decision'] or '-'} {record['outcome']} {record['duration_ms']}ms {record['call_id']}"
            )


@audit.command()
@click.option(
    "--anchor",
    metavar="HASH",
    help="A head hash printed by an earlier verify and kept off this host: fail unless the chain still holds it.",
)
@click.pass_context
def verify(ctx: click.Context, anchor: str | None) -> None:
    """Walk the hash chain; exit 1 naming the first changed, inserted or deleted row."""
    result = AuditLog(home_of(ctx)).verify(anchor=anchor)
    if not result.ok:
        click.echo(f"audit log TAMPERED: {result.problem}", err=True)
        sys.exit(1)
    click.echo(f"audit log ok: {result.rows} records, head {result.head_hash}")


@audit.command()
@click.option("--jsonl", is_flag=True, required=True, help="JSON Lines (the only format).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
@click.pass_context
def export(ctx: click.Context, jsonl: bool, output: str | None) -> None:
    """Export every audit record, with its hashes, as JSON Lines."""
    log = AuditLog(home_of(ctx))
    lines = (record_json(record) + "\n" for record in log.records())
    if output is None:
        for line in lines:
            click.echo(line, nl=False)
        return
    with open(output, "w", encoding="utf-8") as fh:
        fh.writelines(lines)
