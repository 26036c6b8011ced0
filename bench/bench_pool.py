"""ProcessPool(1), ProcessPool(2) and a direct Runtime, alternated, with the CPU each process spends.

Run ``python bench/bench_pool.py [--seconds S] [--rounds R] [--against DIR]``. Each
contender runs in a fresh process on one home (the C text-stats tool), for ``S``
seconds, in rounds that rotate the order:

* ``runtime``: ``Runtime.call`` in a loop on one thread (the reference);
* ``pool-1p``: ``ProcessPool(processes=1, threads=1)`` fed by 4 caller threads;
* ``pool-2p``: ``ProcessPool(processes=2, threads=1)`` fed by 8 caller threads.

Beside calls/s it prints the CPU µs per call of the calling process (the front), the
workers and the home's audit fold process, read from ``/proc``. ``--against DIR``
(the ``runtime`` directory of another tree, e.g. ``git archive`` of main) runs every
contender of that tree too, in the same rotation (each contender imports the tree
named by its ``PYTHONPATH``), so before and after are measured alternately in one run.
Targets (issue 46): pool-2p ÷ pool-1p ≥ 1.8×, pool-1p ÷ runtime ≥ 0.8×. Nothing here
is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_procs import EXPECTED, INPUT, SOURCE, drive  # noqa: E402  (one timed loop for the pool benches)

CONTENDERS = ("runtime", "pool-1p", "pool-2p")


def contender(name: str, home: str, seconds: float) -> dict[str, float]:
    """Run one contender in this process (the child side of ``main``)."""
    import glovebox

    processes = {"runtime": 0, "pool-1p": 1, "pool-2p": 2}[name]
    target: Any = (
        glovebox.Runtime(home=home)
        if processes == 0
        else glovebox.ProcessPool(processes=processes, home=home, threads=1)
    )
    with target:
        for _ in range(300):
            if target.call("text-stats", INPUT).output != EXPECTED:
                raise SystemExit("wrong answer")
        workers = [] if processes == 0 else target.pids
        made, spent = drive(target, max(1, 4 * processes), seconds, home, workers)
    return {
        "calls_s": made / seconds,
        "front_us": spent["front"],
        "workers_us": spent["workers"],
        "fold_us": spent["fold"],
        "load": os.getloadavg()[0],
    }


def _run(tree: str | None, name: str, home: str, seconds: float) -> dict[str, float]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = tree
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, "--home", home, "--seconds", str(seconds)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    figures: dict[str, float] = json.loads(out.splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--against", help="another tree's runtime directory, measured in the same rotation")
    parser.add_argument("--child", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(contender(args.child, args.home, args.seconds)))
        return
    import glovebox

    trees: dict[str, str | None] = {"this": None}
    if args.against:
        trees["before"] = str(Path(args.against).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        home = str(Path(tmp) / "home")
        wasm = glovebox.build(SOURCE, Path(tmp) / "text-stats.wasm")
        with glovebox.Runtime(home=home) as rt:
            rt.register(wasm)
        order = [(tree, name) for name in CONTENDERS for tree in trees]
        got: dict[tuple[str, str], list[dict[str, float]]] = {key: [] for key in order}
        for r in range(args.rounds):
            shift = r % len(order)
            for tree, name in order[shift:] + order[:shift]:
                figures = _run(trees[tree], name, home, args.seconds)
                got[tree, name].append(figures)
                print(
                    f"  round {r + 1} {tree:<6} {name:<8} {figures['calls_s']:8,.0f} calls/s  front "
                    f"{figures['front_us']:4.0f}  workers {figures['workers_us']:4.0f}  fold "
                    f"{figures['fold_us']:3.0f} µs/call  (load {figures['load']:.1f})",
                    flush=True,
                )
        with glovebox.Runtime(home=home) as rt:
            verified = rt.audit.verify()
    print(f"medians of {args.rounds} rounds, {args.seconds:g} s each, {os.cpu_count()} cores:")
    for tree in trees:
        med = {
            name: {k: statistics.median(f[k] for f in got[tree, name]) for k in got[tree, name][0]}
            for name in CONTENDERS
        }
        for name in CONTENDERS:
            m = med[name]
            print(
                f"  {tree:<6} {name:<8} {m['calls_s']:8,.0f} calls/s  front {m['front_us']:4.0f}  "
                f"workers {m['workers_us']:4.0f}  fold {m['fold_us']:3.0f} µs/call"
            )
        one, two, rt_rate = med["pool-1p"]["calls_s"], med["pool-2p"]["calls_s"], med["runtime"]["calls_s"]
        print(
            f"  {tree:<6} pool-2p ÷ pool-1p {two / one:.2f}x (target >= 1.8x)   "
            f"pool-1p ÷ runtime {one / rt_rate:.2f}x (target >= 0.8x)"
        )
    print(f"  audit chain after all writers: ok={verified.ok} rows={verified.rows}")


if __name__ == "__main__":
    main()
