"""The host side of one run's program: every host call answered from the journal or live, and journaled.

The code runner sends each host call through ``http-fetch`` with a
``glovebox-run:KIND`` URL and a JSON body (see ``guest/js/runner.js``), so the
sandbox needs nothing new: this class is the run's ``Fetcher``. Step ``seq``
(0, 1, ...) is answered

- from the journal when it holds a ``done`` step there with the same kind and
  request (a replay: nothing runs);
- with ``stop`` and :class:`~glovebox.RunDiverged` when the journal holds a
  different request there;
- live otherwise (and when the journal holds it ``started``: a call in flight
  when a process died runs again, marked ``reran``): a tool call is a full
  call of the run's principal, written ``started`` before and ``done`` with its
  envelope after, committed before the program sees it.

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

from wasmtime.component import Record

from ..core._errors import CallError, RunDiverged, RunLimit
from ..model._result import CallResult
from ._store import JournalStep, RunStore

__all__ = ["RunBounds", "RunHost"]

URL_PREFIX = "glovebox-run:"
_KINDS = ("call", "search", "now", "random")


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
    """The ``Fetcher`` of one attempt of one run (see the module docstring)."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        principal: str,
        journal: list[JournalStep],
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
        self.bytes = sum(_size(step) for step in journal)
        #: Why the program was stopped (diverged, a bound), or None.
        self.stopped: CallError | None = None
        #: The approval_required answer that paused the run, or None.
        self.paused: CallResult | None = None
        #: One summary per nested call (replayed or live), in order.
        self.calls: list[dict[str, Any]] = []
        self.replayed = 0

    # -- the Fetcher protocol -------------------------------------------------

    def fetch(self, request: Any, state: Any) -> Record:
        """Answer one host call of the program (never raises: a bad request gets an error answer)."""
        try:
            reply = self._answer(request)
        except CallError as refused:  # a request the runner never sends: the program forged it
            reply = {"ok": False, "error": refused.to_dict(), "meta": {}}
        return _response(reply)

    def close(self) -> None:
        """Nothing to release."""

    def scrub(self, text: str) -> str:
        """The program holds no secrets: ``text`` unchanged."""
        return text

    # -- answering ------------------------------------------------------------

    def _answer(self, request: Any) -> dict[str, Any]:
        if self.stopped is not None or self.paused is not None:
            return {"stop": True}
        kind, payload = _parse(request)
        seq = self.seq
        self.seq += 1
        request_text = json.dumps({"kind": kind, **payload}, sort_keys=True, ensure_ascii=False)
        recorded = self.journal[seq] if seq < len(self.journal) else None
        if recorded is not None:
            recorded_text = _request_text(recorded)
            if recorded_text != request_text:
                return self._stop(_diverged(seq, recorded_text, request_text))
            if recorded.state == "done":
                return self._replay(recorded)
        if seq >= self.bounds.max_steps:
            return self._stop(RunLimit(_bound_message("steps", self.bounds.max_steps), details=_bound("steps", self)))
        if self.bytes + len(request_text) > self.bounds.max_journal_bytes:
            limit = self.bounds.max_journal_bytes
            return self._stop(RunLimit(_bound_message("bytes", limit), details=_bound("bytes", self)))
        return self._live(seq, kind, payload, request_text)

    def _stop(self, why: CallError) -> dict[str, Any]:
        self.stopped = why
        return {"stop": True}

    def _replay(self, step: JournalStep) -> dict[str, Any]:
        self.replayed += 1
        result: dict[str, Any] = step.result
        if step.kind == "call":
            self.calls.append(_summary(result, replayed=True))
            return _program_answer(result)
        return result

    def _live(self, seq: int, kind: str, payload: dict[str, Any], request_text: str) -> dict[str, Any]:
        if kind != "call":
            result = self._local(kind, payload)
            result_text = json.dumps(result, ensure_ascii=False)
            self.store.record_step(self.run_id, seq, kind, request_text, result_text)
            self.bytes += len(request_text) + len(result_text)
            return result
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
            return {"stop": True}
        result_text = json.dumps(envelope, ensure_ascii=False)
        self.store.finish_step(self.run_id, seq, result_text)
        self.bytes += len(result_text)
        self.calls.append(_summary(envelope, replayed=False))
        return _program_answer(envelope)

    def _local(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        if kind == "now":
            return {"now": time.time() * 1000.0}
        if kind == "random":
            return {"seed": [str(secrets.randbits(64)), str(secrets.randbits(64) | 1)]}
        return {"tools": self._search(str(payload.get("query", "")), self.principal)}


def _parse(request: Any) -> tuple[str, dict[str, Any]]:
    url = str(request.url)
    kind = url[len(URL_PREFIX) :] if url.startswith(URL_PREFIX) else ""
    if kind not in _KINDS:
        raise RunDiverged(f"the program sent a host call the runner does not make: {url[:80]!r}")
    try:
        payload = json.loads(bytes(request.body or b"null"))
    except ValueError as exc:
        raise RunDiverged("the program sent a host call whose body is not JSON") from exc
    if kind == "call":
        if not isinstance(payload, dict) or not isinstance(payload.get("tool"), str):
            raise RunDiverged("a tool call names no tool")
        return kind, {"tool": payload["tool"], "input": payload.get("input")}
    if kind == "search":
        query = payload.get("query", "") if isinstance(payload, dict) else ""
        return kind, {"query": str(query)}
    return kind, {}


def _response(reply: dict[str, Any]) -> Record:
    record = Record()
    body = json.dumps(reply, ensure_ascii=False).encode("utf-8")
    record.__dict__.update(status=200, headers=[("content-type", "application/json")], body=body)
    return record


def _program_answer(envelope: dict[str, Any]) -> dict[str, Any]:
    """What the program sees of a nested call's envelope."""
    meta = envelope.get("meta", {})
    seen = {"call_id": meta.get("call_id"), "tool": meta.get("tool"), "version": meta.get("version")}
    if envelope.get("ok"):
        return {"ok": True, "output": envelope.get("output"), "meta": seen}
    return {"ok": False, "error": envelope.get("error"), "meta": seen}


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


def _request_text(step: JournalStep) -> str:
    """A recorded step's request as the host compares it (made once per step)."""
    text = step.extra.get("request_text")
    if text is None:
        text = step.extra["request_text"] = json.dumps(
            {"kind": step.kind, **step.request}, sort_keys=True, ensure_ascii=False
        )
    return str(text)


def _size(step: JournalStep) -> int:
    size = len(_request_text(step))
    return size + (0 if step.result is None else len(json.dumps(step.result, ensure_ascii=False)))


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
