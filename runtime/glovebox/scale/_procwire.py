"""What a ProcessPool sends its workers: each request as JSON text, never a pickle.

A worker unpickles nothing a caller chose (an input whose unpickling raises, or
runs code, would end the worker and the calls beside it). A request is one JSON
object, ``{"call_id", "name", "principal", "trace"}`` (and ``"run"`` for a
nested call of a code-mode run: its ``meta.run``, which the worker's call and
audit row carry) plus the input in one of three forms (``null`` tells the
worker to stop):

- ``"input"``: the input itself, when it can be written as JSON (NaN and the
  infinities cross as JSON's ``NaN``/``Infinity``, for the worker's Runtime to
  refuse as ``Runtime.call`` does; tuples arrive as lists, ``str`` and ``int``
  subclasses as their values, as the tool would see them);
- ``"rejected"``: the refusal (``problem``, ``details``) of an input that breaks
  the JSON rules and cannot be written (nested too deep, a number too long):
  ``Runtime.call`` refuses it before anything else, and so does the worker;
- ``"not_json"``: the JSON encoder's error for an input holding something that
  is not JSON (a set, bytes, any object): the worker calls with a stand-in that
  fails the encoder the same way, at the same step, so the answer is the one
  ``Runtime.call`` gives (``tool_not_found`` or ``permission_denied`` first,
  else ``invalid_input`` with the same message).

A message that is not such a request is refused by :func:`decode` with
:class:`BadRequest`, which carries the call id when it can be read.

Messages are framed as ``multiprocessing.Connection`` frames them (a 4-byte
big-endian length, or ``-1`` and an 8-byte one), so either end may write with
``Connection.send_bytes``; :class:`Frames` reads them through a buffer, so one
``read`` takes every message the pipe holds, and a read cut short by a signal
loses nothing. A header that cannot be one (a negative length, or one over
:data:`MAX_FRAME`) raises :class:`BadFrame`: the stream cannot be resynchronised,
so the reader treats the pipe as broken.
"""

from __future__ import annotations

import functools
import json
import os
import re
import select
from dataclasses import dataclass, field
from typing import Any

from ..core._canonical import json_encoder
from ..core._errors import InvalidInput
from ..core._jsonlimits import JsonRejected, check_value, escape_surrogates
from ..schema._schemas import encode_input

__all__ = [
    "FLAG_BYTES",
    "MAX_FRAME",
    "STOP",
    "BadFrame",
    "BadRequest",
    "Frames",
    "Request",
    "decode",
    "encode",
    "is_unicode",
]

#: The message that tells a worker to stop.
STOP = b"null"
#: Bytes of the page a worker shares with its pool: byte 0 is 1 while a thread of the worker holds
#: its pipe, byte 1 counts its idle threads (up to 255); the worker writes both, the pool reads.
FLAG_BYTES = 64
_WIRE = json_encoder(ensure_ascii=True, allow_nan=True)  # JSONEncoder's text, straight from the C encoder
_READ = json.JSONDecoder().decode
_NOT_JSON_PREFIX = "input is not a JSON value: "
_OBJECT = re.compile(r"Object of type (.+) is not JSON serializable", re.DOTALL)
_KEY = re.compile(r"keys must be str, int, float, bool or None, not (.+)", re.DOTALL)
_FLOAT = re.compile(r"Out of range float values are not JSON compliant(?:: (.+))?", re.DOTALL)


class BadRequest(ValueError):
    """A message that is not a request; ``call_id`` when the message names one."""

    def __init__(self, problem: str, call_id: str | None = None) -> None:
        super().__init__(problem)
        self.call_id = call_id


@dataclass
class Request:
    """One call, as a worker runs it: the input, or the refusal ``Runtime.call`` would answer first."""

    call_id: str
    name: str
    principal: str | None
    trace: dict[str, str] | None
    input: Any = None
    refusal: InvalidInput | None = field(default=None)
    #: The run context of a nested call (``meta.run``: ``run_id``, ``step``...), or None.
    run: dict[str, Any] | None = None


def encode(
    call_id: str,
    name: str,
    value: Any,
    principal: str | None,
    trace: dict[str, str] | None,
    run: dict[str, Any] | None = None,
) -> bytes:
    """The request of one call, as JSON text (see the module); ``run`` only for a nested call of a run."""
    request: dict[str, Any] = {"call_id": call_id, "name": name, "principal": principal, "trace": trace}
    if run is not None:
        request["run"] = run
    request["input"] = value
    try:
        return _WIRE(request).encode("ascii")
    except (TypeError, ValueError, RecursionError):
        del request["input"]
    try:
        check_value(value)
    except JsonRejected as exc:
        request["rejected"] = {"problem": str(exc), "details": exc.details}
    else:
        request["not_json"] = _encoder_error(value)
    return _WIRE(request).encode("ascii")


def _encoder_error(value: Any) -> str:
    """What the Runtime's input encoder says of ``value`` (which is not JSON)."""
    try:
        encode_input(value)
    except InvalidInput as exc:
        return exc.message.removeprefix(_NOT_JSON_PREFIX)
    except RecursionError:
        return "it is nested too deep to be written"
    return "it cannot be sent to a worker process"


