"""Tiny-tool throughput on 1 and 2 processes, printed side by side as ratios.

Run ``python bench/bench_procs.py [--seconds S]``. The tool is the C text-stats
example; every contender calls it for ``S`` seconds on one home, and answers are
checked before they count:

* runtime-1t: ``Runtime.call`` in this process, one thread (the reference);
* solo-Np: N independent processes, each calling its own Runtime in a loop on
  the same home: the ceiling the shared registry and audit chain allow;
* pool-Np: ``ProcessPool(processes=N)`` with ``4 * N`` caller threads here, so the
  figure includes this process's dispatch (pickling, pipes, futures).

``--paired CALLS`` times one call at a time instead, alternating ``Runtime.call``
and ``ProcessPool(processes=1).call`` (default threads) on one thread, and prints
p50/p99 of each and pool ÷ runtime (the issue's target: ≤ 1.25×). ``--gaps CALLS``
prints the thread CPU of a ``Runtime.call`` made back to back, after a 300 µs
sleep and after a 300 µs spin (a worker's call always follows a wait in
``read``). The throughput rounds also print the
CPU µs per call of this process (the front), the workers and the home's audit
fold process, and the calls/s the cores could give at that cost. ``--against
DIR`` (a ``glovebox`` package directory from another tree, e.g. ``git archive``
of main) adds that tree's ``ProcessPool`` to both: to the paired loop as a third
contender in the same rotation, and to the throughput rounds (pool-Np of each
tree, one after the other, ``--rounds`` times), so before and after are timed in
one run; ``--only-pools`` skips runtime-1t and solo-Np.

DESIGN.md asks N processes for at least 0.9·N× one process (2 processes ≥ 1.8×).
The audit chain is one SQLite file whose write lock every call takes, so solo-2p
over solo-1p says how far the shared chain lets processes scale; pool-2p over
pool-1p adds the dispatcher's share of the cores. Figures go to stdout and to
``bench/results/procs.json``. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import glovebox

BENCH = Path(__file__).resolve().parent
SOURCE = BENCH.parent / "guest" / "examples" / "text-stats" / "tool.c"
RESULTS = BENCH / "results" / "procs.json"
INPUT = {"text": "The quick brown fox jumps over the lazy dog.\nend"}
EXPECTED = {"characters": 48, "words": 10, "lines": 2, "bytes": 48}


def _check(result: glovebox.CallResult) -> None:
    if result.output != EXPECTED:
        raise SystemExit(f"wrong answer: {result.to_dict()}")


def runtime_loop(home: str, seconds: float, start_at: float, counts: Any = None, slot: int = 0) -> int:
    """Call text-stats on a Runtime until ``seconds`` have passed after ``start_at`` (wall clock).

    ``counts[2 * slot]`` gets the calls made, ``counts[2 * slot + 1]`` the CPU milliseconds used.
    """
    with glovebox.Runtime(home=home) as rt:
        _check(rt.call("text-stats", INPUT))  # warm: engine, component, validator
        while time.time() < start_at:
            time.sleep(0.001)
        done, end, cpu = 0, time.time() + seconds, time.process_time()
        while time.time() < end:
            rt.call("text-stats", INPUT)
            done += 1
        cpu = time.process_time() - cpu
    if counts is not None:
        counts[2 * slot], counts[2 * slot + 1] = done, int(cpu * 1000)
    return done


def solo(home: str, processes: int, seconds: float) -> tuple[float, float]:
    """Calls per second of ``processes`` independent Runtimes in their own processes, and the
    share of a core each used (below 1: waiting, on the audit chain's lock or for a core)."""
    ctx = multiprocessing.get_context("spawn")
    counts = ctx.Array("q", 2 * processes)
    start_at = time.time() + 3.0  # every process warm before the clock starts
    procs = [ctx.Process(target=runtime_loop, args=(home, seconds, start_at, counts, i)) for i in range(processes)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    calls, cpu_ms = counts[0::2], counts[1::2]
    return sum(calls) / seconds, sum(cpu_ms) / 1000 / seconds / processes


def _folders(home: str) -> list[int]:
    """The pids of the home's audit fold process (``python -I -c ... _foldmain ... HOME``)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"_foldmain" in arg for arg in argv) and home.encode() in argv:
            found.append(int(cmdline.parent.name))
    return found


def _cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += _cpu_s(pid)
        except OSError:  # it ended
            pass
    return total


def pool(
    home: str,
    processes: int,
    seconds: float,
    package: ModuleType = glovebox,
    shares: dict[str, float] | None = None,
) -> float:
    """Calls per second through a ProcessPool (``package``'s), with 4 caller threads per worker.

    ``shares`` (on Linux) gets the CPU µs per call of this process (the front), the
    workers and the home's fold process over the timed window."""
    with package.ProcessPool(processes=processes, home=home, threads=1) as calls:
        for _ in range(8 * processes):
            _check(calls.call("text-stats", INPUT))  # every worker warm
        made, spent = drive(calls, 4 * processes, seconds, home, calls.pids)
    if shares is not None:
        shares.update(spent)
    return made / seconds


def timed_calls(call: Callable[[], Any], threads: int, seconds: float) -> int:
    """Run ``call`` in a loop on each of ``threads`` threads until ``seconds`` have passed: the calls made.

    The one timed caller loop of the benches (``drive`` here, ``bench_native``, ``bench_scale``,
    ``bench_ray``); ``call`` checks its own answer."""
    done = [0] * threads
    end = time.perf_counter() + seconds

    def client(i: int) -> None:
        while time.perf_counter() < end:
            call()
            done[i] += 1

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(done)


def drive(target: Any, callers: int, seconds: float, home: str, workers: list[int]) -> tuple[int, dict[str, float]]:
    """Call text-stats on ``target`` from ``callers`` threads for ``seconds``: the calls made, and (on
    Linux) the CPU µs per call of this process (``front``), of ``workers`` and of the home's fold
    process (``fold``, one started in the window included) over that window."""
    proc = Path("/proc/self/stat").exists()
    folders = _folders(home) if proc else []
    cpu = (time.process_time(), _cpu_of(workers), _cpu_of(folders)) if proc else (0.0, 0.0, 0.0)
    made = timed_calls(lambda: target.call("text-stats", INPUT), callers, seconds)
    if not proc or not made:
        return made, {}
    born = [pid for pid in _folders(home) if pid not in folders]  # a folder started in the window
    return made, {
        "front": (time.process_time() - cpu[0]) / made * 1e6,
        "workers": (_cpu_of(workers) - cpu[1]) / made * 1e6,
        "fold": (_cpu_of(folders) - cpu[2] + _cpu_of(born)) / made * 1e6,
    }


def against(package_dir: Path, tmp: Path) -> ModuleType:
    """The ``glovebox`` package at ``package_dir``, imported as ``glovebox_before``.

    The package imports itself relatively, so another tree's copy loads beside
    this one; a link on ``sys.path`` lets the pool's spawned workers import it too.
    """
    if not (package_dir / "__init__.py").is_file():
        raise SystemExit(f"--against: {package_dir} is not a glovebox package directory (no __init__.py)")
    (tmp / "against").mkdir()
    (tmp / "against" / "glovebox_before").symlink_to(package_dir.resolve())
    sys.path.insert(0, str(tmp / "against"))
    return importlib.import_module("glovebox_before")


def _pct(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(pct / 100 * len(ordered)))] * 1e6


def paired(home: str, calls: int, packages: dict[str, ModuleType]) -> dict[str, dict[str, float]]:
    """p50/p99 (µs) of one call at a time: a Runtime and each package's ProcessPool(1), in rotation."""
    with glovebox.Runtime(home=home) as rt:
        pools = {name: package.ProcessPool(processes=1, home=home) for name, package in packages.items()}
        try:
            contenders: dict[str, Callable[[], glovebox.CallResult]] = {"runtime": lambda: rt.call("text-stats", INPUT)}
            for name, made in pools.items():
                contenders[name] = lambda made=made: made.call("text-stats", INPUT)
            samples: dict[str, list[float]] = {name: [] for name in contenders}
            for i in range(300 + calls):  # the first 300 rounds warm every contender
                for name, call in contenders.items():
                    started = time.perf_counter()
                    result = call()
                    elapsed = time.perf_counter() - started
                    _check(result)
                    if i >= 300:
                        samples[name].append(elapsed)
        finally:
            for made in pools.values():
                made.close()
    return {name: {"p50_us": _pct(s, 50), "p99_us": _pct(s, 99)} for name, s in samples.items()}


def gaps(home: str, calls: int) -> dict[str, float]:
    """Thread CPU µs of one ``Runtime.call`` back to back, after a 300 µs sleep, and after a 300 µs
    spin: what a call costs when its thread did something else first (as a pool's worker always has)."""
    figures: dict[str, float] = {}
    with glovebox.Runtime(home=home) as rt:
        for _ in range(300):
            rt.call("text-stats", INPUT)
        for _ in range(2):
            for how in ("back to back", "after a sleep", "after a spin"):
                used = 0.0
                for _ in range(calls):
                    if how == "after a sleep":
                        time.sleep(0.0003)
                    elif how == "after a spin":
                        until = time.perf_counter() + 0.0003
                        while time.perf_counter() < until:
                            pass
                    started = time.thread_time()
                    rt.call("text-stats", INPUT)
                    used += time.thread_time() - started
                figures[how] = min(figures.get(how, float("inf")), used / calls * 1e6)
    return figures


def _switches(pid: int | str) -> int:
    """Context switches (voluntary and not) of every thread of process ``pid`` so far."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended while the tasks were listed
            continue
        for line in text.splitlines():
            if "ctxt_switches:" in line:
                total += int(line.split()[1])
    return total


def _cpu_s(pid: int | str) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def costs(home: str, calls: int, packages: dict[str, ModuleType]) -> dict[str, dict[str, float]]:
    """CPU µs and context switches per call, here and in the worker, of each package's ProcessPool(1):
    figures the machine's load moves much less than wall-clock time. The pools take turns in blocks
    of 100 calls, so a change of load falls on each alike."""
    pools = {name: package.ProcessPool(processes=1, home=home) for name, package in packages.items()}
    totals = {name: [0.0, 0.0, 0, 0] for name in pools}
    try:
        for made in pools.values():
            for _ in range(200):
                made.call("text-stats", INPUT)
        for _ in range(max(1, calls // 100)):
            for name, made in pools.items():
                [pid] = made.pids
                here, there = (time.process_time(), _switches("self")), (_cpu_s(pid), _switches(pid))
                for _ in range(100):
                    made.call("text-stats", INPUT)
                total = totals[name]
                total[0] += time.process_time() - here[0]
                total[1] += _cpu_s(pid) - there[0]
                total[2] += _switches("self") - here[1]
                total[3] += _switches(pid) - there[1]
    finally:
        for made in pools.values():
            made.close()
    done = max(1, calls // 100) * 100
    return {
        name: {
            "caller_cpu_us": total[0] / done * 1e6,
            "worker_cpu_us": total[1] / done * 1e6,
            "caller_switches": total[2] / done,
            "worker_switches": total[3] / done,
        }
        for name, total in totals.items()
    }


def _load() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def print_paired(figures: dict[str, dict[str, float]]) -> None:
    base = figures["runtime"]
    for name, fig in figures.items():
        line = f"  {name:<12} p50 {fig['p50_us']:8.0f} µs  p99 {fig['p99_us']:8.0f} µs"
        if name != "runtime":
            p50, p99 = fig["p50_us"] / base["p50_us"], fig["p99_us"] / base["p99_us"]
            line += f"   ÷ runtime: p50 {p50:.2f}x  p99 {p99:.2f}x"
        print(line + ("   (target p50 <= 1.25x)" if name == "pool-1p" else ""))
    print(f"  {_load()}")


def print_costs(figures: dict[str, dict[str, float]]) -> None:
    for name, fig in figures.items():
        print(
            f"  {name:<12} per call: CPU {fig['caller_cpu_us']:.0f} µs here + {fig['worker_cpu_us']:.0f} µs in "
            f"the worker; context switches {fig['caller_switches']:.1f} here + {fig['worker_switches']:.1f} there"
        )


def print_shares(shares: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """The mean CPU µs per call of the front, the workers and the fold, per contender, printed."""
    means = {}
    for name, each in shares.items():
        if each and each[0]:
            means[name] = {key: sum(s[key] for s in each) / len(each) for key in each[0]}
    if means:
        print("  CPU µs per call in the throughput rounds (front = this process; bound = cores / their sum):")
    for name, mean in means.items():
        total = sum(mean.values())
        print(
            f"    {name:<10} front {mean['front']:5.0f}  workers {mean['workers']:5.0f}  "
            f"fold {mean['fold']:4.0f}  -> bound {(os.cpu_count() or 1) / total * 1e6:6,.0f} calls/s"
        )
    return means


def print_gaps(figures: dict[str, float]) -> dict[str, float]:
    print("thread CPU of one Runtime.call (the lower of two passes):")
    for how, used in figures.items():
        print(f"  {how:<14} {used:6.0f} µs")
    return figures


def throughput(
    home: str, packages: dict[str, ModuleType], rounds: int, seconds: float, report: dict[str, Any]
) -> list[dict[str, float]]:
    """pool-1p and pool-2p calls/s of each tree, ``rounds`` times in turn."""
    done: list[dict[str, float]] = []
    shares: dict[str, list[dict[str, float]]] = {}
    for _ in range(rounds):
        rates: dict[str, float] = {}
        for n in (1, 2):
            for label, package in packages.items():
                name, share = label.replace("1p", f"{n}p"), {}
                rates[name] = pool(home, n, seconds, package, share)
                shares.setdefault(name, []).append(share)
        done.append(rates)
        print("  " + "  ".join(f"{name} {rate:,.0f}/s" for name, rate in rates.items()) + f"   ({_load()})")
    report["cpu_per_call_us"] = print_shares(shares)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="how long each contender calls")
    parser.add_argument("--paired", type=int, default=0, metavar="CALLS", help="time CALLS calls alternately")
    parser.add_argument("--against", type=Path, help="another tree's glovebox package, timed beside this one")
    parser.add_argument("--rounds", type=int, default=1, help="throughput rounds (each tree in turn)")
    parser.add_argument("--only-pools", action="store_true", help="skip runtime-1t and solo-Np")
    parser.add_argument("--wasm", type=Path, help="a text-stats build to use instead of building one")
    parser.add_argument("--gaps", type=int, default=0, metavar="CALLS", help="CPU of a call after a pause")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        packages = {"pool-1p": glovebox}
        if args.against is not None:
            packages["before-1p"] = against(args.against, Path(tmp))
        home = str(Path(tmp) / "home")
        wasm = args.wasm or glovebox.build(SOURCE, Path(tmp) / "text-stats.wasm")
        with glovebox.Runtime(home=home) as rt:
            rt.register(wasm)
        report: dict[str, Any] = {}
        if args.paired:
            report["paired"] = paired(home, args.paired, packages)
            print(f"one call at a time, {args.paired} rounds of each in rotation:")
            print_paired(report["paired"])
            if Path("/proc/self/task").is_dir():
                report["costs"] = costs(home, args.paired, packages)
                print_costs(report["costs"])
        if args.gaps:
            report["gaps"] = print_gaps(gaps(home, args.gaps))
        figures: dict[str, float] = {}
        busy = {}
        if not args.only_pools:
            figures["runtime-1t"] = runtime_loop(home, args.seconds, 0.0) / args.seconds
            for n in (1, 2):
                figures[f"solo-{n}p"], busy[f"solo-{n}p"] = solo(home, n, args.seconds)
        rounds = throughput(home, packages, args.rounds, args.seconds, report)
        figures.update({name: sum(r[name] for r in rounds) / len(rounds) for name in rounds[0]})
        with glovebox.Runtime(home=home) as rt:
            verified = rt.audit.verify()
    ratios = {"pool-2p / pool-1p": figures["pool-2p"] / figures["pool-1p"]}
    if "before-1p" in figures:
        ratios["before-2p / before-1p"] = figures["before-2p"] / figures["before-1p"]
        ratios["pool-1p / before-1p"] = figures["pool-1p"] / figures["before-1p"]
    if "solo-1p" in figures:
        ratios["solo-2p / solo-1p"] = figures["solo-2p"] / figures["solo-1p"]
        ratios["pool-2p / runtime-1t"] = figures["pool-2p"] / figures["runtime-1t"]
    print(f"cores: {os.cpu_count()}  seconds per contender: {args.seconds}  rounds: {args.rounds}")
    for name, rate in figures.items():
        print(f"  {name:<12} {rate:10.0f} calls/s")
    for name, ratio in ratios.items():
        print(f"  {name:<22} {ratio:5.2f}x" + ("   (target for 2 processes: >= 1.80x)" if "2p /" in name else ""))
    for name, share in busy.items():
        print(f"  {name:<12} each process used {share:.0%} of a core")
    print(f"  {_load()} (other work shares them)")
    print(f"  audit chain after all writers: ok={verified.ok} rows={verified.rows}")
    RESULTS.parent.mkdir(exist_ok=True)
    host = {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()}
    report.update({"host": host, "calls_per_s": figures, "ratios": ratios, "core_share": busy, "rounds": rounds})
    RESULTS.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
