"""The audit fold's CPU per row: journal lines read back, prepared, hashed and inserted into the chain.

Run ``python bench/bench_fold.py [--rows N] [--rounds R] [--against DIR]``. Each round, in a
fresh process per tree: a home gets ``N`` calls of the C text-stats tool while its fold
process is held off (this process holds ``audit.fold.lock``, as a live folder would), so
every row waits in the journal; then one fold chains them all, and its CPU time
(``time.process_time``) divided by the rows is the figure. The fold runs as the fold
process runs it (no pauses for calls: ``AuditLog._fold_alone``) where the tree has that,
else as ``AuditLog.fold``. ``--against`` (the ``runtime`` directory of another tree, e.g.
``git archive`` of an earlier commit) alternates that tree's rounds with this one's.
Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import glovebox

BENCH = Path(__file__).resolve().parent
RUNTIME = BENCH.parent / "runtime"

_ROUND = r"""
import fcntl, json, os, sys, tempfile, time
from pathlib import Path
import glovebox
from glovebox.audit._log import AuditLog

wasm, rows = Path(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    home = Path(tmp) / "home"
    home.mkdir()
    held = os.open(home / "audit.fold.lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # "a folder runs": every row stays in the journal
    with glovebox.Runtime(home=home) as rt:
        rt.register(wasm)
        log = AuditLog(home)
        log.fold()  # the registration's own rows, if any
        for _ in range(rows):
            assert rt.call("text-stats", {"text": "The quick brown fox jumps over the lazy dog."}).ok
        fold = getattr(log, "_fold_alone", log.fold)
        started = time.process_time()
        folded = fold()
        spent = time.process_time() - started
        assert log.verify().ok
        log.close()
print(json.dumps({"rows": folded, "us_per_row": spent / folded * 1e6}))
"""


def _round(runtime: Path, wasm: Path, rows: int) -> dict[str, float]:
    env = {"PYTHONPATH": str(runtime), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    out = subprocess.run([sys.executable, "-c", _ROUND, str(wasm), str(rows)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"a round on {runtime} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another tree's runtime/ directory, alternated with this one")
    args = parser.parse_args()
    trees = {"this": RUNTIME} | ({"before": args.against.resolve()} if args.against else {})
    figures: dict[str, list[float]] = {name: [] for name in trees}
    work = Path(tempfile.mkdtemp(prefix="bench-fold-"))
    wasm = glovebox.build(BENCH.parent / "guest" / "examples" / "text-stats" / "tool.c", work / "text-stats.wasm")
    for n in range(args.rounds):
        order = list(trees.items()) if n % 2 == 0 else list(reversed(trees.items()))
        for name, runtime in order:
            got = _round(runtime, wasm, args.rows)
            figures[name].append(got["us_per_row"])
            print(f"  round {n + 1} {name:6} {got['rows']:>7,} rows  {got['us_per_row']:5.1f} µs CPU a row", flush=True)
    print(f"medians of {args.rounds} rounds:")
    for name, values in figures.items():
        print(f"  {name:6} {statistics.median(values):5.1f} µs CPU a row")
    shutil.rmtree(work, ignore_errors=True)
    if "before" in figures:
        ratio = statistics.median(figures["before"]) / statistics.median(figures["this"])
        print(f"  before ÷ this: {ratio:.2f}×")


if __name__ == "__main__":
    main()
