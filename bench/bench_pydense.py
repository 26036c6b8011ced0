"""How dense a Python tool is: time per call and memory per live instance, next to the C tool.

Run ``python bench/bench_pydense.py [--quick]``. Both guests compute text
statistics (``guest/examples/text-stats/tool.c``, ``bench/py_text_stats.py``).
For each: p50 of a whole ``Runtime.call``, of a bare instantiation, and of a
bare instantiation plus call (the sandbox's own engine, linkers and stores);
minor page faults per bare call; and what one live instance that has answered
a call holds, from ``/proc/self/smaps_rollup`` before and after holding N:

- **RSS**: every page mapped into this process, shared ones counted once per mapping;
- **PSS**: shared pages split between their mappers;
- **private**: pages only this instance owns (anonymous, or copy-on-write pages it wrote).

Two engines: the shipped one (``memory_init_cow``: each module's initial
memory is a page-aligned image in the compiled file, mapped copy-on-write from
the page cache) and the same settings with that off (the image is copied into
every instance), which is what loading a component from bytes into a
copy-free engine costs. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_call import INPUT, INPUT_JSON, percentile  # noqa: E402
from bench_python_guest import LIMITS, SOURCES  # noqa: E402

ROLLUP = Path("/proc/self/smaps_rollup")
KEYS = {"Rss": "rss", "Pss": "pss", "Private_Dirty": "private", "Private_Clean": "private"}


def memory() -> dict[str, int]:
    """This process's RSS, PSS and private bytes, after a full garbage collection."""
    gc.collect()
    totals = dict.fromkeys(KEYS.values(), 0)
    for line in ROLLUP.read_text().splitlines():
        key, _, value = line.partition(":")
        if key in KEYS:
            totals[KEYS[key]] += int(value.split()[0]) * 1024
    return totals


def p50_us(op: Callable[[], object], count: int) -> float:
    """Median wall time of ``op`` in µs, after ``count // 10`` untimed runs."""
    for _ in range(max(1, count // 10)):
        op()
    samples = []
    for _ in range(count):
        t0 = time.perf_counter_ns()
        op()
        samples.append((time.perf_counter_ns() - t0) / 1000)
    return percentile(samples, 50)


class Bare:
    """Fresh instances made as the sandbox makes them, on a given engine and component."""

    def __init__(self, sandbox: Any, component: Any, limits: Any) -> None:
        self.sandbox, self.component, self.limits = sandbox, component, limits

    def instantiate(self) -> tuple[Any, Any]:
        store = self.sandbox._store(self.component, self.limits)
        return store, self.sandbox._linker_for(self.component).instantiate(store, self.component)

    def call(self) -> tuple[Any, Any]:
        store, instance = self.instantiate()
        func = instance.get_func(store, "call")
        func(store, INPUT_JSON)
        func.post_return(store)
        return store, instance

    def faults_per_call(self, count: int) -> float:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(count):
            self.call()
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / count

    def per_live(self, count: int) -> dict[str, float]:
        self.call()
        before = memory()
        held = [self.call() for _ in range(count)]
        after = memory()
        del held
        return {key: (after[key] - before[key]) / count for key in before}


def measure_bare(bare: Bare, lang: str, quick: bool) -> dict[str, Any]:
    calls = (60 if quick else 300) if lang == "python" else (300 if quick else 2000)
    return {
        "instantiate_p50_us": p50_us(bare.instantiate, calls),
        "instantiate_call_p50_us": p50_us(bare.call, calls),
        "minor_faults_per_call": bare.faults_per_call(calls // 2),
        "per_live_bytes": bare.per_live(30 if lang == "python" else 500),
    }


def copying_bare(rt: Any, wasm: Path, limits: Any, workdir: Path) -> Bare:
    """The same settings with ``memory_init_cow`` off: every instance copies its initial memory."""
    import wasmtime
    from wasmtime.component import Component

    from glovebox.engine._allocation import engine_config, plan_allocation
    from glovebox.engine._engine import SharedEngine
    from glovebox.sandbox._sandbox import Sandbox

    shared = SharedEngine(rt._sandbox.shared.settings)
    cfg = engine_config(shared.settings, plan_allocation(shared.settings, None))
    cfg.memory_init_cow = False
    shared.engine = wasmtime.Engine(cfg)
    compiled = workdir / f"{wasm.stem}-copying.cwasm"
    compiled.write_bytes(Component(shared.engine, wasm.read_bytes()).serialize())
    return Bare(Sandbox(shared), shared.load(compiled), limits)


def measure(rt: Any, lang: str, workdir: Path, quick: bool) -> dict[str, Any]:
    from glovebox import build

    wasm = build(SOURCES[lang], workdir / f"{lang}.wasm")
    name = f"text-stats-{lang}"
    rt.register(wasm, manifest={"name": name, "limits": LIMITS})
    if not rt.call(name, INPUT).ok:
        raise SystemExit(f"{lang}: the tool failed")
    info = rt._registry.resolve(name)
    shared = Bare(rt._sandbox, rt._component(info), info.manifest.limits)
    calls = (60 if quick else 300) if lang == "python" else (300 if quick else 2000)
    figures = {"runtime_call_p50_us": p50_us(lambda: rt.call(name, INPUT), calls)}
    figures["cow"] = measure_bare(shared, lang, quick)
    figures["copy"] = measure_bare(copying_bare(rt, wasm, info.manifest.limits, workdir), lang, quick)
    return figures


def show(figures: dict[str, dict[str, Any]]) -> None:
    columns = [(lang, variant) for lang in ("c", "python") for variant in ("copy", "cow")]
    print(f"{'':28}" + "".join(f"{lang + ' ' + variant:>14}" for lang, variant in columns))
    rows: list[tuple[str, Callable[[dict[str, Any]], float]]] = [
        ("instantiate p50 (µs)", lambda f: f["instantiate_p50_us"]),
        ("instantiate+call p50 (µs)", lambda f: f["instantiate_call_p50_us"]),
        ("minor faults per call", lambda f: f["minor_faults_per_call"]),
        ("RSS per live (KiB)", lambda f: f["per_live_bytes"]["rss"] / 1024),
        ("PSS per live (KiB)", lambda f: f["per_live_bytes"]["pss"] / 1024),
        ("private per live (KiB)", lambda f: f["per_live_bytes"]["private"] / 1024),
    ]
    for label, get in rows:
        print(f"{label:28}" + "".join(f"{get(figures[lang][variant]):>14,.0f}" for lang, variant in columns))
    print(
        f"{'Runtime.call p50 (µs)':28}"
        + "".join(f"{figures[lang]['runtime_call_p50_us']:>28,.0f}" for lang in ("c", "python"))
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args(argv)
    if not ROLLUP.exists():
        raise SystemExit("needs Linux /proc/self/smaps_rollup")
    from glovebox import Runtime

    with tempfile.TemporaryDirectory(prefix="glovebox-bench-") as tmp, Runtime(home=Path(tmp) / "home") as rt:
        figures = {lang: measure(rt, lang, Path(tmp), args.quick) for lang in ("c", "python")}
    show(figures)
    out = BENCH / "results" / "pydense.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
