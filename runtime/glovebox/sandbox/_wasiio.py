"""glovebox's own WASI 0.2 host: ``wasi:io``, ``wasi:cli``, clocks, randomness, and what is denied.

In memory and deny by default (the linker is ``_wasihttp.linker_for``): streams and
pollables of ``wasi:io`` (a pollable is ready at once, a clock's when its instant
comes, never later than the call's deadline: a wait cut by it ends the call
``timeout``); stdout and stderr into the call's logs, stdin empty, no terminal,
environment and arguments empty; clocks and randomness work; ``wasi:filesystem``
has no preopened directory; ``wasi:sockets`` answers ``access-denied``.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable
from typing import Any

from wasmtime.component import Record, ResourceHost, Variant

from ._wasihost import MAX_BODY_BYTES, Err, Input, Ok, Output, Pollable, current, lookup, own, rep_of

__all__ = ["IO", "SYSTEM", "subscribe"]


_CLOSED = Err(Variant("closed"))


def _failed(message: str) -> Err:
    return Err(Variant("last-operation-failed", own("error", message)))


def _error_debug(store: Any, error: Any) -> str:
    item = current().get(rep_of(store, error), str)
    return item if item is not None else "error"


def _wait(pollable: Pollable) -> None:
    host = current()
    if pollable.check is not None:
        pollable.check()
    if pollable.until:
        limit = host.state.deadline if host.state is not None else time.monotonic()
        delay = min(pollable.until, limit) - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if host.state is not None and pollable.until > limit:
            host.state.timed_out = True  # the wait ran into the call's deadline: the call ends `timeout`


def _ready(pollable: Pollable) -> bool:
    if pollable.check is not None:
        return pollable.check()
    return time.monotonic() >= pollable.until


def _pollable_ready(store: Any, handle: Any) -> bool:
    item = lookup(store, handle, Pollable)
    return True if item is None else _ready(item)


def _pollable_block(store: Any, handle: Any) -> None:
    item = lookup(store, handle, Pollable)
    if item is not None:
        _wait(item)


def _poll(store: Any, handles: list[Any]) -> list[int]:
    items = [lookup(store, handle, Pollable) for handle in handles]
    ready = [i for i, item in enumerate(items) if item is None or _ready(item)]
    if ready or not items:
        return ready
    _wait(min(items, key=lambda item: item.until))
    return [i for i, item in enumerate(items) if _ready(item)] or [0]


def _read(store: Any, handle: Any, length: int) -> Any:
    item = lookup(store, handle, Input)
    if item is None or item.at >= len(item.data):
        return _CLOSED
    chunk = item.data[item.at : item.at + min(length, 1 << 20)]
    item.at += len(chunk)
    return Ok(chunk)


def _skip(store: Any, handle: Any, length: int) -> Any:
    read = _read(store, handle, length)
    return Ok(len(read.value)) if isinstance(read, Ok) else read


def subscribe(store: Any, handle: Any) -> ResourceHost:
    return own("pollable", Pollable())


def _check_write(store: Any, handle: Any) -> Any:
    return _CLOSED if lookup(store, handle, Output) is None else Ok(1 << 20)


def _write(store: Any, handle: Any, data: bytes) -> Any:
    item = lookup(store, handle, Output)
    if item is None:
        return _CLOSED
    if item.body is None:
        state = current().state
        text = bytes(data).decode("utf-8", "replace").rstrip("\n")
        if state is not None and text:
            state.add_log("info" if item.kind == "stdout" else "warn", text)
        return Ok()
    if item.body.finished:
        return _CLOSED
    if len(item.body.data) + len(data) > MAX_BODY_BYTES:
        item.body.over = True
        return _failed(f"the request body is over {MAX_BODY_BYTES} bytes")
    item.body.data += data
    return Ok()


def _write_zeroes(store: Any, handle: Any, length: int) -> Any:
    return _write(store, handle, bytes(min(length, MAX_BODY_BYTES + 1)))


def _flush(store: Any, handle: Any) -> Any:
    return _CLOSED if lookup(store, handle, Output) is None else Ok()


def _splice(store: Any, handle: Any, source: Any, length: int) -> Any:
    read = _read(store, source, length)
    if not isinstance(read, Ok):
        return read
    written = _write(store, handle, read.value)
    return Ok(len(read.value)) if isinstance(written, Ok) else written


IO: dict[str, Callable[..., Any]] = {
    "[method]error.to-debug-string": _error_debug,
    "[method]pollable.ready": _pollable_ready,
    "[method]pollable.block": _pollable_block,
    "poll": _poll,
    "[method]input-stream.read": _read,
    "[method]input-stream.blocking-read": _read,
    "[method]input-stream.skip": _skip,
    "[method]input-stream.blocking-skip": _skip,
    "[method]input-stream.subscribe": subscribe,
    "[method]output-stream.check-write": _check_write,
    "[method]output-stream.write": _write,
    "[method]output-stream.blocking-write-and-flush": _write,
    "[method]output-stream.flush": _flush,
    "[method]output-stream.blocking-flush": _flush,
    "[method]output-stream.subscribe": subscribe,
    "[method]output-stream.write-zeroes": _write_zeroes,
    "[method]output-stream.blocking-write-zeroes-and-flush": _write_zeroes,
    "[method]output-stream.splice": _splice,
    "[method]output-stream.blocking-splice": _splice,
}

# --- wasi:cli, clocks, random, filesystem, sockets ------------------------------------------------


def _now_ns() -> int:
    return time.monotonic_ns()


def _subscribe_instant(store: Any, when: int) -> ResourceHost:
    return own("pollable", Pollable(until=max(when / 1e9, 1e-9)))


def _subscribe_duration(store: Any, duration: int) -> ResourceHost:
    return own("pollable", Pollable(until=time.monotonic() + duration / 1e9))


def _wall_now(store: Any) -> Record:
    ns = time.time_ns()
    return _record(seconds=ns // 1_000_000_000, nanoseconds=ns % 1_000_000_000)


def _record(**values: Any) -> Record:
    record = Record()
    record.__dict__.update(values)
    return record


def _random_bytes(store: Any, length: int) -> bytes:
    return secrets.token_bytes(min(length, 1 << 20))


_DENIED = Err(Variant("access-denied"))

SYSTEM: dict[str, dict[str, Callable[..., Any]]] = {
    "wasi:cli/environment": {
        "get-environment": lambda store: [],
        "get-arguments": lambda store: [],
        "initial-cwd": lambda store: None,
    },
    "wasi:cli/stdin": {"get-stdin": lambda store: own("input-stream", Input(b""))},
    "wasi:cli/stdout": {"get-stdout": lambda store: own("output-stream", Output("stdout"))},
    "wasi:cli/stderr": {"get-stderr": lambda store: own("output-stream", Output("stderr"))},
    "wasi:cli/terminal-stdin": {"get-terminal-stdin": lambda store: None},
    "wasi:cli/terminal-stdout": {"get-terminal-stdout": lambda store: None},
    "wasi:cli/terminal-stderr": {"get-terminal-stderr": lambda store: None},
    "wasi:clocks/monotonic-clock": {
        "now": lambda store: _now_ns(),
        "resolution": lambda store: 1,
        "subscribe-instant": _subscribe_instant,
        "subscribe-duration": _subscribe_duration,
    },
    "wasi:clocks/wall-clock": {"now": _wall_now, "resolution": lambda store: _record(seconds=0, nanoseconds=1)},
    "wasi:random/random": {
        "get-random-bytes": _random_bytes,
        "get-random-u64": lambda store: secrets.randbits(64),
    },
    "wasi:random/insecure": {
        "get-insecure-random-bytes": lambda store, length: random.randbytes(min(length, 1 << 20)),
        "get-insecure-random-u64": lambda store: random.getrandbits(64),
    },
    "wasi:random/insecure-seed": {"insecure-seed": lambda store: (random.getrandbits(64), random.getrandbits(64))},
    "wasi:filesystem/preopens": {"get-directories": lambda store: []},
    "wasi:filesystem/types": {"filesystem-error-code": lambda store, error: None},
    "wasi:sockets/instance-network": {"instance-network": lambda store: own("network", object())},
    "wasi:sockets/tcp-create-socket": {"create-tcp-socket": lambda store, family: _DENIED},
    "wasi:sockets/udp-create-socket": {"create-udp-socket": lambda store, family: _DENIED},
    "wasi:sockets/ip-name-lookup": {"resolve-addresses": lambda store, network, name: _DENIED},
}
