"""``glovebox run FILE`` and ``glovebox runs list|show|resume|cancel|types|gc|save|rollback|export|verify|replay``
(thin, like the rest of the CLI).

Each prints the run envelope (``RunResult.to_dict()``) and exits 0 when the run
is done, 1 otherwise (paused, failed, cancelled).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..core._jsonlimits import JsonRejected
from ..core._jsonlimits import loads as loads_json
from ..runs._result import RunResult
from ..runtime._coderun import LANGS, lang_of
from ._base import dump, home_of, open_runtime

__all__ = ["run", "runs"]


def _input(raw: str | None) -> Any:
    if raw is None:
        return None
    data = sys.stdin.buffer.read() if raw == "-" else raw
    try:
        return loads_json(data)
    except JsonRejected as exc:
        raise click.BadParameter(str(exc).removeprefix("is "), param_hint="'--input'") from exc


def _finish(result: RunResult) -> None:
    click.echo(dump(result.to_dict()))
    sys.exit(0 if result.ok else 1)


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--input", "raw_input", help="The program's input as JSON text ('-' reads stdin; default: null).")
@click.option("--principal", help="Whose run it is: every nested call is this principal's (default: anonymous).")
@click.option(
    "--lang",
    type=click.Choice(LANGS),
    help="The program's language: ts, js or py (default: from FILE's extension, .ts/.mts, .js/.mjs or .py).",
)
@click.option(
    "--rollback-on-failure",
    is_flag=True,
    help="When the run fails, roll it back: call the compensations of its completed writes, newest first"
    " (printed as the envelope's rollback; default: off).",
)
@click.pass_context
def run(
    ctx: click.Context,
    file: str,
    raw_input: str | None,
    principal: str | None,
    lang: str | None,
    rollback_on_failure: bool,
) -> None:
    """Run the program FILE (.ts/.js: export default async function (input, tools); .py: async def main(input,
    tools)); print the run envelope."""
    if lang is None:
        try:
            lang = lang_of(file)
        except ValueError as exc:
            raise click.BadParameter(f"{exc} (or say which with --lang)", param_hint="'FILE'") from exc
    value = _input(raw_input)
    code = Path(file).read_text(encoding="utf-8")
    with open_runtime(ctx) as rt:
        result = rt.run(code, input=value, principal=principal, lang=lang)
        if rollback_on_failure and result.status == "failed" and result.run_id:
            from ..runtime._runrollback import rollback_run

            envelope = result.to_dict()
            envelope["rollback"] = rollback_run(rt, result.run_id).to_dict()
            click.echo(dump(envelope))
            sys.exit(1)
    _finish(result)


@click.group()
def runs() -> None:
    """List, show, resume, cancel, save, roll back, export, verify and replay the runs of a home (glovebox run
    FILE starts one)."""


@runs.command(name="list")
@click.option("--principal", help="Only this principal's runs (default: everyone's).")
@click.option(
    "--status",
    type=click.Choice(["running", "paused", "done", "failed", "cancelled"]),
    help="Only runs with this status (default: every status).",
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True, help="Newest first, at most.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@click.pass_context
def list_runs(ctx: click.Context, principal: str | None, status: str | None, limit: int, as_json: bool) -> None:
    """List the runs of this home, newest first."""
    with open_runtime(ctx) as rt:
        records = rt.runs.list(principal=principal, status=status, limit=limit)
    if as_json:
        click.echo(dump([record.summary() for record in records]))
        return
    if not records:
        click.echo("no runs")
    for record in records:
        click.echo(f"{record.run_id}  {record.status:<9}  {record.principal}  {record.steps} steps")


@runs.command()
@click.argument("run_id")
@click.option("--journal", "with_journal", is_flag=True, help="Add the journal: every host call and its result.")
@click.pass_context
def show(ctx: click.Context, run_id: str, with_journal: bool) -> None:
    """Print run RUN_ID's envelope (with --journal, its steps; a step marked reran ran twice: it was in flight
    when the process running it died), its program digest and how its rollback stands."""
    with open_runtime(ctx) as rt:
        try:
            envelope = rt.runs.show(run_id).to_dict()
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'RUN_ID'") from exc
        steps = rt.runs.journal(run_id)
        record = rt.runs.record(run_id)
        digest, rollback = rt.runs.store.program_digest(run_id), rt.runs.store.rollback_status(run_id)
    envelope["reran"] = [step.seq for step in steps if step.reran]
    if record is not None:  # who resumed it last, who cancelled it, and who is executing it now (its lease)
        envelope["resumed_by"] = record.resumed_by
        envelope["cancelled_by"] = envelope["meta"].get("cancelled_by") if record.status == "cancelled" else None
        envelope["lease"] = None if not record.leased() else {"holder": record.lease_owner}
        envelope["program_digest"] = digest  # recorded at its start
        envelope["rollback"] = rollback  # None, rolling_back, rolled_back, incomplete
    if with_journal:
        envelope["journal"] = [step.to_dict() for step in steps]
    click.echo(dump(envelope))


@runs.command()
@click.argument("run_id")
@click.option(
    "--by",
    metavar="PRINCIPAL",
    help="Who resumes, recorded in the run and its attempt's audit row; another principal than the run's"
    " needs glovebox:audit and the approver scope (default: the run's own principal).",
)
@click.pass_context
def resume(ctx: click.Context, run_id: str, by: str | None) -> None:
    """Continue run RUN_ID (paused, or its process died): recorded steps replay, the rest runs live.

    A run another process is executing now answers status running with run_busy (exit 1).
    """
    _act(ctx, "resume", run_id, by=by)


@runs.command()
@click.argument("run_id")
@click.option(
    "--by",
    metavar="PRINCIPAL",
    help="Who cancels, recorded in the run (cancelled_by) and the cancel's audit row; another principal than"
    " the run's needs glovebox:audit and the approver scope (default: the run's own principal).",
)
@click.pass_context
def cancel(ctx: click.Context, run_id: str, by: str | None) -> None:
    """Cancel run RUN_ID unless it finished; a cancelled run never resumes.

    The cancel writes one audit row (glovebox:run, outcome cancelled). A finished run is printed as it
    ended, and nothing is written.
    """
    _act(ctx, "cancel", run_id, by=by)


def _act(ctx: click.Context, action: str, run_id: str, **by: str | None) -> None:
    """``runs.resume`` or ``runs.cancel`` of one run, its envelope printed; an unknown id names RUN_ID."""
    with open_runtime(ctx) as rt:
        try:
            result = getattr(rt.runs, action)(run_id, **{k: v for k, v in by.items() if v is not None})
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'RUN_ID'") from exc
    _finish(result)


@runs.command()
@click.option("--principal", help="Whose tools (default: anonymous).")
@click.option(
    "--lang",
    type=click.Choice(LANGS),
    default="ts",
    show_default=True,
    help="ts or js: a TypeScript declaration (.d.ts); py: typed Python stubs (.pyi).",
)
@click.pass_context
def types(ctx: click.Context, principal: str | None, lang: str) -> None:
    """Print the declaration of the tools a program of --principal sees (.d.ts, or .pyi with --lang py)."""
    with open_runtime(ctx) as rt:
        click.echo(rt.runs.declarations(principal, lang=lang), nl=False)


@runs.command(name="gc")
@click.option(
    "--older-than-days",
    type=click.FloatRange(0),
    help="Delete runs that finished (done, failed, cancelled) longer ago than this, with their journals"
    " (default: the policy's runs.retention_days, 30).",
)
@click.pass_context
def gc_runs(ctx: click.Context, older_than_days: float | None) -> None:
    """Delete old finished runs and their journals (paused and running ones are kept)."""
    with open_runtime(ctx) as rt:
        keep_s = rt.runs.retention_s() if older_than_days is None else older_than_days * 86400
        removed = rt.runs.collect(keep_s)
    click.echo(f"{len(removed)} finished run(s) removed")


@runs.command(name="export")
@click.argument("run_id")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False), help="The bundle to write.")
@click.option(
    "--key",
    type=click.Path(exists=True, dir_okay=False),
    help="The Ed25519 private key (PEM) to sign with (default: the home's keys/run-bundles.key, made on first use).",
)
@click.option("--by", metavar="PRINCIPAL", help="Who exports, recorded in the bundle (default: nobody named).")
@click.pass_context
def export_bundle(ctx: click.Context, run_id: str, output: str, key: str | None, by: str | None) -> None:
    """Write run RUN_ID's signed evidence bundle: its program and digest, journal, audit rows with their chain
    positions, approvals, artifact digests and the policy's digest."""
    from ..runtime._runbundle import bundle_key, export_run

    with open_runtime(ctx) as rt:
        try:
            signature = export_run(rt, run_id, output, key=key, by=by)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'RUN_ID'") from exc
        public = Path(key).with_suffix(".pub") if key else bundle_key(rt.home).with_suffix(".pub")
    click.echo(f"wrote {output}, signed by {signature['key_id']} (public key: {public})")


