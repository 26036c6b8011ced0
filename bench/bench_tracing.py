"""What a span costs a call: ``Runtime.call`` of a tiny tool under four tracing setups.

Run ``python bench/bench_tracing.py [--quick]``. The tool is ``echo``
(``tests/guests/echo.c``: its input back); each setup runs in a fresh process of
its own, because what is imported and which global tracer provider is set are
process-wide:

* none: opentelemetry cannot be imported (``sys.modules['opentelemetry'] = None``),
  as when the ``otel`` extra is absent;
* api: ``opentelemetry.trace`` imported, no provider configured (the API's default
  proxy provider), as when the extra, or a package that needs the API, is
  installed but nobody configured tracing;
* sdk-memory: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` to an
  ``InMemorySpanExporter`` (every span recorded and exported on the calling thread);
* sdk-batch: the SDK's ``TracerProvider`` with a ``BatchSpanProcessor`` to an
  exporter that drops what it is given (the usual production shape, minus the network).

Setups take turns, ``--rounds`` times, so a load change on a shared machine hits
them all alike; p50/p99 are over every round's samples. Printed side by side with
the ratio to ``none``, and what deciding whether to trace costs per call
(``decide ns``: the tracer lookup alone, best of the rounds), and what a ``ProcessPool``
call pays to carry the caller's trace context to its worker (``carry ns``: under a
caller's span in the SDK setups); every figure goes to ``bench/results/tracing.json``.
Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
ECHO = ROOT / "tests" / "guests" / "echo.c"
RESULTS = BENCH / "results" / "tracing.json"
MODES = ("none", "api", "sdk-memory", "sdk-batch")
INPUT = {"query": "a tiny input", "n": 7}


def _setup(mode: str) -> Any:
    """Make this process look like ``mode``; return what must stay alive (the provider)."""
    if mode == "none":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
        return None
    from opentelemetry import trace

    if mode == "api":
        return None
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    if mode == "sdk-memory":
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    else:
        provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    return provider


def worker(mode: str, home: str, calls: int, warmup: int) -> None:
    """One setup's samples (µs per call), as JSON on stdout."""
    keep = _setup(mode)
    import glovebox

    with glovebox.Runtime(home=home) as rt:
        for _ in range(warmup):
            assert rt.call("echo", INPUT).ok
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            result = rt.call("echo", INPUT)
            samples.append((time.perf_counter() - started) * 1e6)
            assert result.ok, result.to_dict()
        lookup_ns = timeit.timeit(rt._tracing.tracer, number=100_000) / 100_000 * 1e9
    traced = mode.startswith("sdk")
    carry_ns = _carry_ns(keep)
    assert ("opentelemetry" in sys.modules and sys.modules["opentelemetry"] is not None) == (mode != "none")
    if keep is not None:
        keep.shutdown()
    print(
        json.dumps({"mode": mode, "traced": traced, "samples": samples, "lookup_ns": lookup_ns, "carry_ns": carry_ns})
    )


def _carry_ns(provider: Any) -> float:
    """What a ProcessPool call pays to carry the caller's trace context to its worker: with a
    provider, under a caller's span (the context is injected); without one, nothing to carry."""
    from glovebox.telemetry import _tracing

    if provider is None:
        return timeit.timeit(_tracing.carrier, number=100_000) / 100_000 * 1e9
    with provider.get_tracer("bench").start_as_current_span("caller"):
        return timeit.timeit(_tracing.carrier, number=20_000) / 20_000 * 1e9


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run_worker(mode: str, home: Path, calls: int, warmup: int) -> tuple[list[float], float, float]:
    """One turn of ``mode``: its per-call samples (µs), what deciding whether to trace costs (ns)
    and what carrying the context to a ProcessPool worker costs (ns)."""
    argv = [sys.executable, __file__, "--worker", mode, "--home", str(home)]
    argv += ["--calls", str(calls), "--warmup", str(warmup)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, env=os.environ.copy())
    answer = json.loads(done.stdout)
    return answer["samples"], answer["lookup_ns"], answer["carry_ns"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (well under a minute)")
    parser.add_argument("--rounds", type=int, default=None, help="turns each setup takes (default 5, quick 2)")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=2000, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=300, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.home, args.calls, args.warmup)
        return
    rounds = args.rounds or (2 if args.quick else 5)
    calls, warmup = (500, 100) if args.quick else (2000, 300)
    import glovebox

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        wasm = glovebox.build(ECHO, Path(tmp) / "echo.wasm")
        with glovebox.Runtime(home=home) as rt:
            rt.register(wasm, manifest={"name": "echo"})
        samples: dict[str, list[float]] = {mode: [] for mode in MODES}
        lookups: dict[str, list[float]] = {mode: [] for mode in MODES}
        carries: dict[str, list[float]] = {mode: [] for mode in MODES}
        for _ in range(rounds):
            for mode in MODES:
                taken, lookup, carry = _run_worker(mode, home, calls, warmup)
                samples[mode] += taken
                lookups[mode].append(lookup)
                carries[mode].append(carry)
    figures = {
        mode: {
            "p50_us": _percentile(s, 0.5),
            "p99_us": _percentile(s, 0.99),
            "calls": len(s),
            "decide_ns": min(lookups[mode]),
            "carry_ns": min(carries[mode]),
        }
        for mode, s in samples.items()
    }
    base = figures["none"]
    print(f"Runtime.call of a tiny tool (echo), {rounds} rounds × {calls} calls per setup")
    header = f"{'setup':<12} {'p50 µs':>9} {'p99 µs':>9} {'×none p50':>10} {'×none p99':>10}"
    print(f"{header} {'decide ns':>10} {'carry ns':>9}")
    for mode, fig in figures.items():
        r50, r99 = fig["p50_us"] / base["p50_us"], fig["p99_us"] / base["p99_us"]
        row = f"{mode:<12} {fig['p50_us']:>9.1f} {fig['p99_us']:>9.1f} {r50:>9.2f}× {r99:>9.2f}×"
        print(f"{row} {fig['decide_ns']:>10.0f} {fig['carry_ns']:>9.0f}")
    RESULTS.parent.mkdir(exist_ok=True)
    host = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    plan = {"rounds": rounds, "calls": calls, "warmup": warmup}
    RESULTS.write_text(json.dumps({"host": host, "plan": plan, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
