"""A run survives SIGKILL of its process: another process resumes it, and no completed call runs twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import glovebox

from .conftest import HitCounter

PROGRAM = """
export default async function (input, tools) {
  const hits = [];
  for (const path of ["/a", "/b", "/hold/c", "/d"]) {
    const answer = await tools.call("hc", { url: input.base + path });
    hits.push(JSON.parse(answer.body).hit);
  }
  return hits;
}
"""

PROGRAM_PY = """
import json

async def main(input, tools):
    hits = []
    for path in ["/a", "/b", "/hold/c", "/d"]:
        answer = await tools.call("hc", {"url": input["base"] + path})
        hits.append(json.loads(answer["body"])["hit"])
    return hits
"""

CHILD = textwrap.dedent(
    """
    import json, sys
    import glovebox
    home, policy, program, base = sys.argv[1:]
    with glovebox.Runtime(home=home, policy=policy) as rt:
        lang = "py" if program.endswith(".py") else "ts"
        rt.run(open(program).read(), input={"base": base}, principal="agent", lang=lang)
    """
)


@pytest.mark.parametrize(("name", "source"), [("plan.js", PROGRAM), ("plan.py", PROGRAM_PY)])
def test_a_run_killed_mid_call_resumes_in_another_process_without_repeating_a_completed_call(
    run_home: tuple[Path, Path], upstream: HitCounter, tmp_path: Path, name: str, source: str
) -> None:
    home, policy = run_home
    program = tmp_path / name
    program.write_text(source)
    errors = tmp_path / "child.err"
    with errors.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(home), str(policy), str(program), upstream.url("")],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        assert upstream.held.wait(300), errors.read_text()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    upstream.release.set()
    assert dict(upstream.hits) == {"/a": 1, "/b": 1, "/hold/c": 1}
    with glovebox.Runtime(home=home, policy=policy) as rt:
        (record,) = rt.runs.list()
        assert record.status == "running" and record.steps == 3
        killed_call_id = record.attempt_call_id
        assert killed_call_id is not None and rt.audit.find(killed_call_id) is None, "a killed attempt writes nothing"
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "glovebox",
            "--home",
            str(home),
            "--policy",
            str(policy),
            "runs",
            "resume",
            record.run_id,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr
    envelope = json.loads(resumed.stdout)
    assert envelope["status"] == "done" and envelope["output"] == [1, 1, 2, 1]
    # /a and /b were done: answered from the journal. /hold/c was in flight at the kill: it ran again.
    assert dict(upstream.hits) == {"/a": 1, "/b": 1, "/hold/c": 2, "/d": 1}
    assert [call["replayed"] for call in envelope["calls"]] == [True, True, False, False]
    shown = subprocess.run(
        [sys.executable, "-m", "glovebox", "--home", str(home), "runs", "show", record.run_id, "--journal"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["reran"] == [2] and [step["reran"] for step in report["journal"]] == [False, False, True, False]
    assert report["meta"]["attempts"] == 2
    check_one_row_per_attempt(home, policy, record.run_id, killed_call_id, envelope)


def check_one_row_per_attempt(
    home: Path, policy: Path, run_id: str, killed_call_id: str, envelope: dict[str, Any]
) -> None:
    """The killed attempt has one row, written by the resume that took the run over; the resume has its own."""
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rows = [row for row in rt.audit.records() if row["tool"] == "glovebox:run"]
        assert [row["call_id"] for row in rows] == [killed_call_id, envelope["meta"]["call_id"]], rows
        killed, resumed = rows
        run = _egress(killed)["run"]
        assert killed["outcome"] == "abandoned" and killed["principal"] == "agent" and killed["attempt"] == 1
        assert killed["first_call_id"] == killed_call_id and killed["digest"].startswith("sha256:")
        assert run["run_id"] == run_id and run["action"] == "abandoned" and run["by"] == "agent"
        assert run["status"] == "running" and run["taken_over_by"] == resumed["call_id"]
        assert "pid" in run["holder"], "the dead holder is named"
        assert resumed["outcome"] == "ok" and resumed["attempt"] == 2
        assert _egress(resumed)["run"]["previous_call_id"] == killed_call_id
        # The killed attempt's completed nested calls name it as their parent, and its row exists.
        parents = [_egress(row)["run"]["parent_call_id"] for row in rt.audit.records() if row["tool"].startswith("hc")]
        assert parents == [killed_call_id] * 2 + [resumed["call_id"]] * 2, parents
        assert rt.audit.verify().ok


def _egress(row: dict[str, Any]) -> dict[str, Any]:
    value = row["egress"]
    return value if isinstance(value, dict) else dict(json.loads(value))


def test_a_cancel_of_a_run_whose_process_was_killed_writes_the_dead_attempts_row(
    run_home: tuple[Path, Path], upstream: HitCounter, tmp_path: Path
) -> None:
    home, policy = run_home
    program = tmp_path / "plan.js"
    program.write_text(PROGRAM)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home), str(policy), str(program), upstream.url("")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert upstream.held.wait(300), "the child never reached the held call"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    upstream.release.set()
    with glovebox.Runtime(home=home, policy=policy) as rt:
        (record,) = rt.runs.list()
        killed_call_id = record.attempt_call_id
    argv = [sys.executable, "-m", "glovebox", "--home", str(home), "--policy", str(policy)]
    cancelled = subprocess.run(
        [*argv, "runs", "cancel", record.run_id],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert cancelled.returncode == 1, cancelled.stderr
    envelope = json.loads(cancelled.stdout)
    assert envelope["status"] == "cancelled" and envelope["meta"]["cancelled_by"] == "agent", envelope
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rows = [row for row in rt.audit.records() if row["tool"] == "glovebox:run"]
        assert [row["call_id"] for row in rows] == [killed_call_id, envelope["meta"]["call_id"]], rows
        killed, cancel = rows
        assert killed["outcome"] == "abandoned" and _egress(killed)["run"]["taken_over_by"] == cancel["call_id"]
        assert cancel["outcome"] == "cancelled" and _egress(cancel)["run"]["action"] == "cancel"
        assert _egress(cancel)["run"]["previous_call_id"] == killed_call_id
        assert rt.audit.verify().ok
    assert dict(upstream.hits) == {"/a": 1, "/b": 1, "/hold/c": 1}, "nothing ran after the kill"
