"""Code mode in Python: real programs in the Python code runner, calling real tools, journaled and resumed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import glovebox

from .conftest import HitCounter

THREE_STEPS = """
async def main(input, tools):
    stats = await tools.call("text-stats", {"text": input["text"]})
    doubled = await tools.calc({"expression": f"{stats['words']} * 2"})
    total = await tools.calc(expression=f"{doubled['value']} + {stats['lines']}")
    return {"words": stats["words"], "lines": stats["lines"], "doubled": doubled["value"], "total": total["value"]}
"""


APPROVED_PY = """
import json

async def main(input, tools):
    first = await tools.hc(url=input["base"] + "/first")
    second = await tools.call("hc-approve", {"url": input["base"] + "/approved"})
    return {"first": json.loads(first["body"])["hit"], "second": json.loads(second["body"])["hit"]}
"""


def test_a_three_step_python_program_whose_steps_depend_on_each_other(rt: glovebox.Runtime) -> None:
    result = rt.run(THREE_STEPS, input={"text": "one two three\nfour"}, principal="agent", lang="py")
    assert result.status == "done", result.to_dict()
    assert result.output == {"words": 4, "lines": 2, "doubled": 8, "total": 10}
    assert [call["tool"] for call in result.calls] == ["text-stats", "calc", "calc"]
    assert all(call["code"] is None and not call["replayed"] for call in result.calls)
    for step, call in enumerate(result.calls):
        row = rt.audit.find(call["call_id"])
        assert row is not None and row["principal"] == "agent" and row["outcome"] == "ok"
        egress = row["egress"] if isinstance(row["egress"], dict) else json.loads(row["egress"])
        assert egress["run"]["run_id"] == result.run_id and egress["run"]["step"] == step
    assert rt.runs.record(result.run_id).lang == "py"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("principal", "program", "code"),
    [
        ("outsider", 'await tools.call("text-stats", {"text": "x"})', "tool_not_found"),
        ("agent", 'await tools.calc({"expression": 7})', "invalid_input"),
        ("agent", 'await tools.call("primes", {"limit": 10})', "tool_not_found"),
    ],
)
def test_a_refused_nested_call_is_a_tool_call_error_with_its_code(
    rt: glovebox.Runtime, principal: str, program: str, code: str
) -> None:
    caught = rt.run(
        "async def main(input, tools):\n"
        f"    try:\n        {program}\n        return None\n"
        "    except tools.ToolCallError as e:\n"
        "        return {'name': type(e).__name__, 'code': e.code, 'call_id': bool(e.call_id)}\n",
        principal=principal,
        lang="py",
    )
    assert caught.output == {"name": "ToolCallError", "code": code, "call_id": True}, caught.to_dict()
    uncaught = rt.run(f"async def main(input, tools):\n    {program}\n    return 1\n", principal=principal, lang="py")
    assert uncaught.status == "failed" and uncaught.error is not None and uncaught.error.code == code


def test_pause_on_approval_then_resume_runs_the_approved_call_once(rt: glovebox.Runtime, upstream: HitCounter) -> None:
    program = """
import json, random, time

async def main(input, tools):
    before = [time.time(), random.random()]
    first = await tools.hc({"url": input["base"] + "/first"})
    second = await tools["hc-approve"](url=input["base"] + "/approved")
    return {"first": json.loads(first["body"])["hit"], "second": json.loads(second["body"])["hit"],
            "before": before, "after": [time.time(), random.random()]}
"""
    paused = rt.run(program, input={"base": upstream.url("")}, principal="agent", lang="py")
    assert paused.status == "paused" and paused.error is not None, paused.to_dict()
    assert paused.error.code == "approval_required" and upstream.hits == {"/first": 1}
    still = rt.runs.resume(paused.run_id)  # not approved yet: it pauses again, nothing repeats
    assert still.status == "paused" and upstream.hits == {"/first": 1}
    rt.approve(paused.error.details["approval_id"], principal="admin")
    done = rt.runs.resume(paused.run_id)
    assert done.status == "done", done.to_dict()
    assert (done.output["first"], done.output["second"]) == (1, 1)
    assert upstream.hits == {"/first": 1, "/approved": 1}
    assert [call["replayed"] for call in done.calls] == [True, False]
    assert done.meta["replayed"] == 3  # the clock, the seed and the first call came from the journal
    journal = rt.runs.journal(paused.run_id)
    assert [step.kind for step in journal] == ["now", "random", "call", "call", "now"]
    # the clock replayed: what the program saw before the pause is what it saw again
    assert done.output["before"][0] == pytest.approx(journal[0].result["now"] / 1000)


def test_a_python_program_changed_under_its_run_is_refused_on_resume(
    rt: glovebox.Runtime, upstream: HitCounter
) -> None:
    program = """
async def main(input, tools):
    await tools.hc({"url": input["base"] + "/one"})
    await tools["hc-approve"]({"url": input["base"] + "/two"})
    return "done"
