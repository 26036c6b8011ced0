"""Code mode: a program making 3 nested calls against the 3 direct calls, and the cost of a replayed step.

Run ``python bench/bench_runs.py [--quick]``. The tool is the TypeScript
text-stats example (``guest/examples/ts-text-stats``), small and built in a
fraction of a second once the JavaScript toolchain is cached. Figures, each
p50/p99 over the same number of rounds in one process:

- ``3 direct calls``: three ``Runtime.call`` in a row;
- ``1 JavaScript call``: one ``Runtime.call`` of the same tool (the code
  runner is a JavaScript instance too);
- ``run of 3 calls``: ``Runtime.run`` of a program making the same three calls,
  each a full call, journaled in SQLite before the program sees it;
- ``replay per step``: a finished run of N recorded calls marked ``running``
  again and resumed: nothing runs but the program, every step answered from
  the journal; (resume - an empty run) / N.

The target (DESIGN.md): a 3-call run <= 2x the three direct calls plus one
JavaScript call; replay <= 50 us per recorded step. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from bench_call import INPUT  # noqa: E402

TOOL = ROOT / "guest" / "examples" / "ts-text-stats" / "tool.ts"
PROGRAM = """
export default async function (input: { text: string }, tools: any) {
  const a = await tools.call("ts-text-stats", { text: input.text });
  const b = await tools.call("ts-text-stats", { text: input.text + " " + a.words });
  const c = await tools.call("ts-text-stats", { text: input.text + " " + b.words });
  return c.words;
}
"""
MANY = """
export default async function (input: { n: number }, tools: any) {
  let total = 0;
  for (let i = 0; i < input.n; i++) total += (await tools.call("ts-text-stats", { text: "a b" })).words;
  return total;
}
"""
EMPTY = "export default async function (input: { n: number }, tools: any) { return input.n; }"


def percentiles(fn: Callable[[], object], rounds: int, warmup: int) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return statistics.median(samples) * 1e6, samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 60 if args.quick else 400
    steps = 200 if args.quick else 1000
    import glovebox

    with tempfile.TemporaryDirectory(prefix="bench-runs-") as tmp, glovebox.Runtime(home=Path(tmp) / "home") as rt:
        rt.register(glovebox.build(TOOL, Path(tmp) / "ts.wasm"))
        text = INPUT["text"][:200]

        def one() -> None:
            answer = rt.call("ts-text-stats", {"text": text})
            assert answer.ok, answer.to_dict()

        def direct() -> None:
            for _ in range(3):
                one()

        def run() -> None:
            answer = rt.run(PROGRAM, input={"text": text})
            assert answer.ok, answer.to_dict()

        d50, d99 = percentiles(direct, rounds, 10)
        j50, j99 = percentiles(one, rounds, 10)
        r50, r99 = percentiles(run, rounds, 5)
        recorded = rt.run(MANY, input={"n": steps})
        assert recorded.ok, recorded.to_dict()

        def resume() -> None:
            rt.runs.store.set_status(recorded.run_id, "running")
            assert rt.runs.resume(recorded.run_id).ok

        e50, _ = percentiles(lambda: rt.run(EMPTY, input={"n": steps}), max(10, rounds // 4), 3)
        s50, _ = percentiles(resume, max(10, rounds // 4), 2)
    per_step = (s50 - e50) / steps
    print(f"{'':24}{'p50 us':>10}{'p99 us':>10}")
    for name, p50, p99 in (
        ("3 direct calls", d50, d99),
        ("1 JavaScript call", j50, j99),
        ("run of 3 calls", r50, r99),
    ):
        print(f"{name:24}{p50:10.0f}{p99:10.0f}")
    budget50, budget99 = 2 * (d50 + j50), 2 * (d99 + j99)
    print(f"run / (3 direct + 1 JS): p50 {r50 / (d50 + j50):.2f}x, p99 {r99 / (d99 + j99):.2f}x (target <= 2x)")
    print(f"  within budget: p50 {r50 <= budget50}, p99 {r99 <= budget99}")
    print(f"replay: {per_step:.1f} us per recorded step over {steps} steps (target <= 50 us)")


if __name__ == "__main__":
    main()
