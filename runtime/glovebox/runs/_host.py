"""The host side of one run's program: every host call answered from the journal or live, and journaled.

The code runner makes each host call through its own import, ``host-call`` of
``glovebox:tool/run`` (``guest/js/runner.wit``; the sandbox links it for the
code runner alone): a kind and the request's JSON in, JSON text out. This class
answers them (:meth:`RunHost.host_call`). Step ``seq`` (0, 1, ...) is answered

- from the journal when it holds a ``done`` step there with the same kind and
  request (a replay: nothing runs; a recorded clock, seed or search goes back
  as the text stored, a tool call as the part of its envelope the program sees);
- with ``stop`` and :class:`~glovebox.RunDiverged` when the journal holds a
  different request there;
- live otherwise (and when the journal holds it ``started``: a call in flight
  when a process died runs again, marked ``reran``): a tool call is a full
  call of the run's principal, written ``started`` before and ``done`` with its
  envelope after, committed before the program sees it. The program is sent
  only the envelope's output, or its error and who answered (the code runner
  parses every byte it is sent, in interpreted code).

A live call that answers ``approval_required`` pauses the run: its step is
dropped (after the approval the same call is made again, and runs once), and
every later host call answers ``stop``. So does a bound of the journal
(:class:`~glovebox.RunLimit`).
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core._errors import CallError, RunDiverged, RunLimit
from ..model._result import CallResult
from ._store import RecordedStep, RunStore

__all__ = ["RunBounds", "RunHost"]

_KINDS = ("call", "search", "now", "random")
_STOP = '{"stop": true}'
#: JSON text as the journal holds it, and a request in the form steps are compared in (encoders made
#: once: ``json.dumps`` with options builds a new encoder per call, a few microseconds per step).
_text = json.JSONEncoder(ensure_ascii=False).encode
_canonical = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


@dataclass(frozen=True)
class RunBounds:
    """How far one run may go: host calls (steps) and journal bytes (requests and results)."""

    max_steps: int = 10_000
    max_journal_bytes: int = 16 * 1024 * 1024


#: One nested call as the run makes it: (tool, input, principal, call_id, {run_id, step}) -> its result.
CallTool = Callable[[str, Any, str, str, dict[str, Any]], CallResult]
#: The tools a principal may see, found by a query: (query, principal) -> [{name, version, description}].
SearchTools = Callable[[str, str], list[dict[str, Any]]]


class RunHost:
    """The host calls of one attempt of one run (see the module docstring)."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        principal: str,
        journal: list[RecordedStep],
        call: CallTool,
        search: SearchTools,
        bounds: RunBounds,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.principal = principal
        self.journal = journal
        self._call = call
        self._search = search
        self.bounds = bounds
        self.seq = 0
        self.bytes = sum(len(step.request_text) + len(step.result_text or "") for step in journal)
        #: Why the program was stopped (diverged, a bound), or None.
        self.stopped: CallError | None = None
        #: The approval_required answer that paused the run, or None.
        self.paused: CallResult | None = None
        #: One summary per nested call (replayed or live), in order.
        self.calls: list[dict[str, Any]] = []
        self.replayed = 0

    def host_call(self, kind: str, request: str) -> str:
        """Answer one host call of the program with JSON text (never raises: a bad request gets an error answer)."""
        try:
            return self._answer(kind, request)
        except CallError as refused:  # a request the runner never sends: the program forged it
            return _text({"ok": False, "error": refused.to_dict(), "meta": {}})

    # -- answering ------------------------------------------------------------

    def _answer(self, kind: str, request: str) -> str:
        if self.stopped is not None or self.paused is not None:
            return _STOP
        payload = _parse(kind, request)
        seq = self.seq
        self.seq += 1
        request_text = _canonical({"kind": kind, **payload})
        recorded = self.journal[seq] if seq < len(self.journal) else None
        if recorded is not None:
            if recorded.request_text != request_text:
                return self._stop(_diverged(seq, recorded.request_text, request_text))
            if recorded.state == "done" and recorded.result_text is not None:
                return self._replay(recorded, recorded.result_text)
        if seq >= self.bounds.max_steps:
            return self._stop(RunLimit(_bound_message("steps", self.bounds.max_steps), details=_bound("steps", self)))
        if self.bytes + len(request_text) > self.bounds.max_journal_bytes:
            limit = self.bounds.max_journal_bytes
            return self._stop(RunLimit(_bound_message("bytes", limit), details=_bound("bytes", self)))
        return self._live(seq, kind, payload, request_text)

    def _stop(self, why: CallError) -> str:
        self.stopped = why
        return _STOP

    def _replay(self, step: RecordedStep, result_text: str) -> str:
        self.replayed += 1
        if step.kind != "call":
            return result_text  # the clock, the seed, a search: the program's answer as recorded
        envelope = json.loads(result_text)
        self.calls.append(_summary(envelope, replayed=True))
        return _program_answer(envelope)

    def _live(self, seq: int, kind: str, payload: dict[str, Any], request_text: str) -> str:
        if kind != "call":
            result = self._local(kind, payload)
            result_text = _text(result)
            self.store.record_step(self.run_id, seq, kind, request_text, result_text)
            self.bytes += len(request_text) + len(result_text)
            return result_text
        call_id = uuid.uuid4().hex
        self.store.begin_step(self.run_id, seq, kind, request_text, call_id)
        self.bytes += len(request_text)
        context = {"run_id": self.run_id, "step": seq}
        answer = self._call(payload["tool"], payload["input"], self.principal, call_id, context)
        envelope = answer.to_dict()
        if answer.error is not None and answer.error.code == "approval_required":
            self.store.forget_step(self.run_id, seq)
            self.calls.append(_summary(envelope, replayed=False))
            self.paused = answer
            return _STOP
        result_text = _text(envelope)
        self.store.finish_step(self.run_id, seq, result_text)
        self.bytes += len(result_text)
        self.calls.append(_summary(envelope, replayed=False))
        return _program_answer(envelope)  # committed: now the program may see it

    def _local(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        if kind == "now":
            return {"now": time.time() * 1000.0}
        if kind == "random":
            return {"seed": [str(secrets.randbits(64)), str(secrets.randbits(64) | 1)]}
        return {"tools": self._search(str(payload.get("query", "")), self.principal)}


def _parse(kind: str, request: str) -> dict[str, Any]:
    if kind not in _KINDS:
        raise RunDiverged(f"the program sent a host call the runner does not make: {kind[:80]!r}")
    try:
        payload = json.loads(request)
    except ValueError as exc:
        raise RunDiverged("the program sent a host call whose request is not JSON") from exc
    if kind == "call":
        if not isinstance(payload, dict) or not isinstance(payload.get("tool"), str):
            raise RunDiverged("a tool call names no tool")
        return {"tool": payload["tool"], "input": payload.get("input")}
    if kind == "search":
        query = payload.get("query", "") if isinstance(payload, dict) else ""
        return {"query": str(query)}
    return {}


def _program_answer(envelope: dict[str, Any]) -> str:
    """What the program is sent of a nested call's envelope: its output, or its error and who answered.

    Only that much: the engine parses every byte it is sent, and interpreted
    JSON parsing costs more than the host's encoding of the part it needs.
    """
    if envelope.get("ok"):
        return _text({"ok": True, "output": envelope.get("output")})
    meta = envelope.get("meta", {})
    seen = {"call_id": meta.get("call_id"), "tool": meta.get("tool"), "version": meta.get("version")}
    return _text({"ok": False, "error": envelope.get("error"), "meta": seen})


def _summary(envelope: dict[str, Any], *, replayed: bool) -> dict[str, Any]:
    meta = envelope.get("meta", {})
    error = envelope.get("error") or {}
    return {
        "tool": meta.get("tool"),
        "version": meta.get("version"),
        "code": None if envelope.get("ok") else error.get("code"),
        "call_id": meta.get("call_id"),
        "duration_ms": meta.get("duration_ms"),
        "replayed": replayed,
    }


def _diverged(seq: int, expected: str, asked: str) -> RunDiverged:
    return RunDiverged(
        f"the program diverged from its journal at step {seq}: it asked for {_clip(asked)},"
        f" the journal holds {_clip(expected)}",
        details={"step": seq, "expected": json.loads(expected), "asked": json.loads(asked)},
    )


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bound_message(bound: str, limit: int) -> str:
    what = "host calls" if bound == "steps" else "bytes of journal"
    return f"the run reached its bound of {limit:,} {what}; the next host call did not run"


def _bound(bound: str, host: RunHost) -> dict[str, Any]:
    limit = host.bounds.max_steps if bound == "steps" else host.bounds.max_journal_bytes
    return {"bound": bound, "limit": limit, "steps": host.seq - 1, "journal_bytes": host.bytes}
