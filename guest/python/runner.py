"""The Python code runner of ``Runtime.run(code, lang="py")``: one pre-initialised CPython component.

A program defines ``main``, a coroutine function taking the run's input and
``tools``::

    async def main(input, tools):
        stats = await tools.words({"text": input["text"]})   # or tools.words(text=...)
        return stats["count"]

The host hands over the program's source with the input and the names of the
tools the run's principal may see. Every host call (a tool call, a search, the
clock, the random seed) goes through one channel, the run's own host import
(``host-call`` of glovebox:tool/run, see ``runner.wit``), which the host answers
from the run's journal on a replay or live (and journals) otherwise. A tool call
is made when ``tools.NAME(...)`` is called and answers an awaitable: its output,
or a raised ``ToolCallError`` carrying the nested call's ``code``.

**A resume replays here.** The host hands over the journal's recorded steps in
chunks (host call ``replay``: lines of three, each step's kind, its request's
text as this runner sent it, and the answer the program got); a host call asking
for exactly the next recorded text is answered from the chunk with one JSON
decode and no host call; the first that differs (or the journal's end) ends the
replay, and from there on every host call goes to the host, which compares it
with the journal itself.

When the host answers ``stop`` (the run pauses for an approval, diverged from its
journal, or reached a bound), ``RunStopped`` (a ``BaseException``) unwinds the
program and every later host call raises it again; the host decides how the run
ended. ``time.time()``/``time.time_ns()`` and the ``random`` module's functions
are host calls too (journaled), so a replay sees what the first attempt saw.

Built by ``glovebox.toolchains._pyrunner`` with componentize-py, which runs this
module's top level at build time and keeps the memory it made: a run starts
with the interpreter, ``json`` and this module already initialised.
"""

from __future__ import annotations

import builtins
import gc
import importlib
import inspect
import json
import keyword
import random
import re
import sys
import time
import traceback
import types

import wit_world
from componentize_py_types import Err
from wit_world.imports import host as _host_iface
from wit_world.imports import run as _run_iface

OOM_MARKER = "glovebox: out of memory"

_host_call = _run_iface.host_call
_plain = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_escaped = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def _encode(value: object) -> str:
    """JSON text of ``value``, characters as they are; escaped when it holds a lone surrogate
    (a Python string may, UTF-8 cannot: the host import takes UTF-8)."""
    text = _plain(value)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _escaped(value)
    return text
_decode = json.JSONDecoder().decode


class RunStopped(BaseException):
    """The host stopped the run (paused for an approval, diverged, a bound): the program goes no further."""


class _OutOfMemory(BaseException):
    """Escapes the export so that the component traps after reporting OOM_MARKER."""


class ToolCallError(Exception):
    """A nested tool call failed: ``code``, ``message``, ``retryable``, ``details`` and ``call_id`` of its envelope."""

    def __init__(self, error: dict, meta: dict | None) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.retryable = bool(error.get("retryable"))
        self.details = error.get("details") or {}
        self.call_id = (meta or {}).get("call_id")
        self.envelope = {"error": error, "meta": meta}


class _State:
    stopped = False


class _Replay:
    """A resume's replay: the recorded steps the host hands over, answered here (see the module docstring)."""

    def __init__(self) -> None:
        self.on = False
        self.lines: list[str] = []
        self.at = 0
        self.seq = 0

    def answer(self, kind: str, text: str) -> str | None:
        """The recorded answer of the next step when it is ``kind`` with request ``text``; else None (ended)."""
        if self.at >= len(self.lines):
            chunk = _host_call("replay", '{"from":%d,"more":true}' % self.seq)
            if chunk.startswith("{"):  # the host stopped the run
                self.on = False
                return chunk
            if not chunk:  # the journal's end: the host knows where the replay stopped
                self.on = False
                return None
            self.lines = chunk.split("\n")
            self.lines.pop()  # the chunk ends with a line break
            self.at = 0
        at = self.at
        if len(self.lines) - at < 3 or self.lines[at] != kind or self.lines[at + 1] != text:
            self.end()
            return None
        self.at = at + 3
        self.seq += 1
        return self.lines[at + 2]

    def end(self) -> None:
        """Report where the replay stopped (the first step that differs, or the program's end)."""
        if self.on:
            self.on = False
            self.lines = []
            _host_call("replay", '{"from":%d,"more":false}' % self.seq)


