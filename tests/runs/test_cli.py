"""``glovebox run FILE`` and ``glovebox runs list|show|resume|cancel``, in-process through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from glovebox.cli._main import cli

from .conftest import HitCounter

PLAN_TS = """
interface Stats { words: number; lines: number }
export default async function (input: { text: string }, tools: any): Promise<number> {
  const stats: Stats = await tools.text_stats({ text: input.text });
  return stats.words;
}
"""


def invoke(home: Path, policy: Path, *args: str) -> Result:
    argv = ["--home", str(home), "--policy", str(policy), *args]
    return CliRunner().invoke(cli, argv, prog_name="glovebox", catch_exceptions=False)


def test_run_a_typescript_file_prints_the_run_envelope(run_home: tuple[Path, Path], tmp_path: Path) -> None:
    home, policy = run_home
    plan = tmp_path / "plan.ts"
    plan.write_text(PLAN_TS)
    done = invoke(home, policy, "run", str(plan), "--input", '{"text": "a b c"}', "--principal", "agent")
    assert done.exit_code == 0, done.output
    envelope = json.loads(done.output)
    assert envelope["status"] == "done" and envelope["output"] == 3
    assert envelope["calls"][0]["tool"] == "text-stats"
    listed = invoke(home, policy, "runs", "list", "--json")
    assert [run["run_id"] for run in json.loads(listed.output)] == [envelope["run_id"]]


def test_a_paused_run_is_resumed_or_cancelled_from_the_cli(
    run_home: tuple[Path, Path], tmp_path: Path, upstream: HitCounter
) -> None:
    home, policy = run_home
    plan = tmp_path / "plan.js"
    plan.write_text('export default async function (i, tools) { return (await tools.call("hc-approve", i)).status; }')
    paused = invoke(
        home, policy, "run", str(plan), "--input", json.dumps({"url": upstream.url("/x")}), "--principal", "agent"
    )
    assert paused.exit_code == 1
    envelope = json.loads(paused.output)
    assert envelope["status"] == "paused" and envelope["error"]["code"] == "approval_required"
    approval = envelope["error"]["details"]["approval_id"]
    assert invoke(home, policy, "approve", approval, "--principal", "admin").exit_code == 0
    resumed = invoke(home, policy, "runs", "resume", envelope["run_id"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.output)["output"] == "ok" and upstream.hits == {"/x": 1}
    again = invoke(
        home, policy, "run", str(plan), "--input", json.dumps({"url": upstream.url("/y")}), "--principal", "agent"
    )
    cancelled = invoke(home, policy, "runs", "cancel", json.loads(again.output)["run_id"])
    assert cancelled.exit_code == 1 and json.loads(cancelled.output)["status"] == "cancelled"


def test_run_refuses_a_file_that_is_not_a_program(run_home: tuple[Path, Path], tmp_path: Path) -> None:
    home, policy = run_home
    plan = tmp_path / "plan.txt"
    plan.write_text("print(1)")
    refused = invoke(home, policy, "run", str(plan))
    assert refused.exit_code == 2 and ".js, .mjs, .ts, .mts or .py" in refused.output and "--lang" in refused.output
    missing = invoke(home, policy, "runs", "show", "nope")
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output


PLAN_PY = """
async def main(input, tools):
    stats = await tools.text_stats(text=input["text"])
    return stats["words"]
"""


def test_run_a_python_file_and_print_the_python_stubs(run_home: tuple[Path, Path], tmp_path: Path) -> None:
    home, policy = run_home
    plan = tmp_path / "plan.py"
    plan.write_text(PLAN_PY)
    done = invoke(home, policy, "run", str(plan), "--input", '{"text": "a b c"}', "--principal", "agent")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["output"] == 3
    other = tmp_path / "plan.txt"  # --lang says what the extension does not
    other.write_text(PLAN_PY)
    again = invoke(home, policy, "run", str(other), "--lang", "py", "--input", '{"text": "a"}', "--principal", "agent")
    assert again.exit_code == 0 and json.loads(again.output)["output"] == 1
    stubs = invoke(home, policy, "runs", "types", "--principal", "agent", "--lang", "py")
    assert stubs.exit_code == 0 and "async def text_stats(self, input: TextStatsInput, /)" in stubs.output
    compile(stubs.output, "tools.pyi", "exec")  # the stubs are Python
