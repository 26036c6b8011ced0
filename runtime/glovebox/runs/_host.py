"""The host side of one run's program: every host call answered from the journal or live, and journaled.

The code runner makes each host call through its own import, ``host-call`` of
``glovebox:tool/run`` (``guest/js/runner.wit``; the sandbox links it for the
code runner alone): a kind and the request's JSON in, JSON text out. This class
answers them (:meth:`RunHost.host_call`). Step ``seq`` (0, 1, ...) is answered

- from the journal when it holds a ``done`` step there with the same kind and
  request (a replay: nothing runs; the program gets the text it got then: a
  clock, seed or search as stored, a tool call the part of its envelope the
  program sees). A request sent as the very text recorded is answered with
  nothing parsed; one in other words (its keys in another order) is compared in
  its canonical form;
- with ``stop`` and :class:`~glovebox.RunDiverged` when the journal holds a
  different request there;
- live otherwise (and when the journal holds it ``started``: a call in flight
  when a process died runs again, marked ``reran``): a tool call is a full
  call of the run's principal, written ``started`` before and ``done`` with its
  envelope after, committed before the program sees it. The program is sent
  only the envelope's output, or its error and who answered (the code runner
  parses every byte it is sent, in interpreted code).

**A resume replays in the runner.** Host calls cost a boundary crossing each,
so on a resume the runner (``guest/js/engine.c``) replays the journal's
recorded steps itself: it asks for them in chunks (host call ``replay``,
:meth:`RunHost._chunk`: each step's kind, the request's text as the runner sent
it, and the program's answer), answers a host call asking for exactly the next
recorded text from the chunk, and reports where that stopped (the first request
that differs, or the journal's end). The host counts those steps replayed, and
answers every host call after them itself, as above; a claim to steps it did
not hand over stops the run (``run_diverged``). The runner holds the chunks out
of the program's reach, and they hold only what this run's program was sent.

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
from ._records import RecordedStep
from ._store import RunStore

__all__ = ["RunBounds", "RunHost"]

_KINDS = ("call", "search", "now", "random")
_STOP = '{"stop": true}'
#: How much of the journal one replay chunk hands the runner at most (at least one step).
_CHUNK_STEPS = 256
_CHUNK_BYTES = 256 * 1024


#: JSON text as the journal holds it, and a request in the form steps are compared in (encoders made
#: once: ``json.dumps`` with options builds a new encoder per call, a few microseconds per step).
def _storable(sort_keys: bool) -> Callable[[Any], str]:
    """A JSON encoder writing characters as they are, except that a text holding a lone surrogate
    (JavaScript strings may hold one, UTF-8 cannot) is written escaped, so the journal can store it."""
    plain = json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys).encode
    escaped = json.JSONEncoder(sort_keys=sort_keys).encode

    def encode(value: Any) -> str:
        text = plain(value)
        return text if text.isascii() or _utf8(text) else escaped(value)

    return encode


#: JSON text as the journal holds it, and a request in the form steps are compared in (sorted keys).
_text = _storable(sort_keys=False)
_canonical = _storable(sort_keys=True)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
        self.bytes = sum(step.size for step in journal)
        #: Why the program was stopped (diverged, a bound), or None.
        self.stopped: CallError | None = None
        #: The approval_required answer that paused the run, or None.
        self.paused: CallResult | None = None
        #: One summary per nested call (replayed or live), in order; a replayed one as its stored
        #: text until :attr:`calls` is read (they are parsed together, once).
        self._calls: list[dict[str, Any] | str] = []
        self.replayed = 0
        #: The end of the steps handed to the runner to replay (see :meth:`_chunk`).
        self._handed = 0

    @property
    def calls(self) -> list[dict[str, Any]]:
        """One summary per nested call of the attempt (replayed or live), in order."""
        texts = [entry for entry in self._calls if isinstance(entry, str)]
        if texts:
            parsed = iter(json.loads("[" + ",".join(texts) + "]"))
            self._calls = [next(parsed) if isinstance(entry, str) else entry for entry in self._calls]
        return self._calls  # type: ignore[return-value]

    @property
    def replayable(self) -> bool:
        """Whether the journal starts with a step the runner can replay itself (:meth:`_chunk`)."""
        return bool(self.journal) and _replayable(self.journal[0])

    def host_call(self, kind: str, request: str) -> str:
        """Answer one host call of the program with JSON text (never raises: a bad request gets an error answer)."""
        try:
            if kind == "replay":
                return self._chunk(request)
            return self._answer(kind, request)
        except CallError as refused:  # a request the runner never sends: the program forged it
            return _text({"ok": False, "error": refused.to_dict(), "meta": {}})

    # -- answering ------------------------------------------------------------

    def _chunk(self, request: str) -> str:
        """The runner's replay (``guest/js/engine.c``): it answered the steps before ``from`` from the
        chunks it was handed; with ``more``, hand it the next ones (three lines a step: its kind, its
        request as the runner sent it, the answer; empty at the journal's end or at a step the
        runner cannot replay itself), else it stopped replaying there. A request the runner does
        not make, or a claim to steps it was not handed, stops the run (``run_diverged``)."""
        if self.stopped is not None or self.paused is not None:
            return _STOP
        try:
            asked = json.loads(request)
            start, more = asked["from"], asked["more"]
        except (ValueError, TypeError, KeyError):
            return self._stop(RunDiverged("the program sent a replay request the runner does not make"))
        if type(start) is not int or not self.seq <= start <= self._handed or not isinstance(more, bool):
            claim = str(start)[:40]
            return self._stop(RunDiverged(f"the program claimed a replay to step {claim} it was not handed"))
        for step in self.journal[self.seq : start]:
            if step.summary is not None:
                self._calls.append(step.summary)
        self.replayed += start - self.seq
        self.seq = start
        self._handed = start
        if not more:
            return ""
        lines: list[str] = []
        size, end = 0, start
        while end < len(self.journal) and size < _CHUNK_BYTES:
            step = self.journal[end]
            if not _replayable(step):
                break
            answer = _recorded_answer(step) or ""
            lines += (step.kind, step.asked or "", answer)
            size += len(step.kind) + len(step.asked or "") + len(answer) + 3
            end += 1
            if end - start >= _CHUNK_STEPS:
                break
        self._handed = end
        return "\n".join(lines) + "\n" if lines else ""

    def _answer(self, kind: str, request: str) -> str:
        if self.stopped is not None or self.paused is not None:
            return _STOP
        seq = self.seq
        if seq < len(self.journal):
            same = self.journal[seq]
            if same.asked == request and same.kind == kind:
                # The same request, to the byte, as the program sent it when the step was made: its
                # canonical form is the same too (a function of the kind and that text), so the step
                # is answered as it was, with nothing parsed or encoded.
                answer = _recorded_answer(same)
                if answer is not None:
                    self.seq += 1
                    self.replayed += 1
                    if same.summary is not None:
                        self._calls.append(same.summary)
                    return answer
        payload = _parse(kind, request)
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
        return self._live(seq, kind, payload, request_text, request)

    def _stop(self, why: CallError) -> str:
        self.stopped = why
        return _STOP

    def _replay(self, step: RecordedStep, result_text: str) -> str:
        """A recorded step asked for in other words (the same request, its keys in another order;
        or a step written before the journal kept the texts as the program sent them)."""
        self.replayed += 1
        if step.kind != "call":
            return result_text  # the clock, the seed, a search: the program's answer as recorded
        envelope = json.loads(result_text)
        self._calls.append(_summary(envelope, replayed=True))
        return _program_answer(envelope)

    def _live(self, seq: int, kind: str, payload: dict[str, Any], request_text: str, asked: str) -> str:
        if kind != "call":
            result = self._local(kind, payload)
            result_text = _text(result)
            self.store.record_step(self.run_id, seq, kind, request_text, result_text, asked=asked)
            self.bytes += len(request_text) + len(result_text) + len(asked)
            return result_text
        call_id = uuid.uuid4().hex
        self.store.begin_step(self.run_id, seq, kind, request_text, call_id, asked=asked)
        self.bytes += len(request_text) + len(asked)
        context = {"run_id": self.run_id, "step": seq}
        answer = self._call(payload["tool"], payload["input"], self.principal, call_id, context)
        envelope = answer.to_dict()
        if answer.error is not None and answer.error.code == "approval_required":
            self.store.forget_step(self.run_id, seq)
            self._calls.append(_summary(envelope, replayed=False))
            self.paused = answer
            return _STOP
        result_text = _text(envelope)
        program_answer = _program_answer(envelope)
        summary = _summary(envelope, replayed=False)
        replayed = _text({**summary, "replayed": True})
        self.store.finish_step(self.run_id, seq, result_text, answer=program_answer, summary=replayed)
        self.bytes += len(result_text) + len(program_answer) + len(replayed)
        self._calls.append(summary)
        return program_answer  # committed: now the program may see it

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


def _recorded_answer(step: RecordedStep) -> str | None:
    """What the program was sent for ``step`` when a replay can answer it from its texts alone (done,
    its request as sent kept, and for a tool call its answer and summary), else None."""
    if step.state != "done" or step.asked is None:
        return None
    if step.kind != "call":
        return step.result_text
    return step.answer if step.summary is not None else None


def _replayable(step: RecordedStep) -> bool:
    """Whether the runner can replay ``step`` itself: :func:`_recorded_answer` has its answer, and
    neither text holds a line break (a chunk is lines)."""
    answer = _recorded_answer(step)
    return answer is not None and step.asked is not None and "\n" not in step.asked and "\n" not in answer


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
