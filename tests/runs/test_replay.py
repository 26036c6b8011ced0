"""A resume's replay: the runner answers recorded steps itself, from the texts the journal keeps.

Each test resumes a real run of real tools and checks what the program got
and what the host was asked; the encoder the runner uses for every request is
checked against the engine's own ``JSON.stringify``, byte for byte.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.runs import _host
from glovebox.runs._host import RunBounds, RunHost
from glovebox.runs._store import RunStore

MANY = """export default async function (input, tools) {
  let total = 0;
  for (let i = 0; i < input.n; i++) {
    const stats = await tools.call("text-stats", { text: "a b\\n" + "c ".repeat(i % 7) });
    total += stats.words + (i % 5 === 0 ? Date.now() * 0 + Math.round(Math.random() * 0) : 0);
  }
  return total;
}"""

#: Values a program may hand a tool call, each as a JavaScript expression: plain data (encoded in C)
#: and everything the C encoder hands to JSON.stringify (a toJSON, a Date, a Map, a Proxy, a class...).
VALUES = [
    '"plain"', '"quote \\" back \\\\ slash /"', '"ctl \\u0000\\u0001\\u001f \\b\\f\\n\\r\\t \\u007f"',
    '"é ü 中文 😀 \\u2028"', '"\\ud800"', '"a\\udc00b"', '"\\ud83d\\ude00"', '"x\\udbff"',
    "0", "-0", "1", "-1", "2147483647", "-2147483648", "2 ** 31", "-(2 ** 31) - 1", "1.5", "-1e-7",
    "1e21", "123456789012345680000", "0.1 + 0.2", "5e-324", "NaN", "Infinity", "-Infinity",
    "true", "false", "null", "[]", "[1, [2, [3, []]]]", "[undefined, function () {}, Symbol('s')]",
    "new Array(3)", "{}", "{ b: 1, a: 2 }", '{ "2": 1, "1": 2, b: 3, "-1": 4, "01": 5 }',
    "{ u: undefined, f() {}, s: Symbol(), n: null }", "{ [Symbol('k')]: 1, a: 1 }",
    "Object.assign(Object.create(null), { z: 1 })", "new (class P { constructor() { this.x = 1; } })()",
    "new Date(0)", '{ toJSON() { return "t"; } }', "{ a: { toJSON(key) { return key; } } }",
    "new Map([[1, 2]])", "new Set([1])", "new Number(3)", 'new String("s")', "new Boolean(false)",
    "/re/g", 'new Error("e")', "new Uint8Array([1, 2])", "{ get g() { return 5; } }",
    'Object.defineProperty({ v: 1 }, "hidden", { value: 2, enumerable: false })',
    "new Proxy({ a: 1 }, {})", "Object.assign([1, 2], { extra: 3 })",
    "(() => { let v = 0; for (let i = 0; i < 100; i++) v = [v]; return v; })()",
    '"long ".repeat(20000)', "{ nested: { deeper: [{ k: 'v' }, 2.5, -3] } }",
]  # fmt: skip


def _program(values: list[str]) -> str:
    cases = ",\n    ".join(f"() => ({value})" for value in values)
    return f"""export default async function (input, tools) {{
  const cases = [
    {cases}
  ];
  const out = [];
  for (const make of cases) {{
    let expected;
    try {{ expected = JSON.stringify({{ tool: "calc", input: make() }}); }}
    catch (e) {{ expected = "throws " + e.name; }}
    let sent = "sent";
    try {{ await tools.call("calc", make()); }}
    catch (e) {{ if (!(e instanceof ToolCallError)) sent = "throws " + e.name; }}
    out.push(sent === "sent" ? expected : sent);
  }}
  return out;
}}"""


def _asked(home: Path, run_id: str) -> list[str]:
    with sqlite3.connect(home / "runs.sqlite") as db:
        rows = db.execute("SELECT asked FROM journal WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
    return [row[0] for row in rows]


def test_every_request_is_what_json_stringify_makes_of_it_byte_for_byte(rt: glovebox.Runtime) -> None:
    result = rt.run(_program(VALUES), principal="agent")
    assert result.status == "done", result.to_dict()
    expected = [text for text in result.output if not text.startswith("throws")]
    assert len(expected) == len(VALUES)  # every case was sent
    assert _asked(rt.home, result.run_id) == expected
    # the tool was handed the value JSON.stringify says (the canonical request holds it)
    requests = [step.request for step in rt.runs.journal(result.run_id)]
    assert [{"kind": "call", **json.loads(text)} for text in expected] == requests


def test_a_value_json_cannot_hold_throws_in_the_program_as_json_stringify_does(rt: glovebox.Runtime) -> None:
    cycle = "(() => { const c = { a: 1 }; c.self = c; return c; })()"
    deep_cycle = "(() => { const c = [[[]]]; c[0][0].push(c); return c; })()"
    result = rt.run(_program([cycle, deep_cycle, "10n", "{ big: [1n] }", '"fine"']), principal="agent")
    assert result.status == "done", result.to_dict()
    assert result.output[:4] == ["throws TypeError"] * 4
    assert _asked(rt.home, result.run_id) == [result.output[4]]  # nothing else reached the host


def test_a_polluted_prototype_changes_nothing_the_host_is_asked(rt: glovebox.Runtime) -> None:
    program = """export default async function (input, tools) {
      Object.prototype.polluted = 1;
      Object.defineProperty(Array.prototype, "1", { get() { return "p"; }, set(v) {}, configurable: true });
      const expected = JSON.stringify({ tool: "calc", input: { a: new Array(3), b: [1] } });
      try { await tools.call("calc", { a: new Array(3), b: [1] }); } catch (e) {}
      Object.prototype.toJSON = function () { return "hijacked"; };
      const second = JSON.stringify({ tool: "calc", input: { c: 1 } });
      try { await tools.call("calc", { c: 1 }); } catch (e) {}
      delete Object.prototype.toJSON; // else it would answer for the program's own output too
      return [expected, second];
    }"""
    result = rt.run(program, principal="agent")
    assert result.status == "done", result.to_dict()
    assert _asked(rt.home, result.run_id) == result.output[:1]  # the second names no tool: refused, unrecorded
    assert '"a":[null,"p",null]' in result.output[0]  # a hole reads through to the prototype, as in JSON
    assert result.output[1] == '"hijacked"'  # what JSON.stringify says, and so what the host is asked


def _count_host_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    kinds: list[str] = []
    answer = RunHost.host_call

    def counted(self: RunHost, kind: str, request: str) -> str:
        kinds.append(kind)
        return answer(self, kind, request)

    monkeypatch.setattr(RunHost, "host_call", counted)
    return kinds


def _audit_rows(rt: glovebox.Runtime, tool: str) -> int:
    return sum(1 for row in rt.audit.tail(100_000) if row["tool"] == tool)


def test_a_resume_replays_hundreds_of_steps_in_a_few_host_calls(
    rt: glovebox.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = rt.run(MANY, input={"n": 700}, principal="agent")
    assert live.status == "done", live.to_dict()
    steps = len(rt.runs.journal(live.run_id))
    assert steps > 700  # the calls, and the clock and the seed between them
    rows = _audit_rows(rt, "text-stats")
    rt.runs.store.set_status(live.run_id, "running")  # as if its process had died after the last step
    kinds = _count_host_calls(monkeypatch)
    again = rt.runs.resume(live.run_id)
    assert again.status == "done" and again.output == live.output, again.to_dict()
    assert again.meta["replayed"] == steps and again.meta["steps"] == steps
    assert [call["call_id"] for call in again.calls] == [call["call_id"] for call in live.calls]
    assert all(call["replayed"] for call in again.calls)
    assert kinds == ["replay"] * (steps // 256 + 2)  # a chunk per 256 steps, the empty one at the end
    assert _audit_rows(rt, "text-stats") == rows  # no nested call ran again


def test_a_resume_that_goes_on_live_replays_then_calls(rt: glovebox.Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    paused = rt.run(
        """export default async function (input, tools) {
          const a = await tools.call("text-stats", { text: "one two" });
          const b = await tools.call("hc-approve", { url: "http://127.0.0.1:9/x" });
          return a.words;
        }""",
        principal="agent",
    )
    assert paused.status == "paused"
    kinds = _count_host_calls(monkeypatch)
    again = rt.runs.resume(paused.run_id)  # not approved: the call pauses again
    assert again.status == "paused" and again.meta["replayed"] == 1
    assert kinds == ["replay", "replay", "call"]  # step 0 from a chunk; the empty one at its end; then live
    assert [call["replayed"] for call in again.calls] == [True, False]


def test_a_journal_written_before_the_replay_texts_replays_the_slower_way(rt: glovebox.Runtime) -> None:
    live = rt.run(MANY, input={"n": 30}, principal="agent")
    with sqlite3.connect(rt.home / "runs.sqlite") as db:
        db.execute("UPDATE journal SET asked = NULL, answer = NULL, summary = NULL WHERE run_id = ?", (live.run_id,))
    rt.runs.store.reseal(live.run_id)  # as an upgraded store seals a journal written before the seals
    rt.runs.store.set_status(live.run_id, "running")
    rows = _audit_rows(rt, "text-stats")
    again = rt.runs.resume(live.run_id)
    assert again.status == "done" and again.output == live.output, again.to_dict()
    assert again.meta["replayed"] == again.meta["steps"] == len(rt.runs.journal(live.run_id))
    assert [call["call_id"] for call in again.calls] == [call["call_id"] for call in live.calls]
    assert _audit_rows(rt, "text-stats") == rows


def test_a_request_recorded_in_other_words_is_replayed_and_a_different_one_diverges(rt: glovebox.Runtime) -> None:
    live = rt.run(MANY, input={"n": 5}, principal="agent")
    with sqlite3.connect(rt.home / "runs.sqlite") as db:  # the same request, its keys in another order
        db.execute(
            "UPDATE journal SET asked = ? WHERE run_id = ? AND seq = 2",
            ('{"input":{"text":"a b\\n"},"tool":"text-stats"}', live.run_id),
        )
    rt.runs.store.reseal(live.run_id)  # (edited on purpose: tests/runs/test_seal.py refuses it unsealed)
    rt.runs.store.set_status(live.run_id, "running")
    again = rt.runs.resume(live.run_id)
    assert again.status == "done" and again.output == live.output, again.to_dict()
    assert all(call["replayed"] for call in again.calls)
    with sqlite3.connect(rt.home / "runs.sqlite") as db:  # a different request recorded at step 3
        db.execute(
            "UPDATE journal SET asked = ?, request = ? WHERE run_id = ? AND seq = 3",
            ('{"tool":"text-stats","input":{"text":"other"}}', '{"input": {"text": "other"}, "kind": "call",'
             ' "tool": "text-stats"}', live.run_id),
        )  # fmt: skip
    rt.runs.store.reseal(live.run_id)
    rt.runs.store.set_status(live.run_id, "running")
    diverged = rt.runs.resume(live.run_id)
    assert diverged.status == "failed" and diverged.error is not None
    assert diverged.error.code == "run_diverged" and diverged.error.details["step"] == 3


def test_a_replay_claim_the_runner_never_makes_stops_the_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    run_id = store.create("p", "js", "", "", None)
    store.record_step(run_id, 0, "now", '{"kind": "now"}', '{"now": 1.0}', asked="null")
    host = RunHost(store, run_id, "p", store.recorded_steps(run_id), _no_call, _no_search, RunBounds())
    assert host.host_call("replay", '{"from": 1, "more": true}') == '{"stop": true}'  # not handed step 0 yet
    assert host.stopped is not None and host.stopped.code == "run_diverged"
    for request in ("not json", '{"from": "0", "more": true}', '{"from": 0}', '{"from": true, "more": true}'):
        fresh = RunHost(store, run_id, "p", store.recorded_steps(run_id), _no_call, _no_search, RunBounds())
        assert fresh.host_call("replay", request) == '{"stop": true}', request
        assert fresh.stopped is not None and fresh.stopped.code == "run_diverged"
    honest = RunHost(store, run_id, "p", store.recorded_steps(run_id), _no_call, _no_search, RunBounds())
    assert honest.host_call("replay", '{"from": 0, "more": true}') == 'now\nnull\n{"now": 1.0}\n'
    assert honest.host_call("replay", '{"from": 1, "more": true}') == ""  # the journal's end
    assert honest.stopped is None and honest.replayed == 1 and honest.seq == 1
    store.close()


def test_a_chunk_holds_at_most_its_bytes_and_at_least_one_step(
    rt: glovebox.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_host, "_CHUNK_BYTES", 1)
    live = rt.run(MANY, input={"n": 6}, principal="agent")
    rt.runs.store.set_status(live.run_id, "running")
    kinds = _count_host_calls(monkeypatch)
    again = rt.runs.resume(live.run_id)
    assert again.output == live.output and again.meta["replayed"] == again.meta["steps"]
    assert kinds.count("replay") == again.meta["steps"] + 1  # one step a chunk (each is over 1 byte), the end


def _no_call(*args: Any) -> Any:
    raise AssertionError("nothing runs in a replay")


def _no_search(*args: Any) -> Any:
    raise AssertionError("nothing runs in a replay")


def test_a_program_that_hijacks_how_its_output_is_encoded_fails_invalid_output(rt: glovebox.Runtime) -> None:
    program = """export default async function () {
      Object.prototype.toJSON = function () { return "hijacked"; };
      return { words: 3 };
    }"""
    result = rt.run(program, principal="agent")
    assert result.status == "failed" and result.error is not None, result.to_dict()
    assert result.error.code == "invalid_output" and "hijacked" in result.error.message
