"""The ``policy``, ``approve``, ``approvals`` and ``audit`` commands (thin, like the rest of the CLI)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..audit._filter import RecordFilter, newest, parse_since
from ..audit._log import AuditLog, record_json
from ..guards import BreakerState
from ..policy import Approval, dead_entries, iso_time, load_policy, policy_schema
from ..policy._guards import Guards
from ..runtime._runtime import Runtime
from ._base import again, dump, home_of, open_runtime
from ._breaker import describe_breaker

__all__ = ["approvals", "approve", "audit", "policy"]

F = TypeVar("F", bound=Callable[..., Any])
#: Approval requests ``approvals list`` shows at once unless ``--limit`` says otherwise.
DEFAULT_PAGE = 100


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
    if guards.checks is not None:
        shown.append(
            "checks" + (f" judged by {', '.join(guards.checks.evaluators)}" if guards.checks.evaluators else "")
        )
    if guards.fallback:
        shown.append(f"fallback to {', '.join(guards.fallback)}")
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
    """Approve a pending approval_required call, so it can run once.

    Give the policy that asked for the approval (--policy or GLOVEBOX_POLICY):
    it says who holds the approver scope.
    """
    with open_runtime(ctx) as rt:
        approval = rt.approve(approval_id, principal=principal)
    click.echo(
        f"approved {approval.id}: {approval.principal} may call {approval.tool} once with that input"
        f" until {iso_time(approval.expires_at)}"
    )


@click.group()
def approvals() -> None:
    """List and deny approval requests (approve one with `glovebox approve ID --principal P`)."""


@approvals.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (Unix times, each with an ISO 8601 twin).")
@click.option(
    "--limit", default=DEFAULT_PAGE, show_default=True, type=click.IntRange(1), help="Requests shown at most."
)
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0), help="Requests skipped first.")
@click.pass_context
def approvals_list(ctx: click.Context, as_json: bool, limit: int, offset: int) -> None:
    """List the pending, unexpired approval requests, oldest first (times in UTC), a page at a time."""
    with open_runtime(ctx) as rt:
        pending = rt.pending_approvals(offset=offset, limit=limit + 1)  # one more says whether a page follows
    more, pending = len(pending) > limit, pending[:limit]
    if as_json:
        click.echo(dump([approval.to_dict() for approval in pending]))
        return
    if not pending:
        click.echo("no pending approval requests" + (f" from offset {offset}" if offset else ""))
        return
    click.echo(_approval_table(pending))
    if more:
        page = ["--limit", str(limit)] if limit != DEFAULT_PAGE else []
        next_page = again(ctx, "approvals", "list", *page, "--offset", str(offset + limit))
        click.echo(f"more are waiting: {next_page}", err=True)


def _approval_table(pending: list[Approval]) -> str:
    statements = any(a.statement for a in pending)
    rows = [("ID", "PRINCIPAL", "TOOL", "REQUESTED", "EXPIRES", "INPUT", *(["STATEMENT"] if statements else []))]
    rows += [
        (a.id, a.principal, a.tool, iso_time(a.created_at), iso_time(a.expires_at), a.input_digest[:19],
         *([_statement(a)] if statements else []))
        for a in pending
    ]  # fmt: skip
    widths = [max(len(row[col]) for row in rows) for col in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def _statement(approval: Approval) -> str:
    """A SQL request's statement on one line: ``database kind: text [params]`` (the fingerprint
    when the policy does not store inputs); ``-`` for a call's request."""
    shown = approval.shown
    if shown is None:
        return "-"
    text = " ".join(str(shown.get("statement") or shown.get("fingerprint", "")).split())
    params = f" {json.dumps(shown['params'], ensure_ascii=False)}" if shown.get("params") else ""
    line = f"{shown.get('database', '?')} {shown.get('kind', '?')}: {text}{params}"
    return line if len(line) <= 200 else line[:199] + "…"


