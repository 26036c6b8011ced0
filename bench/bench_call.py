"""Per-call cost of glovebox next to two baselines, printed side by side as ratios.

Run ``python bench/bench_call.py [--quick]`` (or ``make bench``). Three contenders do
the same work (text statistics of the same input):

* glovebox: ``Runtime.call("text-stats", ...)`` on the C example, a fresh isolated
  instance per call;
* python-subprocess: ``python -I bench/pytool.py`` started per call;
* node-worker: a fresh ``worker_threads`` Worker per call (``bench/node_driver.js``).

For each: p50/p99 latency of one call as the caller sees it, calls/s from one and
two threads, and resident memory per live sandbox. Figures go to stdout as a table
and to ``bench/results/call.json``. Nothing here is a test; nothing is hard-coded.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SOURCE = ROOT / "guest" / "examples" / "text-stats" / "tool.c"
RESULTS = BENCH / "results" / "call.json"
TOOL = "text-stats"
PAGE = os.sysconf("SC_PAGE_SIZE")

sys.path.insert(0, str(BENCH))
from logic import text_stats  # noqa: E402

TEXT = (
    "The quick brown fox jumps over the lazy dog.\n"
    "Größe, naïve café — 日本語のテキスト, emoji 🦊🐶.\n"
    "Tabs\tand  double  spaces\r\nend without newline"
)
INPUT: dict[str, str] = {"text": TEXT}
INPUT_JSON = json.dumps(INPUT)

#: The DESIGN.md numbers: (figure key, bound, "max" or "min").
TARGETS: dict[str, tuple[float, str]] = {
    "p50_us": (100.0, "max"),
    "p99_us": (300.0, "max"),
    "scaling_2t": (1.7, "min"),
    "rss_per_live_bytes": (64 * 1024, "max"),
}


@dataclass
class Plan:
    """How much work each contender gets (``--quick`` shrinks the slow parts)."""

    gb_calls: int = 2000
    gb_warmup: int = 300
    gb_live: int = 1000
    seconds: float = 3.0
    py_calls: int = 200
    py_warmup: int = 10
    py_live: int = 50
    node_calls: int = 200
    node_warmup: int = 20
    node_live: int = 100

    @classmethod
    def quick(cls) -> Plan:
        """Return a plan that runs in well under a minute; same shape, fewer samples."""
        return cls(
            gb_calls=300,
            gb_warmup=50,
            seconds=1.0,
            py_calls=30,
            py_warmup=3,
            py_live=20,
            node_calls=30,
            node_warmup=5,
            node_live=20,
        )


@dataclass
class Figures:
    """One contender's measurements; ``None`` where a figure could not be taken."""

    p50_us: float | None = None
    p99_us: float | None = None
    calls_per_s_1: float | None = None
    calls_per_s_2: float | None = None
    rss_per_live_bytes: float | None = None
    live: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def scaling_2t(self) -> float | None:
        """Calls/s with two threads divided by calls/s with one."""
        if not self.calls_per_s_1 or self.calls_per_s_2 is None:
            return None
        return self.calls_per_s_2 / self.calls_per_s_1

    def to_dict(self) -> dict[str, Any]:
        """Return the figures as JSON-ready data, including the derived scaling."""
        return {**asdict(self), "scaling_2t": self.scaling_2t}


# --------------------------------------------------------------------------- timing


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile of ``samples`` (need not be sorted)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), -(-len(ordered) * pct // 100)))
    return ordered[int(rank) - 1]


def latency(call: Callable[[], object], calls: int, warmup: int) -> tuple[float, float]:
    """Run ``call`` ``warmup`` times untimed, then ``calls`` times; return p50, p99 in µs."""
    for _ in range(warmup):
        call()
    samples: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        call()
        samples.append((clock() - t0) / 1000)
    return percentile(samples, 50), percentile(samples, 99)


def throughput(call: Callable[[], object], threads: int, seconds: float) -> float:
    """Return calls/s with ``threads`` threads each calling in a loop for ``seconds``."""
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def loop() -> int:
        start.wait()
        done = 0
        while time.perf_counter() < deadline[0]:
            call()
            done += 1
        return done

    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(loop) for _ in range(threads)]
        t0 = time.perf_counter()
        deadline[0] = t0 + seconds
        start.wait()
        total = sum(f.result() for f in futures)
        elapsed = time.perf_counter() - t0
    return total / elapsed