_replay = _Replay()


def _host(kind: str, payload: object) -> dict:
    """One host call: from the replay while it lasts, else the host's; ``RunStopped`` once the host says stop."""
    if _State.stopped:
        raise RunStopped()
    text = _encode(payload)
    reply = _replay.answer(kind, text) if _replay.on else None
    if reply is None:
        reply = _host_call(kind, text)
    answer = _decode(reply)
    if answer.get("stop"):
        _State.stopped = True
        raise RunStopped()
    return answer


class _Settled:
    """A host call's answer as an awaitable that never suspends (the call was made when it was asked for)."""

    __slots__ = ("_value", "_error")

    def __init__(self, value: object, error: BaseException | None) -> None:
        self._value = value
        self._error = error

    def __await__(self):  # noqa: ANN204
        if self._error is not None:
            raise self._error
        return self._value
        yield  # a generator: ``await`` takes its return value


def _attribute(tool: str) -> str:
    name = re.sub(r"\W", "_", tool, flags=re.ASCII)
    if name[:1].isdigit():
        name = "_" + name
    return name + "_" if keyword.iskeyword(name) else name


class Tools:
    """What a program's ``main`` gets: ``await tools.NAME(input)`` (or ``tools.call(name, input)``,
    ``tools["name"](input)``), ``await tools.search(query)`` and ``tools.ToolCallError``."""

    ToolCallError = ToolCallError

    def __init__(self, names: list[str]) -> None:
        self._by_attribute = {}
        for name in names:
            self._by_attribute.setdefault(_attribute(name), name)

    def call(self, name: str, input: object = None, /, **fields: object) -> _Settled:
        """Call tool ``name`` (or ``name@version``) with ``input`` (or keyword fields): an awaitable of its output."""
        if fields:
            if input is not None:
                raise TypeError("give a tool's input as one dict or as keyword arguments, not both")
            input = fields
        reply = _host("call", {"tool": str(name), "input": input})
        if reply.get("ok"):
            return _Settled(reply.get("output"), None)
        return _Settled(None, ToolCallError(reply.get("error") or {}, reply.get("meta")))

    def search(self, query: str = "") -> _Settled:
        """The visible tools whose name or description matches ``query``: [{name, version, description}]."""
        return _Settled(_host("search", {"query": str(query)})["tools"], None)

    def __getitem__(self, name: str):  # noqa: ANN204
        return lambda input=None, /, **fields: self.call(name, input, **fields)

    def __getattr__(self, attribute: str):  # noqa: ANN204
        name = self.__dict__.get("_by_attribute", {}).get(attribute)
        if name is None:
            raise AttributeError(f"no tool {attribute!r} for this program (tools.call(name, input) names any tool)")
        return self[name]

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._by_attribute})


def _now_ms() -> float:
    return float(_host("now", None)["now"])


time.time = lambda: _now_ms() / 1000.0
time.time_ns = lambda: int(_now_ms() * 1_000_000)


class _RunRandom(random.Random):
    """The ``random`` module's generator, seeded once per run by the host (journaled) on its first use."""

    _seeded = False

    def _ensure(self) -> None:
        if not self._seeded:
            seed = _host("random", None)["seed"]
            self._seeded = True
            super().seed((int(seed[0]) << 64) | int(seed[1]))

    def random(self) -> float:
        self._ensure()
        return super().random()

    def getrandbits(self, k: int) -> int:
        self._ensure()
        return super().getrandbits(k)

    def seed(self, a: object = None, version: int = 2) -> None:
        if a is None:  # a fresh seed is the host's, on first use
            self._seeded = False
            return
        self._seeded = True
        super().seed(a, version)


_generator = _RunRandom(0)
_generator._seeded = False
for _name in (
    "seed", "random", "uniform", "triangular", "randint", "choice", "randrange", "sample", "shuffle",
    "choices", "normalvariate", "lognormvariate", "expovariate", "vonmisesvariate", "gammavariate",
    "gauss", "betavariate", "paretovariate", "weibullvariate", "getstate", "setstate", "getrandbits",
    "randbytes", "binomialvariate",
):  # fmt: skip
    if hasattr(_generator, _name):
        setattr(random, _name, getattr(_generator, _name))