def decode(data: bytes) -> Request | None:
    """The request in ``data``, or None for :data:`STOP`.

    Raises:
        BadRequest: ``data`` is not a request.
    """
    try:
        message = _READ(data.decode("ascii"))  # the pool writes ASCII; a str parses faster than bytes
    except (ValueError, RecursionError) as exc:  # not ASCII, not JSON
        raise BadRequest(f"not JSON: {exc}") from None
    if message is None:
        return None
    if not isinstance(message, dict):
        raise BadRequest(f"not a JSON object but {type(message).__name__}")
    call_id = message.get("call_id")
    if not isinstance(call_id, str):
        raise BadRequest("no call id")
    name, principal, trace = message.get("name"), message.get("principal"), message.get("trace")
    if not isinstance(name, str) or not (principal is None or isinstance(principal, str)) or not _is_trace(trace):
        raise BadRequest("a name, principal or trace of the wrong type", call_id)
    run = message.get("run")
    if not (run is None or isinstance(run, dict)):
        raise BadRequest("a run context that is not an object", call_id)
    request = Request(call_id, name, principal, trace, run=run)
    if "input" in message:
        request.input = message["input"]
    elif isinstance(rejected := message.get("rejected"), dict):
        details = rejected.get("details")
        refusal = f"input {rejected.get('problem')}"
        request.refusal = InvalidInput(refusal, details=details if isinstance(details, dict) else {})
    elif isinstance(not_json := message.get("not_json"), str):
        stand_in = _stand_in(not_json)
        if stand_in is _NO_STAND_IN:
            request.refusal = InvalidInput(_NOT_JSON_PREFIX + not_json)
        request.input = stand_in
    else:
        raise BadRequest("no input", call_id)
    return request


def _is_trace(trace: Any) -> bool:
    return trace is None or (isinstance(trace, dict) and all(isinstance(v, str) for v in trace.values()))


_NO_STAND_IN = object()


def _stand_in(problem: str) -> Any:
    """A value the Runtime's input encoder refuses with exactly ``problem``, when one can be made."""
    try:
        if found := _OBJECT.fullmatch(problem):
            return _named(found[1])()
        if found := _KEY.fullmatch(problem):
            return {_named(found[1])(): None}
        if found := _FLOAT.fullmatch(problem):
            return float(found[1] or "nan")
    except ValueError:  # a type name no class can have, a float that is not one
        pass
    return _NO_STAND_IN


@functools.lru_cache(maxsize=64)
def _named(type_name: str) -> type:
    """A class named ``type_name`` (the JSON encoder's error names the type of what it refuses)."""
    return type(type_name, (), {"__slots__": (), "__module__": __name__})


def is_unicode(*texts: str | None) -> bool:
    """Whether every text is valid Unicode (a lone surrogate is refused before the input is looked at)."""
    return all(text is None or escape_surrogates(text) == text for text in texts)


#: Bytes asked of the pipe per ``read`` (more when a message is known to be longer).
_CHUNK = 1 << 16
#: The longest message either end accepts (bytes); a longer header is a broken stream.
MAX_FRAME = 1 << 30


class BadFrame(OSError):
    """A frame header that cannot be one: the messages after it cannot be found."""


class Frames:
    """The messages of one pipe, read through a buffer (see the module); not thread-safe.

    Whoever reads (one thread at a time) calls :meth:`next`. Bytes already read
    stay in the buffer whatever happens to the reader, so a ``KeyboardInterrupt``
    raised in the middle of a ``read`` never splits a message.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()

    def next(self) -> bytes:
        """The next message.

        Raises:
            EOFError: the pipe closed between messages.
            BadFrame: a header that cannot be one.
            OSError: the pipe closed inside a message, or the read failed.
        """
        buffer = self._buffer
        while True:
            size, start = self._frame()
            if size >= 0 and len(buffer) >= start + size:
                message = bytes(buffer[start : start + size])
                del buffer[: start + size]
                return message
            chunk = os.read(self._fd, max(_CHUNK, start + size - len(buffer)))
            if not chunk:
                if buffer:
                    raise OSError("the pipe closed inside a message")
                raise EOFError
            buffer += chunk

    def buffered(self) -> bool:
        """Whether the buffer holds a whole message, or a header that cannot be one (for the next
        reader to meet); only for the thread that reads."""
        try:
            size, start = self._frame()
        except BadFrame:
            return True
        return size >= 0 and len(self._buffer) >= start + size

    def readable(self) -> bool:
        """Whether the descriptor has bytes, or its end, to read (any thread may ask, at once).

        A ``select.poll`` object refuses a second ``poll()`` while one runs
        (``RuntimeError``), so each question gets its own (half a microsecond).
        """
        poll = select.poll()
        poll.register(self._fd, select.POLLIN)
        return bool(poll.poll(0))

    def _frame(self) -> tuple[int, int]:
        """The length of the buffered message and where it starts (``-1`` while the header is incomplete)."""
        buffer = self._buffer
        if len(buffer) < 4:
            return -1, 4
        size = int.from_bytes(buffer[:4], "big", signed=True)
        if size == -1:
            if len(buffer) < 12:
                return -1, 12
            size, start = int.from_bytes(buffer[4:12], "big"), 12
        else:
            start = 4
        if not 0 <= size <= MAX_FRAME:
            raise BadFrame(f"a frame header of {size} bytes")
        return size, start