def measure_calls(fig: Figures, call: Callable[[], object], calls: int, warmup: int, seconds: float) -> None:
    """Fill the latency and calls/s figures of ``fig`` for ``call``."""
    fig.p50_us, fig.p99_us = latency(call, calls, warmup)
    fig.calls_per_s_1 = throughput(call, 1, seconds)
    fig.calls_per_s_2 = throughput(call, 2, seconds)


# --------------------------------------------------------------------------- memory


def resident_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process, from ``/proc/<pid>/statm``."""
    with open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


def proportional_bytes(pid: int) -> int | None:
    """Proportional set size (shared pages split between sharers), if the kernel says."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def settled_rss() -> int:
    """Own RSS after a full garbage collection."""
    gc.collect()
    return resident_bytes()


# --------------------------------------------------------------------------- glovebox


def glovebox_available() -> bool:
    """Whether the runtime package can be imported."""
    try:
        import glovebox  # noqa: F401
    except ImportError:
        return False
    return True


def build_tool(workdir: Path) -> Path:
    """Build the C example with the library; return the component path."""
    from glovebox import build

    return Path(build(str(SOURCE), str(workdir / "text-stats.wasm")))


def check_output(name: str, output: object) -> None:
    """Refuse to report figures for a contender whose answer differs from the reference."""
    expected = text_stats(TEXT)
    if output != expected:
        raise SystemExit(f"{name} returned {output!r}, expected {expected!r}")


def bench_glovebox(plan: Plan, workdir: Path) -> Figures:
    """Fresh-instance calls through ``Runtime.call`` plus live-instance memory."""
    from glovebox import Runtime

    wasm = build_tool(workdir)
    fig = Figures(extra={"artifact_bytes": wasm.stat().st_size})
    with Runtime(home=str(workdir / "home")) as rt:
        rt.register(str(wasm))
        first = rt.call(TOOL, INPUT)
        if not first.ok:
            raise SystemExit(f"glovebox call failed: {first.error!r}")
        check_output("glovebox", first.output)
        fig.extra["fuel_used"] = meta_field(first, "fuel_used")

        def call() -> None:
            result = rt.call(TOOL, INPUT)
            if not result.ok:
                raise RuntimeError(f"glovebox call failed: {result.error!r}")

        measure_calls(fig, call, plan.gb_calls, plan.gb_warmup, plan.seconds)
        fig.extra["meta_duration_ms_p50"] = _meta_duration_p50(rt, 200)
        fig.extra.update(_sandbox_only(rt, plan))
        fig.extra.update(_cpu_bound_scaling(rt, workdir, plan))
        fig.live = plan.gb_live
        fig.rss_per_live_bytes, fig.extra["live_method"] = live_instance_rss(rt, plan.gb_live)
    return fig


def _sandbox_only(rt: Any, plan: Plan) -> dict[str, float]:
    """Latency of the fresh instance alone (Store + instantiate + call + drop), without
    the Runtime's registry lookup, schema validation and envelope: the DESIGN.md
    "fresh isolated instance per call" figure."""
    info = rt.tool(TOOL)
    component = rt._component(info)
    text = json.dumps(INPUT)

    def run() -> None:
        outcome = rt._sandbox.run(component, text, info.manifest.limits)
        if outcome.error is not None:
            raise RuntimeError(outcome.error.message)

    def full() -> None:
        if not rt.call(TOOL, INPUT).ok:
            raise RuntimeError("glovebox call failed")

    p50, p99 = latency(run, plan.gb_calls, plan.gb_warmup)
    paired = _paired(full, run, plan.gb_calls, plan.gb_warmup)
    return {
        "sandbox_p50_us": p50,
        "sandbox_p99_us": p99,
        "sandbox_calls_per_s_1": throughput(run, 1, plan.seconds),
        "sandbox_calls_per_s_2": throughput(run, 2, plan.seconds),
        **paired,
    }


def _paired(full: Callable[[], object], bare: Callable[[], object], calls: int, warmup: int) -> dict[str, float]:
    """Full call and bare instance timed alternately, so that both see the same machine load."""
    for _ in range(warmup):
        full()
        bare()
    samples: dict[str, list[float]] = {"full": [], "bare": []}
    clock = time.perf_counter_ns
    for _ in range(calls):
        for name, call in (("full", full), ("bare", bare)):
            t0 = clock()
            call()
            samples[name].append((clock() - t0) / 1000)
    figures = {f"paired_{name}_p{pct}_us": percentile(s, pct) for name, s in samples.items() for pct in (50, 99)}
    figures["full_over_bare_p50"] = figures["paired_full_p50_us"] / figures["paired_bare_p50_us"]
    return figures


