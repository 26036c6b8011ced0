"""Replaying a run against today's tools: where would the new versions diverge (a drift check).

:class:`DriftCheck` runs a run's program again, once, in a fresh sandbox of its
runner, answering its host calls itself without touching the run or its
journal. Step by step:

- the program must ask for what the journal holds at that step (else the
  program itself diverged: ``reason`` ``request``);
- the clock, the random seed and a search are answered as recorded;
- a tool call to a **write** is answered as recorded and not made: the tool
  declares a ``compensate``, or it could change something (a capability other
  than HTTP ``GET``/``HEAD``/``OPTIONS``, an imported operation of another
  method, a SQL ``execute`` tool, a remote tool, a saved program), or the policy
  does not simply allow the run's principal to call it (a person approved it then);
- a tool call to a **read** (a tool with no capability, or HTTP reads only; an
  imported ``GET``; a SQL ``query``) is made live, a full call of the run's
  principal against the version registered today (its audit row names the run,
  the step and ``action`` ``replay``), and its answer (output, or error code)
  compared to the recorded one: the first that differs is where the new
  versions diverge (``reason`` ``output``), and the check stops there.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..core._errors import CallError
from ..model._manifest import Manifest
from ..model._result import ToolInfo
from ..policy._checker import decide
from ..policy._models import Policy
from ._host import _canonical, _parse, _program_answer
from ._records import JournalStep, RunRecord
from ._tools import ProgramTools

__all__ = ["DriftCheck", "DriftReport", "is_read"]

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_STOP = '{"stop": true}'


def is_read(manifest: Manifest) -> bool:
    """Whether a call of the tool cannot change anything, so a drift check may make it live."""
    if manifest.compensate is not None:
        return False
    if manifest.kind == "sql":
        return manifest.sql_operation is not None and manifest.sql_operation.mode == "query"
    if manifest.kind in ("openapi", "graphql"):
        operation = manifest.operation
        return operation is not None and operation.graphql is None and operation.method in _SAFE_METHODS
    if manifest.kind not in ("wasm", "component"):
        return False  # a remote tool, a saved program, anything else: it may write
    for name, declared in manifest.capabilities.model_dump().items():
        if not declared:
            continue
        if name != "http" or any(not set(rule["methods"]) <= _SAFE_METHODS for rule in declared):
            return False
    return True


@dataclass(frozen=True)
class DriftReport:
    """What replaying a run against today's tools found.

    Attributes:
        run_id: the run.
        status: ``same`` (every live step answered as recorded and the program ended as it did),
            ``diverged`` (``diverged`` says where) or ``failed`` (the program failed in the replay
            for another reason: ``error``).
        steps: one entry per step the replay reached: ``step``, ``kind``, ``tool``, ``how``
            (``live`` or ``recorded``) and ``same``.
        diverged: the first diverging step: ``step``, ``reason`` (``output``: a live call answered
            otherwise; ``request``: the program asked for another host call than the journal holds;
            ``end``: it ended otherwise), ``tool``, ``recorded`` and ``current`` (each its
            ``version`` and ``output`` or ``error``).
        error: why the replay failed, when it did.
    """

    run_id: str
    status: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    diverged: dict[str, Any] | None = None
    error: CallError | None = None

    def to_dict(self) -> dict[str, Any]:
        """``run_id``, ``status``, ``steps``, ``diverged`` and, when it failed, ``error``."""
        envelope: dict[str, Any] = {"run_id": self.run_id, "status": self.status, "diverged": self.diverged}
        if self.error is not None:
            envelope["error"] = self.error.to_dict()
        envelope["steps"] = [dict(step) for step in self.steps]
        return envelope


def _answer_of(envelope: dict[str, Any]) -> dict[str, Any]:
    """What a call answered, as compared: its version and its output or error code."""
    meta = envelope.get("meta", {})
    if envelope.get("ok"):
        return {"version": meta.get("version"), "output": envelope.get("output")}
    return {"version": meta.get("version"), "error": (envelope.get("error") or {}).get("code")}


class DriftHost:
    """The host calls of one replay against today's tools (see the module docstring)."""

    def __init__(
        self, record: RunRecord, journal: list[JournalStep], tools: ProgramTools, infos: list[ToolInfo], policy: Policy
    ) -> None:
        self.record = record
        self.journal = journal
        self._tools = tools
        self._reads = {
            info.name: is_read(info.manifest) and decide(policy, record.principal, info).action == "allow"
            for info in infos
        }
        self.seq = 0
        self.steps: list[dict[str, Any]] = []
        self.diverged: dict[str, Any] | None = None
        #: Whether the program asked past the journal of a run that never finished (compared up to there).
        self.reached_end = False

    def host_call(self, kind: str, request: str) -> str:
        """Answer one host call (never raises)."""
        if self.diverged is not None or self.reached_end:
            return _STOP
        try:
            payload = _parse(kind, request)
        except CallError:
            return self._diverge({"reason": "request", "asked": request[:200]})
        seq, self.seq = self.seq, self.seq + 1
        step = self.journal[seq] if seq < len(self.journal) else None
        if step is None and self.record.status != "done":
            self.reached_end = True  # the run got no further (it paused, or failed here): nothing to compare
            return _STOP
        asked = _canonical({"kind": kind, **payload})
        if step is None or step.state != "done" or _canonical(step.request) != asked:
            recorded = None if step is None else step.request
            return self._diverge({"step": seq, "reason": "request", "recorded": recorded, "asked": json.loads(asked)})
        if kind != "call":
            self.steps.append({"step": seq, "kind": kind, "tool": None, "how": "recorded", "same": True})
            return _canonical(step.result)
        return self._call(seq, payload, step)

    def _call(self, seq: int, payload: dict[str, Any], step: JournalStep) -> str:
        tool = payload["tool"]
        recorded = step.result if isinstance(step.result, dict) else {}
        entry = {"step": seq, "kind": "call", "tool": tool, "how": "recorded", "same": True}
        self.steps.append(entry)
        if not self._reads.get(tool.partition("@")[0], False):
            return _program_answer(recorded)  # a write: answered as recorded, not made
        entry["how"] = "live"
        context = {"run_id": self.record.run_id, "step": seq, "action": "replay"}
        answer = self._tools.call(tool, payload["input"], self.record.principal, uuid.uuid4().hex, context).to_dict()
        before, now = _answer_of(recorded), _answer_of(answer)
        if {k: v for k, v in before.items() if k != "version"} != {k: v for k, v in now.items() if k != "version"}:
            entry["same"] = False
            return self._diverge({"step": seq, "reason": "output", "tool": tool, "recorded": before, "current": now})
        return _program_answer(recorded)  # the same answer: the program goes on as it did

    def _diverge(self, where: dict[str, Any]) -> str:
        self.diverged = where
        return _STOP