"""
    paused = rt.run(program, input={"base": upstream.url("")}, principal="agent", lang="py")
    assert paused.status == "paused"
    with sqlite3.connect(rt.home / "runs.sqlite") as db:  # the program changed under the run
        script = db.execute("SELECT script FROM runs WHERE run_id = ?", (paused.run_id,)).fetchone()[0]
        db.execute("UPDATE runs SET script = ? WHERE run_id = ?", (script.replace("/one", "/uno"), paused.run_id))
    resumed = rt.runs.resume(paused.run_id)
    assert resumed.status == "failed" and resumed.error is not None, resumed.to_dict()
    assert resumed.error.code == "program_changed", resumed.to_dict()
    assert upstream.hits == {"/one": 1}  # nothing of the changed program ran


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("while True:\n        pass", "fuel_exhausted"),
        ("kept = []\n    while True:\n        kept.append(bytearray(1 << 20))", "memory_limit"),
        ("raise ValueError('no')", "guest_error"),
        ("return {1, 2}", "invalid_output"),
        ("import asyncio\n    await asyncio.sleep(1)", "guest_error"),
        ("import socket", "guest_error"),
    ],
)
def test_a_python_program_that_runs_away_ends_with_the_sandbox_code(rt: glovebox.Runtime, body: str, code: str) -> None:
    result = rt.run(f"async def main(input, tools):\n    {body}\n", principal="agent", lang="py")
    assert result.status == "failed" and result.error is not None and result.error.code == code, result.to_dict()


def test_a_python_program_that_does_not_compile_names_the_line(rt: glovebox.Runtime) -> None:
    with pytest.raises(glovebox.BuildError, match=r"<program>:2:"):
        rt.run("async def main(input, tools):\n    return (1 +\n", lang="py")
    with pytest.raises(glovebox.BuildError, match="defines no function main"):
        rt.run("x = 1\n", lang="py")


def test_a_python_program_sees_its_tools_and_searches_them(rt: glovebox.Runtime) -> None:
    program = """
async def main(input, tools):
    found = await tools.search("calc")
    try:
        tools.primes
    except AttributeError as e:
        hidden = str(e)
    names = [n for n in dir(tools) if not n.startswith("_")]
    return {"found": [t["name"] for t in found], "dir": names, "hidden": hidden}
"""
    result = rt.run(program, principal="agent", lang="py")
    assert result.status == "done", result.to_dict()
    assert result.output["found"] == ["calc"]
    assert {"calc", "text_stats", "hc", "hc_approve", "call", "search"} <= set(result.output["dir"])
    assert "primes" not in result.output["dir"] and "no tool 'primes'" in result.output["hidden"]


def test_gather_makes_the_calls_in_order(rt: glovebox.Runtime) -> None:
    program = """
import asyncio

async def main(input, tools):
    values = await asyncio.gather(*(tools.calc(expression=f"{n} * {n}") for n in range(3)))
    return [v["value"] for v in values]
"""
    result = rt.run(program, principal="agent", lang="py")
    assert result.status == "done" and result.output == [0, 1, 4], result.to_dict()


def test_the_python_stubs_type_the_visible_tools_and_omit_hidden_ones(rt: glovebox.Runtime) -> None:
    stubs = rt.runs.declarations("agent", lang="py")
    compile(stubs, "tools.pyi", "exec")
    assert "async def text_stats(self, input: TextStatsInput, /) -> TextStatsOutput:" in stubs
    assert "TextStatsInput = TypedDict('TextStatsInput', {'text': str" in stubs
    assert "async def hc_approve(self" in stubs and "primes" not in stubs


def test_the_two_runners_import_the_same_host_call() -> None:
    root = Path(__file__).resolve().parents[2] / "guest"
    signature = "host-call: func(kind: string, request: string) -> string;"
    for wit in (root / "js" / "runner.wit", root / "python" / "runner.wit"):
        assert signature in wit.read_text(), wit


def test_a_python_program_reaching_the_host_import_itself_gains_nothing(rt: glovebox.Runtime) -> None:
    """CPython keeps nothing private: a program may call the runner's import directly. The host checks every
    request as it checks the runner's: a kind the runner never sends is refused, a claim to replayed steps
    it was not handed stops the run (``run_diverged``)."""
    forged = rt.run(
        "from wit_world.imports import run\n\nasync def main(input, tools):\n"
        "    return run.host_call('delete-everything', '{}')\n",
        principal="agent",
        lang="py",
    )
    assert forged.status == "done" and "run_diverged" in forged.output, forged.to_dict()
    claimed = rt.run(
        "from wit_world.imports import run\n\nasync def main(input, tools):\n"
        "    run.host_call('replay', '{\"from\": 5, \"more\": false}')\n"
        "    return await tools.calc(expression='1 + 1')\n",
        principal="agent",
        lang="py",
    )
    assert claimed.status == "failed" and claimed.error is not None and claimed.error.code == "run_diverged"
    assert claimed.calls == [], "nothing ran after the forged claim"
    with pytest.raises(ValueError, match="not 'rb'"):
        rt.run("puts 1", lang="rb")


def test_text_a_python_program_sends_and_returns_keeps_every_character(rt: glovebox.Runtime) -> None:
    program = (
        "async def main(input, tools):\n"
        "    try:\n"
        "        await tools.text_stats(text='\\ud800')  # a lone surrogate: sent escaped, refused by the JSON rules\n"
        "    except tools.ToolCallError as error:\n"
        "        code = error.code\n"
        "    stats = await tools.text_stats(text=input + ' é 😀')\n"
        "    return [input, code, stats['words']]\n"
    )
    result = rt.run(program, input="naïve 😀", principal="agent", lang="py")
    assert result.status == "done", result.to_dict()
    assert result.output == ["naïve 😀", "invalid_input", 4]
