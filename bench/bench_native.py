"""The native invocation core next to the pure-Python path, measured alternately in one run.

Run ``python bench/bench_native.py [--calls N] [--seconds S]``. The tool is the C
text-stats example, registered in two homes: one Runtime made with the native core
(``glovebox_native``) and one made with ``GLOVEBOX_NATIVE=0``. Every figure is taken
in rounds that alternate the contenders, so the machine's load falls on all of them
alike; answers are checked before they count.

* **latency**: p50/p99 of one ``Runtime.call`` on each path; of a bare
  ``wasmtime-py`` component call through its public API (a Store with fuel, limits
  and deadline, ``Linker.instantiate``, ``Func.__call__``, ``post_return``); and of a
  bare native instantiate+call (``NativeComponent.call``, no Runtime around it);
* **CPU per call**: µs of the calling thread's CPU time per call (``time.thread_time``)
  on each contender, the lowest of alternating 500-call chunks: on a loaded machine
  a steadier figure than wall time;
* **throughput**: calls/s of one Runtime from 1 and from 2 threads, on each path;
* **steps**: what each step of a full call costs on each path (``--steps``): the
  time spent in each handler of the pipeline itself, measured in the same run (the
  median of 250-call chunks, so that the load of a shared machine moves it less);
* **guests** (``--guests``, or ``--guests-only`` for these alone): fresh-call p50/p99 of
  the JavaScript and Python echo tools on each path, alternating, and of a bare native
  instantiate+call of each (no Runtime around it), with the path each call took.

Figures go to stdout and ``bench/results/native.json``. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime.component import Component, Linker

import glovebox

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_procs import timed_calls  # noqa: E402  (the benches' one timed caller loop)

SOURCE = BENCH.parent / "guest" / "examples" / "text-stats" / "tool.c"
RESULTS = BENCH / "results" / "native.json"
INPUT = {"text": "The quick brown fox jumps over the lazy dog.\nend"}
INPUT_TEXT = json.dumps(INPUT)
EXPECTED = {"characters": 48, "words": 10, "lines": 2, "bytes": 48}


def _pct(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def _runtime(home: Path, wasm: Path, native: bool) -> glovebox.Runtime:
    """A Runtime on ``home`` with text-stats registered, its sandbox made on the chosen path."""
    previous = os.environ.get("GLOVEBOX_NATIVE")
    os.environ["GLOVEBOX_NATIVE"] = "1" if native else "0"
    try:
        rt = glovebox.Runtime(home=home)
        rt.register(wasm)  # makes the sandbox: the path is chosen now
    finally:
        if previous is None:
            os.environ.pop("GLOVEBOX_NATIVE", None)
        else:
            os.environ["GLOVEBOX_NATIVE"] = previous
    result = rt.call("text-stats", INPUT)
    if result.output != EXPECTED:
        raise SystemExit(f"wrong answer: {result.to_dict()}")
    return rt


class RawPy:
    """wasmtime-py's public component API on glovebox's engine: the floor the Python path stands on."""

    def __init__(self, rt: glovebox.Runtime) -> None:
        from glovebox.sandbox._host import make_linker

        parts = rt._wasm()
        self.engine = parts.shared.engine
        self.component: Component = parts.compiled.get(rt.tool("text-stats").digest)
        self.linker: Linker = make_linker(self.engine)
        self.ticks = parts.shared.deadline_ticks(1000)

    def __call__(self) -> None:
        store = wasmtime.Store(self.engine)
        store.set_limits(memory_size=16 * 1024 * 1024)
        store.set_fuel(100_000_000)
        store.set_epoch_deadline(self.ticks)
        instance = self.linker.instantiate(store, self.component)
        func = instance.get_func(store, "call")
        assert func is not None
        out = func(store, INPUT_TEXT)
        func.post_return(store)
        assert out.tag == "ok", out


class RawNative:
    """The native core's ``NativeComponent.call`` alone: a Store, instantiate, call, drop."""

    def __init__(self, rt: glovebox.Runtime) -> None:
        parts = rt._wasm()
        core = parts.sandbox.native_core
        assert core is not None
        self.component = parts.compiled.native(rt.tool("text-stats").digest, core)
        assert self.component is not None
        self.ticks = parts.shared.deadline_ticks(1000)

    def __call__(self) -> None:
        status = self.component.call(INPUT_TEXT, 16 * 1024 * 1024, 100_000_000, self.ticks, 1000.0, 65536)[0]
        assert status == 0