@runs.command(name="verify")
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--key",
    type=click.Path(exists=True, dir_okay=False),
    help="The signer's Ed25519 public key (PEM) (default: the keys this home trusts, glovebox keys trust).",
)
@click.pass_context
def verify_bundle(ctx: click.Context, bundle: str, key: str | None) -> None:
    """Check a run bundle with a public key only: any changed byte, or another signer, is refused (exit 1)."""
    from ..runtime._runbundle import verify_run_bundle

    found = verify_run_bundle(bundle, key=key, home=None if key else home_of(ctx))
    click.echo(
        f"ok: run {found.run_id}, program {found.program_digest}, {found.steps} steps,"
        f" {found.audit_rows} audit rows, {found.approvals} approvals, signed by {found.key_id}"
    )


@runs.command()
@click.argument("run_id")
@click.option(
    "--by",
    metavar="PRINCIPAL",
    help="Who rolls back, recorded in each compensation's audit row; another principal than the run's needs"
    " glovebox:audit and the approver scope (default: the run's own principal).",
)
@click.pass_context
def rollback(ctx: click.Context, run_id: str, by: str | None) -> None:
    """Roll finished run RUN_ID back: call the compensations its tools declare for its completed writes,
    newest first, each a full audited call, journaled (a rollback that died resumes: a compensation already
    made is not made again). Exit 0 when every one was made, 1 when one failed or waits for an approval."""
    from ..runtime._runrollback import rollback_run

    with open_runtime(ctx) as rt:
        try:
            result = rollback_run(rt, run_id, by=by)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'RUN_ID'") from exc
    click.echo(dump(result.to_dict()))
    sys.exit(0 if result.ok else 1)