def _cpu_bound_scaling(rt: Any, workdir: Path, plan: Plan) -> dict[str, float]:
    """2-thread / 1-thread throughput on a CPU-bound tool (primes up to 30,000), where
    time is spent inside wasm (the GIL is released) rather than in Python."""
    from glovebox import build

    rt.register(build(str(ROOT / "guest" / "examples" / "primes" / "tool.c"), str(workdir / "primes.wasm")))

    def call() -> None:
        result = rt.call("primes", {"n": 30_000})
        if not result.ok:
            raise RuntimeError(f"primes failed: {result.error!r}")

    one, two = throughput(call, 1, plan.seconds), throughput(call, 2, plan.seconds)
    return {"cpu_bound_calls_per_s_1": one, "cpu_bound_calls_per_s_2": two, "cpu_bound_scaling_2t": two / one}


def meta_field(result: Any, key: str) -> Any:
    """``result.meta[key]``, whether meta is a mapping or an object with attributes."""
    meta = result.meta
    return meta[key] if isinstance(meta, dict) else getattr(meta, key)


def _meta_duration_p50(rt: Any, calls: int) -> float:
    """p50 of the runtime's own ``meta.duration_ms`` (its view of a call)."""
    durations = [float(meta_field(rt.call(TOOL, INPUT), "duration_ms")) for _ in range(calls)]
    return percentile(durations, 50)


LIVE_METHOD = "Stores + instances made as the runtime's sandbox makes them, each after one call, held"


def live_instance_rss(rt: Any, count: int) -> tuple[float, str]:
    """RSS growth per live instance, each having answered one call; also says how they were held.

    Each instance is made the way ``Sandbox.run`` makes one (the runtime's engine and
    pooling allocator, its host linker, a Store with the manifest's memory cap, fuel
    and deadline, the compiled component from its cache) but kept alive instead of
    dropped after the call.
    """
    info = rt.tool(TOOL)
    component = rt._component(info)
    sandbox = rt._sandbox
    linker = sandbox._linker_for(component)
    limits = info.manifest.limits

    def hold() -> tuple[Any, Any]:
        from glovebox.sandbox._callstate import ActiveCall, CallState

        store = sandbox._store(component, limits)
        state = CallState(deadline=time.monotonic() + limits.timeout_ms / 1000, log_limit_bytes=limits.log_bytes)
        with ActiveCall(state):
            instance = linker.instantiate(store, component)
            func = instance.get_func(store, "call")
            func(store, INPUT_JSON)
            func.post_return(store)
        return store, instance

    hold()  # page in code, warm caches
    before = settled_rss()
    held = [hold() for _ in range(count)]
    after = settled_rss()
    del held
    return (after - before) / count, LIVE_METHOD


# --------------------------------------------------------------------------- python


def python_call() -> bytes:
    """One call of the Python baseline: a fresh isolated interpreter per call."""
    proc = subprocess.run(
        [sys.executable, "-I", str(BENCH / "pytool.py")], input=INPUT_JSON.encode(), capture_output=True, check=True
    )
    return proc.stdout


_IDLE_TOOL = (
    "import sys; sys.path.insert(0, {bench!r}); import json, logic; print('ready', flush=True); sys.stdin.read()"
)