def latency(contenders: dict[str, Callable[[], Any]], calls: int, chunk: int = 50) -> dict[str, dict[str, float]]:
    """p50/p99 in µs of each contender, in alternating chunks of ``chunk`` calls."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    clock = time.perf_counter_ns
    for _ in range(max(1, calls // chunk)):
        for name, fn in contenders.items():
            kept = samples[name]
            for _ in range(chunk):
                start = clock()
                fn()
                kept.append((clock() - start) / 1000)
    return {name: {"p50_us": _pct(s, 50), "p99_us": _pct(s, 99)} for name, s in samples.items()}


def cpu_per_call(contenders: dict[str, Callable[[], Any]], calls: int, chunk: int = 500) -> dict[str, float]:
    """CPU µs of the calling thread per call (``time.thread_time``), in alternating chunks, the lowest chunk
    kept: steadier than wall time on a loaded machine, since time the thread waits for a core does not count."""
    best: dict[str, float] = {name: float("inf") for name in contenders}
    clock = time.thread_time_ns
    for _ in range(max(1, calls // chunk)):
        for name, fn in contenders.items():
            start = clock()
            for _ in range(chunk):
                fn()
            best[name] = min(best[name], (clock() - start) / chunk / 1000)
    return best


def throughput(rt: glovebox.Runtime, threads: int, seconds: float) -> float:
    """Calls/s of ``threads`` threads calling one Runtime for ``seconds``."""
    return timed_calls(lambda: rt.call("text-stats", INPUT), threads, seconds) / seconds


def steps(make: Callable[[], glovebox.Runtime], calls: int) -> dict[str, float]:
    """µs per call spent in each step of a full call, itself (not in the steps it hands over to).

    Each handler of the pipeline (``runtime/handlers``) hands the call to the next one,
    so a step's own time is its inclusive time less the next one's; the executor, the
    sandbox and the invocation are split out of ``Execute`` the same way, and the
    facade (``Runtime.call``: the Call object, the result) is what is left outside
    the first handler. Each step's function is wrapped with a ``perf_counter_ns``
    pair before the Runtime ``make`` gives is made (the pipeline binds them), and put
    back after the run (≈0.2 µs each). The calls run in chunks of :data:`STEP_CHUNK`;
    each figure is the median of its chunks.
    """
    from glovebox.runtime import _runtime, handlers
    from glovebox.runtime.executors import _wasm
    from glovebox.sandbox import _sandbox

    totals: dict[str, int] = {}
    targets: list[tuple[Any, str, str]] = [(_runtime.Runtime, "call", "facade (Runtime.call: Call in, CallResult out)")]
    for name in handlers.__all__:
        cls = getattr(handlers, name)
        method = "__call__" if name == "Execute" else "handle"
        targets.append((cls, method, _HANDLERS.get(cls.__module__.rsplit(".", 1)[-1], name)))
    targets += [
        (_wasm.WasmExecutor, "execute", "executor (bind capabilities, record meta)"),
        (_sandbox.Sandbox, "run", "sandbox (call state, judge the ending)"),
        (_sandbox.Sandbox, "_invoke_native", "invocation, native (GIL released inside)"),
        (_sandbox.Sandbox, "_invoke_raw", "invocation, wasmtime-py"),
    ]
    originals = [(cls, method, cls.__dict__[method]) for cls, method, _label in targets]
    for cls, method, label in targets:
        setattr(cls, method, _timed(cls.__dict__[method], label, totals))
    chunks: list[dict[str, float]] = []
    try:
        with make() as rt:
            for _ in range(calls // 5):  # warm
                rt.call("text-stats", INPUT)
            for _ in range(max(1, calls // STEP_CHUNK)):
                totals.update(dict.fromkeys(totals, 0))
                for _ in range(STEP_CHUNK):
                    rt.call("text-stats", INPUT)
                chunks.append(_own(totals, STEP_CHUNK))
    finally:
        for cls, method, original in originals:
            setattr(cls, method, original)
    return {label: statistics.median(chunk[label] for chunk in chunks) for label in chunks[0]}


#: Calls per chunk of ``steps``: each step's figure is its median over the chunks, so a chunk the
#: machine's load preempted (on a shared machine, many) does not move it.
STEP_CHUNK = 250


def _own(totals: dict[str, int], calls: int) -> dict[str, float]:
    """µs per call of each step itself, from the inclusive totals of one chunk (each step less the next)."""
    nested = sorted(totals.items(), key=lambda item: -item[1])
    found: dict[str, float] = {}
    for (label, inclusive), following in zip(nested, [*nested[1:], ("", 0)], strict=True):
        found[label] = (inclusive - following[1]) / calls / 1000
    found["(the whole call, timed)"] = nested[0][1] / calls / 1000 if nested else 0.0
    return found


def _timed(function: Callable[..., Any], label: str, totals: dict[str, int]) -> Callable[..., Any]:
    clock = time.perf_counter_ns
    totals.setdefault(label, 0)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return function(*args, **kwargs)
        finally:
            totals[label] += clock() - start

    return timed


#: What each handler module's step is, as bench/README.md names it.
_HANDLERS = {
    "_tracing": "tracing (span or log line)",
    "_admission": "admission (an in-flight slot)",
    "_compute": "compute slot",
    "_attempts": "attempts (retries, guards)",
    "_audit": "audit (envelope, the row appended, buffered)",
    "_resolve": "resolve (name to version)",
    "_policy": "policy decision (cached per principal, tool, policy)",
    "_breakers": "breakers",
    "_validate": "input validation (jsonschema-rs)",
    "_approvals": "approvals",
    "_checks": "output checks",
    "_scan": "secret scan (output, logs)",
    "_output": "execute (decode and validate output)",
}


#: The echo tools of bench_languages.py, measured on both paths with ``--guests``.
GUESTS = {"js": BENCH / "echo" / "js" / "tool.js", "python": BENCH / "echo" / "python" / "tool.py"}
GUEST_LIMITS = {"memory_bytes": 64 * 1024 * 1024, "fuel": 5_000_000_000, "timeout_ms": 10_000}


class BareGuest:
    """One echo tool's ``NativeComponent.call`` alone (its WASI made at its first WASI call, as in a full call)."""

    def __init__(self, rt: glovebox.Runtime, name: str, value: Any) -> None:
        parts = rt._wasm()
        core = parts.sandbox.native_core
        assert core is not None
        info = rt.tool(name)
        parts.compiled.get(info.digest)
        self.component = parts.compiled.native(info.digest, core)
        if self.component is None:
            raise SystemExit(f"{name} does not load on the native core")
        self.input = json.dumps(value)
        self.ticks = parts.shared.deadline_ticks(GUEST_LIMITS["timeout_ms"])

    def __call__(self) -> None:
        limits = GUEST_LIMITS
        timeout_ms = float(limits["timeout_ms"])
        status = self.component.call(self.input, limits["memory_bytes"], limits["fuel"], self.ticks, timeout_ms, 65536)[
            0
        ]
        assert status == 0


