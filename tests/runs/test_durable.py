"""A run survives SIGKILL of its process: another process resumes it, and no completed call runs twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

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

CHILD = textwrap.dedent(
    """
    import json, sys
    import glovebox
    home, policy, program, base = sys.argv[1:]
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rt.run(open(program).read(), input={"base": base}, principal="agent")
    """
)


def test_a_run_killed_mid_call_resumes_in_another_process_without_repeating_a_completed_call(
    run_home: tuple[Path, Path], upstream: HitCounter, tmp_path: Path
) -> None:
    home, policy = run_home
    program = tmp_path / "plan.js"
    program.write_text(PROGRAM)
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
