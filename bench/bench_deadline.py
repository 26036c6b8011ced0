"""How late a 5 ms deadline fires while Python threads keep the GIL busy: thread ticker vs native ticker.

Run ``python bench/bench_deadline.py [--quick]``. Each ticker runs in its own
process (``--mode thread`` forces the Python-thread fallback, ``--mode native``
uses the POSIX timer): a tool that never returns (``tests/guests/loop_forever.c``,
fuel at the host maximum, ``limits.timeout_ms`` 5) is called again and again from
one thread while ``--busy`` other threads run pure Python loops. Two figures of
lateness, each past the 5 ms deadline:

* **deadline** (what the ticker decides): a core module on the same engine that
  reads WASI's monotonic clock on every loop iteration (natively, no GIL) runs
  until the deadline interrupts it; its last reading minus its first is how long
  it actually ran. Its deadline is set through a GIL-holding binding right
  before the one foreign call that runs it, so no wait for the GIL is counted.
* **call** (what a caller sees): the wall time of ``Runtime.call``, which also
  holds every wait for the GIL around the guest; every call must end in ``timeout``.

Also measured: the CPU the ticker alone costs in an idle process (2 s, no calls).
Figures go to stdout as a table and to ``bench/results/deadline.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SOURCE = ROOT / "tests" / "guests" / "loop_forever.c"
RESULTS = BENCH / "results" / "deadline.json"
DEADLINE_MS = 5
MODES = ("thread", "native")


def percentile(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def busy(stop: threading.Event) -> None:
    """Pure Python work that holds the GIL as much as the interpreter lets it."""
    while not stop.is_set():
        sum(i * i for i in range(2_000))


def idle_ticker_cpu(rt: Any, seconds: float) -> float:
    """Share of one core the process uses while only the ticker runs."""
    assert rt._wasm_parts is not None and rt._wasm_parts.shared.ticker is not None
    before = os.times()
    time.sleep(seconds)
    after = os.times()
    used = (after.user - before.user) + (after.system - before.system)
    return used / seconds


CLOCK_WAT = """
(module
  (import "wasi_snapshot_preview1" "clock_time_get" (func $now (param i32 i64 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "run")
    (drop (call $now (i32.const 1) (i64.const 0) (i32.const 0)))
    (loop $spin
      (drop (call $now (i32.const 1) (i64.const 0) (i32.const 8)))
      (br $spin))))
"""


def guest_clock_runs(shared: Any, runs: int) -> list[float]:
    """Milliseconds a clock-reading loop ran before its 5 ms deadline stopped it, per run."""
    import ctypes

    import wasmtime
    import wasmtime._ffi as ffi

    from glovebox.sandbox._fastcall import _set_deadline  # binds wasmtime through a PyDLL: keeps the GIL

    module = wasmtime.Module(shared.engine, CLOCK_WAT)
    linker = wasmtime.Linker(shared.engine)
    linker.define_wasi()
    ticks = shared.deadline_ticks(DEADLINE_MS)
    ran: list[float] = []
    for _ in range(runs):
        store = wasmtime.Store(shared.engine)
        store.set_wasi(wasmtime.WasiConfig())
        store.set_fuel(2**62)
        store.set_epoch_deadline(1_000_000)
        instance = linker.instantiate(store, module)
        func, memory = instance.exports(store)["run"], instance.exports(store)["memory"]
        trap = ctypes.POINTER(ffi.wasm_trap_t)()
        context = store._context()
        _set_deadline(context, ticks)
        error = ffi.wasmtime_func_call(context, ctypes.byref(func._func), None, 0, None, 0, ctypes.byref(trap))
        if error:
            ffi.wasmtime_error_delete(error)
        if trap:
            ffi.wasm_trap_delete(trap)
        first, last = (int.from_bytes(memory.read(store, at, at + 8), "little") for at in (0, 8))
        ran.append((last - first) / 1e6)
    return ran


def late_figures(prefix: str, late: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_p50_ms": percentile(late, 50),
        f"{prefix}_p99_ms": percentile(late, 99),
        f"{prefix}_max_ms": max(late),
    }


def run_mode(mode: str, calls: int, busy_threads: int) -> dict[str, Any]:
    """One process's measurement; ``mode`` 'thread' forces the fallback ticker."""
    import glovebox
    from glovebox.engine import _ticker
    from glovebox.model._manifest import HOST_MAXIMA

    if mode == "thread":
        _ticker.native_timers = lambda: None  # type: ignore[assignment]
    work = Path(tempfile.mkdtemp(prefix="gb-deadline-"))
    wasm = glovebox.build(SOURCE, work / "loop.wasm")
    with glovebox.Runtime(home=work / "home") as rt:
        limits = {"timeout_ms": DEADLINE_MS, "fuel": HOST_MAXIMA.fuel}
        rt.register(wasm, manifest={"name": "loop", "limits": limits})
        kind = rt._wasm_parts.shared.ticker.kind  # type: ignore[union-attr]
        cpu = idle_ticker_cpu(rt, 2.0)
        stop = threading.Event()
        workers = [threading.Thread(target=busy, args=(stop,), daemon=True) for _ in range(busy_threads)]
        for worker in workers:
            worker.start()
        late: list[float] = []
        try:
            deadline = [ran - DEADLINE_MS for ran in guest_clock_runs(rt._wasm_parts.shared, calls)]  # type: ignore[union-attr]
            for _ in range(calls):
                start = time.perf_counter()
                result = rt.call("loop", None)
                late.append((time.perf_counter() - start) * 1000 - DEADLINE_MS)
                if result.code != "timeout":
                    raise SystemExit(f"expected timeout, got {result.code}")
        finally:
            stop.set()
    return {
        "mode": mode,
        "ticker": kind,
        "calls": calls,
        "busy_threads": busy_threads,
        **late_figures("deadline", deadline),
        **late_figures("call", late),
        "idle_ticker_cpu": cpu,
    }


def in_child(mode: str, calls: int, busy_threads: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--mode", mode, "--calls", str(calls), "--busy", str(busy_threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return figures


def table(rows: list[dict[str, Any]]) -> str:
    cols = [f"{w} {p}" for w in ("deadline", "call") for p in ("p50", "p99", "max")]
    head = f"{'ticker':<8}" + "".join(f"{c:>14}" for c in cols) + f"{'idle CPU':>10}"
    lines = [head, "-" * len(head)]
    keys = [f"{w}_{p}_ms" for w in ("deadline", "call") for p in ("p50", "p99", "max")]
    for r in rows:
        cells = "".join(f"{r[k]:>12.2f}ms" for k in keys)
        lines.append(f"{r['ticker']:<8}{cells}{r['idle_ticker_cpu'] * 100:>9.1f}%")
    thread, native = rows
    ratio = ["thread/native"] + [f"{thread[k] / native[k]:.1f}x" if native[k] > 0 else "-" for k in keys]
    lines.append(f"{ratio[0]:<8}" + "".join(f"{c:>14}" for c in ratio[1:]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 calls per ticker instead of 1,000")
    parser.add_argument("--calls", type=int, default=None, help="calls per ticker")
    parser.add_argument("--busy", type=int, default=3, help="threads doing Python work meanwhile")
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    calls = args.calls or (200 if args.quick else 1_000)
    if args.mode:
        print(json.dumps(run_mode(args.mode, calls, args.busy)))
        return
    rows = [in_child(mode, calls, args.busy) for mode in MODES]
    print(f"{calls} calls per ticker, {DEADLINE_MS} ms deadline, {args.busy} busy Python threads")
    print(table(rows))
    RESULTS.parent.mkdir(exist_ok=True)
    host = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()}
    RESULTS.write_text(json.dumps({"host": host, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