@contextmanager
def idle_pythons(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` interpreters with the tool loaded, alive and blocked on stdin."""
    code = _IDLE_TOOL.format(bench=str(BENCH))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(
                subprocess.Popen([sys.executable, "-I", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            )
        for proc in procs:
            assert proc.stdout is not None
            proc.stdout.readline()
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def bench_python(plan: Plan) -> Figures:
    """Subprocess-per-call figures plus resident memory per live process."""
    check_output("python-subprocess", json.loads(python_call()))
    fig = Figures(live=plan.py_live)
    measure_calls(fig, python_call, plan.py_calls, plan.py_warmup, plan.seconds)
    with idle_pythons(plan.py_live) as procs:
        fig.rss_per_live_bytes = sum(resident_bytes(p.pid) for p in procs) / len(procs)
        pss = [proportional_bytes(p.pid) for p in procs]
    if all(v is not None for v in pss):
        fig.extra["pss_per_live_bytes"] = sum(v for v in pss if v is not None) / len(pss)
    return fig


# --------------------------------------------------------------------------- node


def bench_node(plan: Plan) -> Figures:
    """Worker-per-call figures from ``node_driver.js`` (one JSON object on stdout)."""
    node = shutil.which("node")
    if node is None:
        return Figures(extra={"skipped": "node not on PATH"})
    args = [
        node,
        "--expose-gc",
        str(BENCH / "node_driver.js"),
        "--calls",
        str(plan.node_calls),
        "--warmup",
        str(plan.node_warmup),
        "--seconds",
        str(plan.seconds),
        "--live",
        str(plan.node_live),
    ]
    proc = subprocess.run(args, input=INPUT_JSON.encode(), capture_output=True, check=True)
    data = json.loads(proc.stdout)
    check_output("node-worker", data["output"])
    return Figures(
        p50_us=data["p50_us"],
        p99_us=data["p99_us"],
        calls_per_s_1=data["calls_per_s_1"],
        calls_per_s_2=data["calls_per_s_2"],
        rss_per_live_bytes=data["rss_per_live_bytes"],
        live=data["live"],
        extra={"node_version": data["node_version"]},
    )


# --------------------------------------------------------------------------- report

#: Rows: (label, figure key, unit, True when higher is better).
ROWS: list[tuple[str, str, str, bool]] = [
    ("latency p50", "p50_us", "µs", False),
    ("latency p99", "p99_us", "µs", False),
    ("calls/s, 1 thread", "calls_per_s_1", "/s", True),
    ("calls/s, 2 threads", "calls_per_s_2", "/s", True),
    ("2T / 1T scaling", "scaling_2t", "×", True),
    ("RSS per live sandbox", "rss_per_live_bytes", "KB", False),
]


def _value(fig: Figures, key: str) -> float | None:
    value = fig.to_dict().get(key)
    return None if value is None else float(value)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "KB":
        if value >= 1024 * 1024:
            return f"{value / (1024 * 1024):,.1f} MB"
        return f"{value / 1024:,.1f} KB"
    if unit == "×":
        return f"{value:.2f}×"
    return f"{value:,.1f} {unit}"


def advantage(gb: float | None, base: float | None, higher_better: bool) -> float | None:
    """How many times better glovebox is than a baseline (>1 means glovebox wins).

    For costs (latency, memory) this is baseline / glovebox; for rates (calls/s,
    scaling) it is glovebox / baseline.
    """
    if gb is None or base is None or gb <= 0 or base <= 0:
        return None
    return gb / base if higher_better else base / gb


def verdict(key: str, value: float | None) -> tuple[str, str]:
    """Return the DESIGN target for ``key`` as text, and PASS/MISS (or blanks)."""
    if key not in TARGETS:
        return "", ""
    bound, kind = TARGETS[key]
    unit = next(u for _, k, u, _ in ROWS if k == key)
    text = ("≤ " if kind == "max" else "≥ ") + _fmt(bound, unit)
    if value is None:
        return text, "n/a"
    ok = value <= bound if kind == "max" else value >= bound
    return text, "PASS" if ok else "MISS"


def table(results: dict[str, Figures]) -> str:
    """Render the side-by-side table as text."""
    gb, py, nd = (results.get(k, Figures()) for k in ("glovebox", "python", "node"))
    head = ["metric", "glovebox", "python-subprocess", "node-worker", "×py", "×node", "target", "gb"]
    rows = [head]
    for label, key, unit, higher in ROWS:
        g, p, n = _value(gb, key), _value(py, key), _value(nd, key)
        target, mark = verdict(key, g)
        rows.append(
            [
                label,
                _fmt(g, unit),
                _fmt(p, unit),
                _fmt(n, unit),
                _fmt(advantage(g, p, higher), "×"),
                _fmt(advantage(g, n, higher), "×"),
                target,
                mark,
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def detail(extra: dict[str, Any]) -> str:
    """The glovebox-only figures: the bare sandbox and CPU-bound scaling."""
    lines = ["glovebox detail:"]
    if "sandbox_p50_us" in extra:
        lines.append(
            f"  fresh instance alone (Store + instantiate + call): p50 {extra['sandbox_p50_us']:.1f} µs, "
            f"p99 {extra['sandbox_p99_us']:.1f} µs (targets ≤ 100 / ≤ 300 µs)"
        )
    if "sandbox_calls_per_s_1" in extra:
        lines.append(
            f"  fresh instance alone, calls/s: {extra['sandbox_calls_per_s_1']:,.0f} with 1 thread, "
            f"{extra['sandbox_calls_per_s_2']:,.0f} with 2"
        )
    if "full_over_bare_p50" in extra:
        lines.append(
            f"  full call vs fresh instance, timed alternately: p50 {extra['paired_full_p50_us']:.1f} vs "
            f"{extra['paired_bare_p50_us']:.1f} µs, p99 {extra['paired_full_p99_us']:.1f} vs "
            f"{extra['paired_bare_p99_us']:.1f} µs: full = {extra['full_over_bare_p50']:.2f}× bare (target ≤ 2×)"
        )
    if "cpu_bound_scaling_2t" in extra:
        lines.append(
            f"  CPU-bound tool (primes ≤ 30,000): {extra['cpu_bound_calls_per_s_1']:.0f}/s with 1 thread, "
            f"{extra['cpu_bound_calls_per_s_2']:.0f}/s with 2: {extra['cpu_bound_scaling_2t']:.2f}× (target ≥ 1.7×)"
        )
    return "\n".join(lines)


def write_json(results: dict[str, Figures], plan: Plan, quick: bool) -> None:
    """Write all figures, the plan and the host to ``bench/results/call.json``."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "call",
        "quick": quick,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "system": platform.platform(),
        },
        "input_bytes": len(INPUT_JSON.encode()),
        "plan": asdict(plan),
        "targets": {k: {"bound": b, "kind": kind} for k, (b, kind) in TARGETS.items()},
        "results": {name: fig.to_dict() for name, fig in results.items()},
    }
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")


def pairs_only(pairs: int) -> int:
    """Time ``pairs`` full calls and bare instances alternately; print both percentiles and the ratios."""
    from glovebox import Runtime

    with tempfile.TemporaryDirectory(prefix="glovebox-bench-") as tmp, Runtime(home=str(Path(tmp) / "home")) as rt:
        rt.register(str(build_tool(Path(tmp))))
        info = rt.tool(TOOL)
        component, limits = rt._component(info), info.manifest.limits

        def bare() -> None:
            if rt._sandbox.run(component, INPUT_JSON, limits).error is not None:
                raise RuntimeError("the bare instance failed")

        def full() -> None:
            if not rt.call(TOOL, INPUT).ok:
                raise RuntimeError("glovebox call failed")

        f = _paired(full, bare, pairs, 300)
    print(
        f"full vs bare, {pairs} pairs: p50 {f['paired_full_p50_us']:.1f} vs {f['paired_bare_p50_us']:.1f} µs "
        f"({f['full_over_bare_p50']:.2f}×), p99 {f['paired_full_p99_us']:.1f} vs {f['paired_bare_p99_us']:.1f} µs "
        f"({f['paired_full_p99_us'] / f['paired_bare_p99_us']:.2f}×); load average {os.getloadavg()[0]:.1f}"
    )
    return 0


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, shorter runs")
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        metavar="N",
        help="only the full-call vs bare-instance loop, N pairs timed alternately (300 warm-up pairs), then exit",
    )
    parser.add_argument(
        "--skip", action="append", default=[], choices=["glovebox", "python", "node"], help="leave a contender out"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run every contender, print the table, write the JSON."""
    args = parse_args(argv)
    if args.pairs:
        return pairs_only(args.pairs)
    plan = Plan.quick() if args.quick else Plan()
    results: dict[str, Figures] = {}
    with tempfile.TemporaryDirectory(prefix="glovebox-bench-") as tmp:
        steps: list[tuple[str, Callable[[], Figures]]] = [
            ("glovebox", lambda: bench_glovebox(plan, Path(tmp))),
            ("python", lambda: bench_python(plan)),
            ("node", lambda: bench_node(plan)),
        ]
        for name, run in steps:
            if name in args.skip:
                continue
            if name == "glovebox" and not glovebox_available():
                print("glovebox: runtime package not importable, skipped", file=sys.stderr)
                continue
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            results[name] = run()
    print(table(results))
    print("×py, ×node: times glovebox is better (baseline/glovebox for costs, glovebox/baseline for rates).")
    if "glovebox" in results:
        print(detail(results["glovebox"].extra))
    write_json(results, plan, args.quick)
    print(f"figures written to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