class DriftCheck:
    """Replays runs against today's tools with ``runner`` (its ``execute``) and ``tools`` (what a program sees)."""

    def __init__(self, runner: Any, tools: ProgramTools, visible: Any, policy: Policy) -> None:
        self._runner = runner
        self._tools = tools
        self._visible = visible
        self._policy = policy

    def check(self, record: RunRecord, journal: list[JournalStep]) -> DriftReport:
        """Replay ``record`` (its ``journal``) against today's tools; where it diverges, if it does."""
        host = DriftHost(record, journal, self._tools, self._visible(record.principal), self._policy)
        outcome = self._runner.execute(record, host)
        if host.diverged is not None:
            return DriftReport(record.run_id, "diverged", host.steps, host.diverged)
        if host.reached_end:
            return DriftReport(record.run_id, "same", host.steps)
        if outcome.error is not None:
            return DriftReport(record.run_id, "failed", host.steps, None, outcome.error)
        if host.seq != len(journal):
            where = {"step": host.seq, "reason": "end", "recorded": len(journal), "current": host.seq}
            return DriftReport(record.run_id, "diverged", host.steps, where)
        ended = _ended(outcome.output_text)
        saved = (record.result or {}).get("output")
        if record.status == "done" and ended != saved:
            where = {"step": host.seq, "reason": "end", "recorded": saved, "current": ended}
            return DriftReport(record.run_id, "diverged", host.steps, where)
        return DriftReport(record.run_id, "same", host.steps)


def _ended(text: str | None) -> Any:
    try:
        answer = json.loads(text or "null")
    except ValueError:
        return None
    return answer.get("output") if isinstance(answer, dict) else None