def _gather(*awaitables: object, return_exceptions: bool = False) -> object:
    """``asyncio.gather`` for a program: every tool call has already been made, in order; await each."""

    async def gathered() -> list:
        results = []
        for awaitable in awaitables:
            try:
                results.append(await awaitable)
            except Exception as error:
                if not return_exceptions:
                    raise
                results.append(error)
        return results

    return gathered()


#: What a program may import besides the above: standard modules that need no file, socket or
#: thread, imported here at build time. A run has no file system to import from: any other
#: import fails with ModuleNotFoundError (see ``_NoImports``).
_PRELOADED = (
    "base64", "bisect", "calendar", "collections", "collections.abc", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "enum", "fractions", "functools", "hashlib", "heapq", "html",
    "io", "itertools", "math", "operator", "pprint", "statistics", "string", "textwrap", "typing",
    "unicodedata", "urllib.parse", "uuid",
)  # fmt: skip
for _module in _PRELOADED:
    try:
        importlib.import_module(_module)
    except ImportError:  # pragma: no cover - a CPython build without it
        pass


async def _sleep(delay: float, result: object = None) -> object:
    if delay > 0:
        raise RuntimeError("a program cannot sleep: nothing would wake it (asyncio.sleep(0) is all there is)")
    return result


#: ``asyncio`` for a program: CPython's needs sockets and threads, which a run has not. Its stand-in
#: has ``gather`` (the calls are made in order) and ``sleep(0)``; everything a program awaits answers at once.
_asyncio = types.ModuleType("asyncio", "A program's asyncio: gather and sleep(0); every tool call answers at once.")
_asyncio.gather = _gather
_asyncio.sleep = _sleep
sys.modules["asyncio"] = _asyncio


class _NoImports:
    """First on ``sys.meta_path`` during a run: a module that was not imported at build time is not there."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        raise ModuleNotFoundError(
            f"No module named {name!r} in a program's sandbox: it has the standard modules"
            " that need no file, socket or thread (json, re, math, datetime, collections, ...)",
            name=name,
        )


def _drive(coroutine: object) -> object:
    """Run the program's coroutine to its end: it suspends on nothing (every host call answers at once)."""
    try:
        coroutine.send(None)
        while True:  # it awaited something that suspends: nothing here would ever wake it
            coroutine.throw(
                RuntimeError("a program can await tool calls, tools.search and asyncio.gather of them, nothing else")
            )
    except StopIteration as stop:
        return stop.value


def _run(request_text: str) -> str:
    request = _decode(request_text)
    _replay.on = request.get("replay") is True
    namespace = {"__name__": "__program__", "__builtins__": builtins}
    try:
        exec(compile(request["script"], "<program>", "exec"), namespace)
        main = namespace.get("main")
        if not callable(main):
            raise TypeError("the program defines no function main: write `async def main(input, tools): ...`")
        output = main(request["input"], Tools(request["tools"]))
        if inspect.iscoroutine(output):
            output = _drive(output)
    except ToolCallError as escaped:  # the program let a nested call's error escape: the run fails with its code
        return _encode(escaped.envelope)
    finally:
        if not _State.stopped:
            _replay.end()  # the steps the program replayed before it ended count
    try:
        return _encode({"output": output})
    except (TypeError, ValueError) as exc:  # not JSON: the host answers invalid_output
        return f"not JSON: {type(exc).__name__}: {exc}"


def _report_oom() -> None:
    try:
        _host_iface.log(_host_iface.Level.ERROR, OOM_MARKER)
    except BaseException:  # even the log line may not fit; the trap still follows
        pass


class WitWorld(wit_world.WitWorld):
    def call(self, input: str) -> str:
        if sys.meta_path[0] is not _NoImports:
            sys.meta_path.insert(0, _NoImports)
        try:
            return _run(input)
        except RunStopped:
            return '{"output":null}'  # the host knows why it stopped the run
        except MemoryError:
            _report_oom()
            raise _OutOfMemory() from None
        except RecursionError as exc:
            raise Err(f"RecursionError: {exc}") from None
        except BaseException as exc:  # the program's own failure, named by type (SystemExit too)
            if _State.stopped:
                return '{"output":null}'
            raise Err(_describe(exc)) from None


def _describe(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<program>"]
    where = f" (line {frames[-1].lineno})" if frames else ""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text + where


# Everything above is kept in the build's memory image, shared copy-on-write by every run: moved out
# of the collector's sight, a run's garbage collections never write to (and so never copy) its pages.
gc.collect()
gc.freeze()