def guests(tmp: Path, native: glovebox.Runtime, python: glovebox.Runtime, calls: int) -> dict[str, dict[str, Any]]:
    """Fresh-call p50/p99 of the JavaScript and Python echo tools on each path, alternating, and which path ran
    them; and of a bare native instantiate+call of each."""
    figures: dict[str, dict[str, Any]] = {}
    for lang, source in GUESTS.items():
        work = tmp / f"echo-{lang}"
        work.mkdir()
        wasm = glovebox.build(source, work / f"echo-{lang}.wasm")
        name = f"echo-{lang}"
        value = {"text": "hello"}
        for rt in (native, python):
            rt.register(wasm, manifest={"name": name, "limits": GUEST_LIMITS})
            if rt.call(name, value).output != value:
                raise SystemExit(f"{lang}: the echo failed")
        core = native._wasm().sandbox.native_core
        before = -1 if core is None else core.calls
        contenders: dict[str, Callable[[], Any]] = {
            "native": functools.partial(native.call, name, value),
            "python": functools.partial(python.call, name, value),
        }
        if core is not None:
            contenders["bare native"] = BareGuest(native, name, value)
        latency(contenders, calls // 5 or 1, 10)  # warm
        lat = latency(contenders, calls, 10)
        ran_natively = core is not None and core.calls > before
        figures[lang] = {**lat, "ran_natively": ran_natively}
    return figures


def _print_guests(fresh: dict[str, dict[str, Any]]) -> None:
    print(f"load {os.getloadavg()[0]:.1f}")
    print(f"{'fresh call':22} {'native p50':>11} {'p99':>8} {'python p50':>11} {'p99':>8} {'bare p50':>9}  path")
    for lang, found in fresh.items():
        native, python = found["native"], found["python"]
        bare = found.get("bare native", {}).get("p50_us", float("nan"))
        path = "native core" if found["ran_natively"] else "Python path on both"
        print(
            f"{lang + ' echo, µs':22} {native['p50_us']:11.0f} {native['p99_us']:8.0f} {python['p50_us']:11.0f} "
            f"{python['p99_us']:8.0f} {bare:9.0f}  {path}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=4000, help="calls per latency contender (default: 4000)")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per throughput round (default: 3)")
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds, alternating (default: 2)")
    parser.add_argument("--steps", action="store_true", help="also time each step of a call")
    parser.add_argument("--guests", action="store_true", help="also the JavaScript and Python echo tools")
    parser.add_argument("--guests-only", action="store_true", help="only the JavaScript and Python echo tools")
    parser.add_argument("--guest-calls", type=int, default=400, help="calls per guest contender (default: 400)")
    args = parser.parse_args()
    from glovebox.sandbox._native import native_extension

    if native_extension() is None:
        raise SystemExit("glovebox_native is not built (`make native`): nothing to compare")
    if args.guests_only:
        with tempfile.TemporaryDirectory() as tmp:
            wasm = glovebox.build(SOURCE, Path(tmp) / "text-stats.wasm")
            with _runtime(Path(tmp) / "native", wasm, True) as native, _runtime(Path(tmp) / "py", wasm, False) as py:
                fresh = guests(Path(tmp), native, py, args.guest_calls)
        _print_guests(fresh)
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.with_name("native_guests.json").write_text(json.dumps({"guests_us": fresh}, indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        wasm = glovebox.build(SOURCE, Path(tmp) / "text-stats.wasm")
        native = _runtime(Path(tmp) / "native", wasm, native=True)
        python = _runtime(Path(tmp) / "python", wasm, native=False)
        contenders = {
            "Runtime.call, native": lambda: native.call("text-stats", INPUT),
            "Runtime.call, python": lambda: python.call("text-stats", INPUT),
            "raw wasmtime-py component API": RawPy(python),
            "bare native instantiate+call": RawNative(native),
        }
        latency(contenders, 500)  # warm
        lat = latency(contenders, args.calls)
        cpu = cpu_per_call(contenders, args.calls)
        rates: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for label, rt in (("native", native), ("python", python)):
                for threads in (1, 2):
                    rates.setdefault(f"{label} {threads}T", []).append(throughput(rt, threads, args.seconds))
        rate = {name: max(values) for name, values in rates.items()}
        fresh = guests(Path(tmp), native, python, args.guest_calls) if args.guests else {}
        native.close()
        python.close()
        profiled: dict[str, dict[str, float]] = {}
        if args.steps:
            for label, flag in (("native", True), ("python", False)):
                home = Path(tmp) / label
                profiled[label] = steps(lambda home=home, flag=flag: _runtime(home, wasm, flag), 3000)
    _print(lat, rate, profiled)
    print("CPU µs per call, this thread (lowest 500-call chunk): " + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()))
    if fresh:
        _print_guests(fresh)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "host": {"python": sys.version.split()[0], "machine": platform.machine(), "cpus": os.cpu_count()},
                "plan": vars(args),
                "latency": lat,
                "cpu_us_per_call": cpu,
                "throughput": rate,
                "steps_us": profiled,
                "guests_p50_us": fresh,
            },
            indent=2,
        )
    )


def _print(lat: dict[str, dict[str, float]], rate: dict[str, float], profiled: dict[str, dict[str, float]]) -> None:
    print(f"load {os.getloadavg()[0]:.1f}")
    print(f"{'latency':34} {'p50 µs':>9} {'p99 µs':>9}")
    for name, figures in lat.items():
        print(f"{name:34} {figures['p50_us']:9.1f} {figures['p99_us']:9.1f}")
    bare = lat["bare native instantiate+call"]["p50_us"]
    print(f"full native call ÷ bare native call, p50: {lat['Runtime.call, native']['p50_us'] / bare:.2f}×")
    print(f"{'throughput':34} {'1T /s':>9} {'2T /s':>9} {'2T/1T':>7}")
    for label in ("native", "python"):
        one, two = rate[f"{label} 1T"], rate[f"{label} 2T"]
        print(f"{label:34} {one:9.0f} {two:9.0f} {two / one:6.2f}×")
    for label, found in profiled.items():
        print(f"steps, {label} (µs per call, each step itself):")
        for step, us in found.items():
            print(f"  {step:48} {us:8.1f}")


if __name__ == "__main__":
    main()
