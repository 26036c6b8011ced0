"""The runner given an environment of its own: all a run needs from outside is one ``RunEnvironment``.

A Runtime hands its own (``glovebox.runtime._runenv``); here a small one answers
the nested calls itself, so the test sees exactly what the runner asks of an
environment: each nested call with its run context, a call of a tool the
principal cannot see refused with the environment's not-found message, and one
attempt's facts for the audit row. The code runner and its sandbox are real.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glovebox.core._errors import CallError
from glovebox.engine._engine import acquire_engine
from glovebox.engine._settings import EngineSettings
from glovebox.model._manifest import Manifest
from glovebox.model._result import CallResult, ToolInfo
from glovebox.policy._models import Policy
from glovebox.runs._attempt import RunAttempt
from glovebox.runs._env import RunEnvironment
from glovebox.runs._runner import Runner
from glovebox.runs._store import RunStore
from glovebox.sandbox._sandbox import Sandbox
from glovebox.toolchains._build import sdk_dir
from glovebox.toolchains._jsrunner import transpile

PROGRAM = """
export default async function (input, tools) {
  const twice = await tools.double({ n: input.n });
  let hidden;
  try { await tools.call("secret", {}); } catch (e) { hidden = [e.code, e.message]; }
  return { twice: twice.value, hidden };
}
"""


class Doubler:
    """A :class:`RunEnvironment` with one tool, ``double``, answered in this process."""

    def __init__(self, home: Path, sandbox: Sandbox) -> None:
        self.home = home
        self.policy = Policy.model_validate({"version": 1})
        self.sandbox = sandbox
        self.calls: list[tuple[str, Any, str, str, dict[str, Any]]] = []
        self.refused: list[tuple[str, str, dict[str, Any], CallError]] = []
        self.attempts: list[RunAttempt] = []

    def visible_tools(self, principal: str | None) -> list[ToolInfo]:
        manifest = Manifest.model_validate({"name": "double", "description": "twice a number"})
        return [ToolInfo(manifest, "sha256:" + "0" * 64, "2026-12-04T00:00:00Z", 0)]

    def call(self, tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any]) -> CallResult:
        self.calls.append((tool, input, principal, call_id, run))
        return CallResult(ok=True, output={"value": input["n"] * 2}, meta={"call_id": call_id, "tool": tool})

    def refuse(
        self, tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any], error: CallError
    ) -> CallResult:
        self.refused.append((tool, call_id, run, error))
        return CallResult(ok=False, error=error, meta={"call_id": call_id, "tool": tool})

    def not_found(self, tool: str, principal: str, visible: list[str]) -> str:
        return f"{principal} sees no {tool}, only {visible}"

    def audit_attempt(self, attempt: RunAttempt) -> None:
        self.attempts.append(attempt)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Doubler]:
    shared = acquire_engine(EngineSettings())
    try:
        yield Doubler(tmp_path, Sandbox(shared))
    finally:
        shared.release()


def test_a_run_asks_its_environment_for_everything_it_needs(env: Doubler) -> None:
    environment: RunEnvironment = env  # (`mypy --strict` on this file checks that it is one)
    store = RunStore(env.home)
    try:
        runner = Runner(store, environment)
        result = runner.start(
            transpile(PROGRAM, "js", sdk_dir()), lang="js", source=PROGRAM, input={"n": 21}, principal="agent"
        )
    finally:
        store.close()
    message = "agent sees no secret, only ['double']"
    assert result.status == "done", result.to_dict()
    assert result.output == {"twice": 42, "hidden": ["tool_not_found", f"tool_not_found: {message}"]}

    (attempt,) = env.attempts
    assert (attempt.run_id, attempt.principal, attempt.by, attempt.attempt) == (result.run_id, "agent", "agent", 1)
    assert (attempt.status, attempt.outcome, attempt.calls) == ("done", "ok", 2)

    ((tool, value, principal, call_id, run),) = env.calls
    assert (tool, value, principal) == ("double", {"n": 21}, "agent")
    assert run["run_id"] == result.run_id and run["parent_call_id"] == attempt.call_id and run["deadline_at"] > 0
    ((hidden, hidden_id, hidden_run, error),) = env.refused
    assert (hidden, error.code, error.message) == ("secret", "tool_not_found", message)
    assert hidden_run["parent_call_id"] == attempt.call_id and hidden_id != call_id
    assert [call["call_id"] for call in result.calls] == [call_id, hidden_id]