@approvals.command("deny")
@click.argument("approval_id")
@click.option("--reason", required=True, help="Why: the waiting caller is told this (permission_denied).")
@click.option("--principal", required=True, help="Who denies (needs the policy's approver scope).")
@click.pass_context
def approvals_deny(ctx: click.Context, approval_id: str, reason: str, principal: str) -> None:
    """Deny a pending approval request: until it expires, that call answers permission_denied with REASON."""
    with open_runtime(ctx) as rt:
        approval = rt.deny(approval_id, principal=principal, reason=reason)
    click.echo(f"denied {approval.id}: {approval.principal} may not call {approval.tool} with that input: {reason}")


@click.group()
def audit() -> None:
    """Read, verify and export the audit log."""


def _filter_options(command: F) -> F:
    """``--tool --principal --outcome --since --call-id``: which records ``tail`` and ``export`` show."""
    options = [
        click.option("--call-id", help="Only the record of this call (default: every call)."),
        click.option(
            "--since",
            metavar="WHEN",
            help="Only records from WHEN on: ISO 8601 (UTC unless it says) or a span back: 30s, 15m, 2h, 7d"
            " (default: all time).",
        ),
        click.option("--outcome", help="Only records with this outcome: ok or an error code (default: any)."),
        click.option("--principal", help="Only calls by this principal (default: anyone)."),
        click.option("--tool", help="Only calls of this tool: NAME or NAME@VERSION (default: every tool)."),
    ]
    for option in options:
        command = option(command)
    return command


def _record_filter(
    tool: str | None, principal: str | None, outcome: str | None, since: str | None, call_id: str | None
) -> RecordFilter:
    try:
        moment = parse_since(since) if since is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"--since {since!r} "), param_hint="'--since'") from exc
    return RecordFilter(tool=tool, principal=principal, outcome=outcome, since=moment, call_id=call_id)


@audit.command()
@click.option("-n", "count", default=20, show_default=True, help="How many records (the newest that match).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@_filter_options
@click.pass_context
def tail(
    ctx: click.Context,
    count: int,
    as_json: bool,
    tool: str | None,
    principal: str | None,
    outcome: str | None,
    since: str | None,
    call_id: str | None,
) -> None:
    """Print the newest audit records (every call, unless filtered), oldest first; times in UTC."""
    log = AuditLog(home_of(ctx))
    wanted = _record_filter(tool, principal, outcome, since, call_id)
    records = newest(wanted.apply(log.records()), count) if wanted else log.tail(count)
    for record in records:
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
    help="A head hash printed by an earlier verify and kept off this host: fail unless the chain still holds it"
    " (default: no anchor, the chain is checked against itself).",
)
@click.pass_context
def verify(ctx: click.Context, anchor: str | None) -> None:
    """Check the audit log's hash chain (not a tool's signature: that is `glovebox verify TOOL.wasm`).

    Exit 1 naming the first changed, inserted or deleted row.
    """
    result = AuditLog(home_of(ctx)).verify(anchor=anchor)
    if not result.ok:
        click.echo(f"audit log TAMPERED: {result.problem}", err=True)
        sys.exit(1)
    click.echo(f"audit log ok: {result.rows} records, head {result.head_hash}")


@audit.command()
@click.option("--jsonl", is_flag=True, hidden=True, help="JSON Lines: the only format, and the default.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here (default: stdout).")
@_filter_options
@click.pass_context
def export(
    ctx: click.Context,
    jsonl: bool,
    output: str | None,
    tool: str | None,
    principal: str | None,
    outcome: str | None,
    since: str | None,
    call_id: str | None,
) -> None:
    """Export the audit records (every one, unless filtered), with their hashes, as JSON Lines."""
    log = AuditLog(home_of(ctx))
    lines = (
        record_json(record) + "\n"
        for record in _record_filter(tool, principal, outcome, since, call_id).apply(log.records())
    )
    if output is None:
        for line in lines:
            click.echo(line, nl=False)
        return
    with open(output, "w", encoding="utf-8") as fh:
        fh.writelines(lines)