@runs.command()
@click.argument("run_id")
@click.option(
    "--against",
    type=click.Choice(["current"]),
    default="current",
    show_default=True,
    help="What to replay against: current, the tool versions registered now.",
)
@click.pass_context
def replay(ctx: click.Context, run_id: str, against: str) -> None:
    """Re-run run RUN_ID's program against today's tool versions: writes answered from its journal, reads
    called live; print the report, naming the first step whose answer diverges (exit 1 unless the same)."""
    from ..runtime._runreplay import replay_run

    with open_runtime(ctx) as rt:
        try:
            report = replay_run(rt, run_id, against=against)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'RUN_ID'") from exc
    click.echo(dump(report.to_dict()))
    sys.exit(0 if report.status == "same" else 1)


@runs.command()
@click.argument("run_id")
@click.option("--as", "name", required=True, help="The tool's name.")
@click.option(
    "--input-schema",
    type=click.Path(exists=True, dir_okay=False),
    help="A JSON Schema file for the tool's input (default: inferred from the run's input).",
)
@click.option("--version", "version", default="1.0.0", show_default=True, help="The tool's version.")
@click.option("--description", help="What the tool does (default: names the run).")
@click.option(
    "--by",
    metavar="PRINCIPAL",
    help="Who saves it: needs the scope glovebox:save (default: the run's own principal).",
)
@click.option(
    "--review",
    is_flag=True,
    help="The first use waits for an approver (glovebox approve); once approved it runs without one (default: off).",
)
@click.pass_context
def save(
    ctx: click.Context,
    run_id: str,
    name: str,
    input_schema: str | None,
    version: str,
    description: str | None,
    by: str | None,
    review: bool,
) -> None:
    """Register run RUN_ID's program (a run that ended done) as the tool NAME: calling it runs the program
    as the caller, every nested call under the caller's policy."""
    import json

    from ..runtime._runsave import save_run

    schema = None if input_schema is None else json.loads(Path(input_schema).read_text(encoding="utf-8"))
    with open_runtime(ctx) as rt:
        try:
            info = save_run(
                rt, run_id, name, input_schema=schema, version=version, description=description, by=by, review=review
            )
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'RUN_ID'") from exc
    click.echo(f"saved {info.name}@{info.version} {info.digest} (a program)")
