"""A Python tool next to the C one: latency per call and memory per live instance, as ratios.

Run ``python bench/bench_python_guest.py [--quick]``. Both guests compute text
statistics of the same input (``guest/examples/text-stats/tool.c`` and
``bench/py_text_stats.py``), each call a fresh instance through
``Runtime.call``. Memory: RSS growth of this process per live instance that has
answered one call, held with raw stores on the glovebox engine and the same
linkers the sandbox uses. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from bench_call import INPUT, INPUT_JSON, percentile, settled_rss  # noqa: E402
from logic import text_stats  # noqa: E402

SOURCES = {"c": ROOT / "guest" / "examples" / "text-stats" / "tool.c", "python": BENCH / "py_text_stats.py"}
LIMITS = {"memory_bytes": 64 * 1024 * 1024, "fuel": 5_000_000_000, "timeout_ms": 10_000}


def latency(call: Callable[[], object], calls: int, warmup: int) -> tuple[float, float]:
    """p50 and p99 in µs of ``calls`` timed calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - t0) / 1000)
    return percentile(samples, 50), percentile(samples, 99)


def live_rss(rt: Any, name: str, count: int) -> float:
    """RSS growth per live instance (each has answered one call)."""
    info = rt._registry.resolve(name)
    component = rt._component(info)
    sandbox = rt._sandbox
    limits = info.manifest.limits

    def one() -> tuple[Any, Any]:
        store = sandbox._store(component, limits)
        instance = sandbox._linker_for(component).instantiate(store, component)
        func = instance.get_func(store, "call")
        func(store, INPUT_JSON)
        func.post_return(store)
        return store, instance

    one()
    before = settled_rss()
    held = [one() for _ in range(count)]
    after = settled_rss()
    del held
    gc.collect()
    return (after - before) / count


def measure(rt: Any, lang: str, workdir: Path, quick: bool) -> dict[str, Any]:
    from glovebox import build

    started = time.perf_counter()
    wasm = build(SOURCES[lang], workdir / f"{lang}.wasm")
    built = time.perf_counter() - started
    name = f"text-stats-{lang}"
    started = time.perf_counter()
    rt.register(wasm, manifest={"name": name, "limits": LIMITS})
    registered = time.perf_counter() - started
    first = rt.call(name, INPUT)
    if not first.ok or first.output != text_stats(INPUT["text"]):
        raise SystemExit(f"{lang}: unexpected answer {first.to_dict()}")
    calls = (100 if quick else 500) if lang == "python" else (300 if quick else 2000)
    p50, p99 = latency(lambda: rt.call(name, INPUT), calls, calls // 10)
    return {
        "artifact_bytes": wasm.stat().st_size,
        "build_s": round(built, 2),
        "register_s": round(registered, 2),
        "fuel_per_call": first.meta["fuel_used"],
        "p50_us": p50,
        "p99_us": p99,
        "rss_per_live_bytes": live_rss(rt, name, 50 if lang == "python" else 1000),
        "digest": "sha256:" + hashlib.sha256(wasm.read_bytes()).hexdigest(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args(argv)
    from glovebox import Runtime

    with tempfile.TemporaryDirectory(prefix="glovebox-bench-") as tmp, Runtime(home=Path(tmp) / "home") as rt:
        figures = {lang: measure(rt, lang, Path(tmp), args.quick) for lang in ("c", "python")}
    c, py = figures["c"], figures["python"]
    print(f"{'':24}{'C guest':>14}{'Python guest':>16}{'Python / C':>12}")
    rows = [
        ("artifact", "artifact_bytes", 1e6, "MB"),
        ("fuel per call", "fuel_per_call", 1e3, "k"),
        ("latency p50", "p50_us", 1.0, "µs"),
        ("latency p99", "p99_us", 1.0, "µs"),
        ("RSS per live instance", "rss_per_live_bytes", 1024, "KB"),
    ]
    for label, key, scale, unit in rows:
        ratio = py[key] / c[key]
        print(f"{label:24}{c[key] / scale:>11.1f} {unit:<2}{py[key] / scale:>13.1f} {unit:<2}{ratio:>11.1f}×")
    print(f"Python build {py['build_s']} s (a cached rebuild copies a file); first registration {py['register_s']} s")
    print(
        "What dominates: a Python call instantiates CPython's 38 core instances (filling ~5,800 function "
        "table entries) before running interpreted code. RSS counts the 12 MiB heap image, which live "
        "instances share copy-on-write from the compiled file, once per instance: bench/bench_pydense.py "
        "measures what an instance owns (PSS and private memory)."
    )
    out = BENCH / "results" / "python_guest.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
