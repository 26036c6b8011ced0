"""Code mode: real programs calling real tools under the policy, journaled and resumed."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

import glovebox
from glovebox.runs._host import RunBounds

from .conftest import HitCounter

THREE_STEPS = """
export default async function (input: { text: string }, tools: any) {
  const stats = await tools.call("text-stats", { text: input.text });
  const doubled = await tools.call("calc", { expression: `${stats.words} * 2` });
  const total = await tools.calc({ expression: `${doubled.value} + ${stats.lines}` });
  return { words: stats.words, lines: stats.lines, doubled: doubled.value, total: total.value };
}
"""


def test_a_three_step_program_whose_steps_depend_on_each_other(rt: glovebox.Runtime) -> None:
    result = rt.run(THREE_STEPS, input={"text": "one two three\nfour"}, principal="agent")
    assert result.status == "done", result.to_dict()
    out = result.output
    assert (out["words"], out["lines"], out["doubled"]) == (4, 2, 8) and out["total"] == 10
    assert [call["tool"] for call in result.calls] == ["text-stats", "calc", "calc"]
    assert all(call["code"] is None and not call["replayed"] for call in result.calls)
    envelope = result.to_dict()
    assert envelope["ok"] and envelope["run_id"] == result.run_id and envelope["meta"]["principal"] == "agent"


def test_each_nested_call_has_its_own_audit_row_naming_the_run(rt: glovebox.Runtime) -> None:
    result = rt.run(THREE_STEPS, input={"text": "a b"}, principal="agent")
    for step, call in enumerate(result.calls):
        row = rt.audit.find(call["call_id"])
        assert row is not None and row["principal"] == "agent" and row["outcome"] == "ok"
        egress = row["egress"] if isinstance(row["egress"], dict) else json.loads(row["egress"])
        assert egress["run"].pop("deadline_at") > time.time() - 60, "the run's deadline the call was held to"
        assert egress["run"] == {"run_id": result.run_id, "step": step, "parent_call_id": result.meta["call_id"]}


@pytest.mark.parametrize(
    ("principal", "program", "code"),
    [
        # outsider lacks text-stats' scope: for its program the tool does not exist
        ("outsider", 'await tools.call("text-stats", { text: "x" })', "tool_not_found"),
        ("agent", 'await tools.call("calc", { expression: 7 })', "invalid_input"),
        ("outsider", 'for (let i = 0; i < 3; i++) await tools.call("calc", { expression: "1" })', "rate_limited"),
        ("agent", 'await tools.call("primes", { limit: 10 })', "tool_not_found"),
        ("agent", 'await tools.call("no-such-tool", {})', "tool_not_found"),
    ],
)
def test_a_refused_nested_call_is_a_tool_call_error_with_its_code(
    rt: glovebox.Runtime, principal: str, program: str, code: str
) -> None:
    caught = rt.run(
        "export default async function (input, tools) {"
        f"  try {{ {program}; return null; }}"
        "  catch (e) { return { name: e.name, code: e.code, ok: e instanceof tools.ToolCallError }; } }",
        principal=principal,
    )
    assert caught.output == {"name": "ToolCallError", "code": code, "ok": True}, caught.to_dict()
    uncaught = rt.run(f"export default async function (input, tools) {{ {program}; return 1; }}", principal=principal)
    assert uncaught.status == "failed" and uncaught.error is not None and uncaught.error.code == code


def test_a_hidden_tool_reads_as_an_unknown_one(rt: glovebox.Runtime) -> None:
    program = """export default async function (input, tools) {
      const answers = [];
      for (const name of ["primes", "nothing-here"]) {
        try { await tools.call(name, {}); } catch (e) { answers.push(e.message.replace(name, "NAME")); }
      }
      return { answers, wrappers: Object.keys(tools) };
    }"""
    result = rt.run(program, principal="agent")
    assert result.status == "done", result.to_dict()
    hidden, unknown = result.output["answers"]
    assert hidden == unknown and "primes" not in hidden
    assert "primes" not in result.output["wrappers"] and "text_stats" in result.output["wrappers"]


def test_the_clock_and_randomness_are_journaled_and_replayed(rt: glovebox.Runtime) -> None:
    program = """export default async function (input, tools) {
      const before = [Date.now(), Math.random(), Math.random()];
      await tools.call("hc-approve", { url: input.url });
      return { before, after: [new Date().getTime(), Math.random()] };
    }"""
    paused = rt.run(program, input={"url": "http://127.0.0.1:9/x"}, principal="agent")
    assert paused.status == "paused"
    rt.approve(paused.error.details["approval_id"], principal="admin")
    resumed = rt.runs.resume(paused.run_id)
    assert resumed.status in ("done", "failed")
    kinds = [step.kind for step in rt.runs.journal(paused.run_id)]
    assert kinds[:3] == ["now", "random", "call"]
    again = rt.runs.journal(paused.run_id)
    assert again[0].result == rt.runs.journal(paused.run_id)[0].result


def test_pause_on_approval_then_resume_runs_the_approved_call_once(rt: glovebox.Runtime, upstream: HitCounter) -> None:
    program = """export default async function (input, tools) {
      const first = await tools.call("hc", { url: input.base + "/first" });
      const second = await tools.call("hc-approve", { url: input.base + "/approved" });
      return { first: JSON.parse(first.body).hit, second: JSON.parse(second.body).hit };
    }"""
    paused = rt.run(program, input={"base": upstream.url("")}, principal="agent")
    assert paused.status == "paused" and paused.error is not None
    assert paused.error.code == "approval_required"
    approval_id = paused.error.details["approval_id"]
    assert upstream.hits == {"/first": 1}
    assert rt.runs.show(paused.run_id).status == "paused"
    still = rt.runs.resume(paused.run_id)  # not approved yet: it pauses again, nothing repeats
    assert still.status == "paused" and upstream.hits == {"/first": 1}
    rt.approve(approval_id, principal="admin")
    done = rt.runs.resume(paused.run_id)
    assert done.status == "done", done.to_dict()
    assert done.output == {"first": 1, "second": 1}
    assert upstream.hits == {"/first": 1, "/approved": 1}
    assert [call["replayed"] for call in done.calls] == [True, False]
    assert rt.runs.resume(paused.run_id).output == done.output  # a finished run is answered as it ended
    assert upstream.hits == {"/first": 1, "/approved": 1}


def test_a_program_that_leaves_its_journal_is_run_diverged(rt: glovebox.Runtime, upstream: HitCounter) -> None:
    program = """export default async function (input, tools) {
      await tools.call("hc", { url: input.base + "/one" });
      await tools.call("hc-approve", { url: input.base + "/two" });
      return "done";
    }"""
    paused = rt.run(program, input={"base": upstream.url("")}, principal="agent")
    assert paused.status == "paused"
    with sqlite3.connect(rt.home / "runs.sqlite") as db:  # the program changed under the run
        script = db.execute("SELECT script FROM runs WHERE run_id = ?", (paused.run_id,)).fetchone()[0]
        db.execute("UPDATE runs SET script = ? WHERE run_id = ?", (script.replace("/one", "/uno"), paused.run_id))
    rt.runs.store.reseal(paused.run_id)  # sealed again: a change the seals cannot see (tests/runs/test_seal.py)
    resumed = rt.runs.resume(paused.run_id)
    assert resumed.status == "failed" and resumed.error is not None
    assert resumed.error.code == "run_diverged" and not resumed.error.retryable
    assert resumed.error.details["step"] == 0 and "step 0" in resumed.error.message
    assert upstream.hits == {"/one": 1}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("while (true) {}", "fuel_exhausted"),
        ("const kept = []; while (true) kept.push(new Array(100000).fill(kept.length));", "memory_limit"),
        ("throw new Error('no')", "guest_error"),
        ("return () => 1", "invalid_output"),
    ],
)
def test_a_program_that_runs_away_ends_with_the_sandbox_code(rt: glovebox.Runtime, body: str, code: str) -> None:
    result = rt.run(f"export default async function (input, tools) {{ {body} }}", principal="agent")
    assert result.status == "failed" and result.error is not None and result.error.code == code, result.to_dict()


def test_100000_host_calls_reach_the_step_bound_with_a_bounded_journal(rt: glovebox.Runtime) -> None:
    result = rt.run(
        "export default async function () { let t = 0; for (let i = 0; i < 100000; i++) t += Date.now(); return t; }",
        principal="agent",
    )
    assert result.status == "failed" and result.error is not None and result.error.code == "run_limit"
    limit = rt.runs.runner.bounds.max_steps
    assert result.error.details["bound"] == "steps" and result.error.details["limit"] == limit
    assert len(rt.runs.journal(result.run_id)) == limit


def test_the_journal_bytes_bound(rt: glovebox.Runtime) -> None:
    rt.runs.runner.bounds = RunBounds(max_journal_bytes=64 * 1024)
    result = rt.run(
        'export default async function (input, tools) { const text = "word ".repeat(4000);'
        ' for (let i = 0; i < 100; i++) await tools.call("text-stats", { text }); }',
        principal="agent",
    )
    assert result.status == "failed" and result.error is not None and result.error.code == "run_limit"
    assert result.error.details["bound"] == "bytes"
    with sqlite3.connect(rt.home / "runs.sqlite") as db:
        size = db.execute("SELECT SUM(LENGTH(request) + IFNULL(LENGTH(result), 0)) FROM journal").fetchone()[0]
    assert size <= 64 * 1024


def test_a_program_that_does_not_compile_names_the_line(rt: glovebox.Runtime) -> None:
    with pytest.raises(glovebox.BuildError, match=r"<program>:2:"):
        rt.run("export default async function () {\n  return (1 +;\n}")


def test_runs_list_show_and_cancel(rt: glovebox.Runtime, upstream: HitCounter) -> None:
    program = 'export default async function (i, tools) { await tools.call("hc-approve", { url: i.u }); }'
    paused = rt.run(program, input={"u": upstream.url("/x")}, principal="agent")
    listed = rt.runs.list()
    assert [record.run_id for record in listed] == [paused.run_id] and listed[0].status == "paused"
    cancelled = rt.runs.cancel(paused.run_id)
    assert cancelled.status == "cancelled"
    assert rt.runs.resume(paused.run_id).status == "cancelled"
    assert rt.runs.show(paused.run_id).status == "cancelled"
    with pytest.raises(ValueError, match="no run"):
        rt.runs.show("nope")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_arun(rt: glovebox.Runtime, anyio_backend: str) -> None:
    result = await rt.arun(THREE_STEPS, input={"text": "a b c"}, principal="agent")
    assert result.output["doubled"] == 6


def test_the_declaration_types_the_visible_tools_and_omits_hidden_ones(rt: glovebox.Runtime) -> None:
    dts = rt.runs.declarations("agent")
    assert "text_stats(input: { text: string" in dts
    assert "Promise<{ " in dts and "characters: number" in dts and "words: number }>" in dts
    assert "calc(input: { expression: string })" in dts
    assert "primes" not in dts
    assert "text_stats" not in rt.runs.declarations("outsider")


def test_search_finds_visible_tools_only(rt: glovebox.Runtime) -> None:
    result = rt.run(
        'export default async function (i, tools) { return [await tools.search("arithmetic"),'
        ' await tools.search("prime")]; }',
        principal="agent",
    )
    found, hidden = result.output
    assert [tool["name"] for tool in found] == ["calc"] and hidden == []
    assert [tool["name"] for tool in rt.runs.search("prime", "admin")] == ["primes"]


def test_runs_per_minute_counts_a_principals_runs(tmp_path: Path, run_home: tuple[Path, Path]) -> None:
    home, policy = run_home
    limited = tmp_path / "limited.yaml"
    limited.write_text(policy.read_text() + "runs:\n  runs_per_minute: 2\n  retention_days: 1\n")
    with glovebox.Runtime(home=home, policy=limited) as rt:
        program = "export default async () => 1"
        assert [rt.run(program, principal="agent").status for _ in range(2)] == ["done", "done"]
        refused = rt.run(program, principal="agent")
        assert refused.status == "failed" and refused.error is not None and refused.error.code == "rate_limited"
        assert refused.error.details["quota"] == "runs.runs_per_minute" and refused.error.details["retry_after_ms"] > 0
        assert rt.run(program, principal="admin").status == "done"  # counted per principal
        assert len(rt.runs.list(principal="agent")) == 2
        assert rt.runs.retention_s() == 86400.0
        assert rt.runs.collect(0.0) and rt.runs.list() == []  # gc: every finished run, older than 0 s


def test_a_program_replacing_json_cannot_change_what_the_host_is_asked(rt: glovebox.Runtime) -> None:
    # The runner encodes requests with the JSON.stringify it captured at build time, and the
    # engine decodes answers in C: a program's own JSON functions see and change neither.
    program = """export default async function (input, tools) {
      const seen = [];
      JSON.stringify = () => { seen.push("stringify"); return '{"tool": "calc", "input": {"expression": "6"}}'; };
      JSON.parse = (text) => { seen.push(text); return { words: 99 }; };
      const stats = await tools.call("text-stats", { text: "a b c" });
      return { words: stats.words, seen };
    }"""
    result = rt.run(program, principal="agent")
    assert result.output == {"words": 3, "seen": []}, result.to_dict()
    [step] = rt.runs.journal(result.run_id)
    assert step.request == {"kind": "call", "tool": "text-stats", "input": {"text": "a b c"}}


def test_a_replayed_step_answers_the_program_as_the_live_one_did(rt: glovebox.Runtime) -> None:
    program = """export default async function (input, tools) {
      const stats = await tools.call("text-stats", { text: "one two" });
      try { await tools.call("no-such-tool", {}); } catch (e) { return [stats, e.code, e.callId, e.envelope.meta]; }
    }"""
    live = rt.run(program, principal="agent")
    assert live.status == "done" and live.output[1] == "tool_not_found", live.to_dict()
    assert live.output[2] == live.calls[1]["call_id"] and live.output[3]["tool"] == "no-such-tool"
    rt.runs.store.set_status(live.run_id, "running")  # as if its process had died after the last step
    replayed = rt.runs.resume(live.run_id)
    assert replayed.output == live.output, (replayed.to_dict(), live.to_dict())
    assert [call["replayed"] for call in replayed.calls] == [True, True]
    assert [call["call_id"] for call in replayed.calls] == [call["call_id"] for call in live.calls]
