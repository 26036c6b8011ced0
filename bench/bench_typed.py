"""Per-call cost of a typed export (any component's own function) next to bare wasmtime-py, as a ratio.

Run ``python bench/bench_typed.py [--calls N]``. Both contenders call ``echo-str`` of the
hand-written component ``tests/guests/typed/hostile.wat`` (a string in, the same string out)
on a fresh instance per call:

* glovebox: ``Runtime.call("hostile-echo-str", {"s": ...})`` — the whole chain (policy,
  schema validation, the JSON ↔ WIT conversion, the audit row);
* wasmtime-py: ``Linker.instantiate`` + ``Func.__call__`` + ``post_return`` on one engine.

Figures go to stdout. Nothing here is a test; nothing is hard-coded.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TYPED = ROOT / "tests" / "guests" / "typed"


def build(out: Path) -> Path:
    tool = shutil.which("wasm-tools", path=str(Path(sys.executable).parent)) or "wasm-tools"
    core, embedded = out.with_suffix(".core.wasm"), out.with_suffix(".embedded.wasm")
    subprocess.run([tool, "parse", str(TYPED / "hostile.wat"), "-o", str(core)], check=True)
    wit = str(TYPED / "hostile.wit")
    subprocess.run([tool, "component", "embed", wit, "--world", "hostile", str(core), "-o", str(embedded)], check=True)
    subprocess.run([tool, "component", "new", str(embedded), "-o", str(out)], check=True)
    return out


def timed(call: Callable[[], object], calls: int) -> tuple[float, float]:
    for _ in range(min(50, calls)):
        call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return statistics.median(samples) * 1e6, samples[int(len(samples) * 0.99)] * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    import wasmtime
    from wasmtime.component import Component, Linker

    import glovebox

    with tempfile.TemporaryDirectory() as tmp:
        wasm = build(Path(tmp) / "hostile.wasm")
        engine = wasmtime.Engine()
        component, linker = Component.from_file(engine, str(wasm)), Linker(engine)

        def bare() -> object:
            store = wasmtime.Store(engine)
            func = linker.instantiate(store, component).get_func(store, "echo-str")
            assert func is not None
            answer = func(store, "hello")
            func.post_return(store)
            return answer

        with glovebox.Runtime(home=Path(tmp) / "home") as rt:
            rt.register_all(wasm)
            assert rt.call("hostile-echo-str", {"s": "hello"}).output == "hello"
            rows = [
                ("glovebox typed call", *timed(lambda: rt.call("hostile-echo-str", {"s": "hello"}), args.calls)),
                ("wasmtime-py bare", *timed(bare, args.calls)),
            ]
    print(f"{'contender':<22} {'p50 µs':>8} {'p99 µs':>8}")
    for name, p50, p99 in rows:
        print(f"{name:<22} {p50:>8.0f} {p99:>8.0f}")
    print(f"ratio glovebox / bare (p50): {rows[0][1] / rows[1][1]:.2f}")


if __name__ == "__main__":
    main()
