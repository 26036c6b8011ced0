"""The same tool in C, Python and JavaScript, and in a Node worker_thread per call, side by side.

Run ``python bench/bench_js_guest.py [--quick]``. Every guest computes the text
statistics of ``bench_call.INPUT``: ``guest/examples/text-stats/tool.c``,
``bench/py_text_stats.py``, ``guest/examples/ts-text-stats/tool.ts`` (TypeScript,
bundled by esbuild, run by QuickJS-NG pre-initialised at build time) and
``bench/worker_tool.js`` in a fresh Node ``worker_threads`` Worker per call
(``bench/node_driver.js``). For each: p50/p99 of one fresh call (glovebox: a
whole ``Runtime.call``), fuel per call, the artifact, the build time of a small
tool once the toolchain is cached, and memory per live instance that has
answered a call (PSS and private bytes from ``/proc/self/smaps_rollup``, see
``bench_pydense``; Node reports RSS per live worker). Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from bench_call import INPUT, INPUT_JSON  # noqa: E402
from bench_pydense import Bare  # noqa: E402
from bench_python_guest import LIMITS, latency  # noqa: E402
from logic import text_stats  # noqa: E402

SOURCES = {
    "c": ROOT / "guest" / "examples" / "text-stats" / "tool.c",
    "python": BENCH / "py_text_stats.py",
    "js": ROOT / "guest" / "examples" / "ts-text-stats" / "tool.ts",
}


def measure(rt: Any, lang: str, workdir: Path, quick: bool) -> dict[str, Any]:
    from glovebox import build

    wasm = build(SOURCES[lang], workdir / f"{lang}.wasm")  # the toolchain's first use, if any, is here
    edited = workdir / f"edited-{lang}{SOURCES[lang].suffix}"
    edited.write_text(SOURCES[lang].read_text() + ("\n// edited\n" if lang != "python" else "\n# edited\n"))
    started = time.perf_counter()
    build(edited, workdir / f"edited-{lang}.wasm")
    rebuild_s = time.perf_counter() - started
    name = f"text-stats-{lang}"
    rt.register(wasm, manifest={"name": name, "limits": LIMITS})
    first = rt.call(name, INPUT)
    if not first.ok or first.output != text_stats(INPUT["text"]):
        raise SystemExit(f"{lang}: unexpected answer {first.to_dict()}")
    calls = (60 if quick else 300) if lang == "python" else (300 if quick else 2000)
    p50, p99 = latency(lambda: rt.call(name, INPUT), calls, calls // 10)
    info = rt._registry.resolve(name)
    bare = Bare(rt._sandbox, rt._component(info), info.manifest.limits)
    live = bare.per_live(30 if lang == "python" else (200 if quick else 500))
    return {
        "artifact_bytes": wasm.stat().st_size,
        "rebuild_s": rebuild_s,
        "fuel_per_call": first.meta["fuel_used"],
        "p50_us": p50,
        "p99_us": p99,
        "pss_per_live_bytes": live["pss"],
        "private_per_live_bytes": live["private"],
    }


def node_worker(quick: bool) -> dict[str, Any] | None:
    node = shutil.which("node")
    if node is None:
        return None
    calls, live = (100, 30) if quick else (300, 100)
    argv = [node, "--expose-gc", str(BENCH / "node_driver.js"), "--calls", str(calls), "--warmup", "10"]
    argv += ["--seconds", "0.5", "--live", str(live)]
    proc = subprocess.run(argv, input=INPUT_JSON, capture_output=True, text=True, timeout=600, check=True)
    figures: dict[str, Any] = json.loads(proc.stdout)
    if figures["output"] != text_stats(INPUT["text"]):
        raise SystemExit(f"node: unexpected answer {figures['output']}")
    return figures


def show(figures: dict[str, dict[str, Any]], node: dict[str, Any] | None) -> None:
    c, py, js = figures["c"], figures["python"], figures["js"]
    print(f"{'':26}{'C':>11}{'Python':>11}{'JavaScript':>12}{'Node worker':>13}{'JS / C':>9}{'Node / JS':>11}")
    rows = [
        ("fresh call p50 (µs)", "p50_us", "p50_us", 1.0),
        ("fresh call p99 (µs)", "p99_us", "p99_us", 1.0),
        ("PSS per live (KiB)", "pss_per_live_bytes", "rss_per_live_bytes", 1024),
        ("private per live (KiB)", "private_per_live_bytes", None, 1024),
        ("fuel per call (k)", "fuel_per_call", None, 1000),
        ("artifact (KB)", "artifact_bytes", None, 1000),
        ("rebuild, edited (s)", "rebuild_s", None, 1.0),
    ]
    for label, key, node_key, scale in rows:
        values = [f[key] / scale for f in (c, py, js)]
        theirs = node[node_key] / scale if node is not None and node_key is not None else None
        cells = "".join(f"{value:>11.1f}" for value in values[:2]) + f"{values[2]:>12.1f}"
        cells += f"{theirs:>13.1f}" if theirs is not None else f"{'-':>13}"
        ratio = values[2] / values[0] if values[0] else float("nan")
        cells += f"{ratio:>8.1f}×" + (f"{theirs / values[2]:>10.1f}×" if theirs is not None and values[2] else "")
        print(f"{label:26}{cells}")
    if node is not None:
        print(f"(Node {node['node_version']}: RSS per live worker, in the PSS row; a worker per call, fresh each time)")
    print("Targets (DESIGN.md): a JavaScript tool ≤ 1 ms p50 and ≤ 2 MB per live instance; rebuild ≤ 3 s.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args(argv)
    from glovebox import Runtime

    with tempfile.TemporaryDirectory(prefix="glovebox-bench-") as tmp, Runtime(home=Path(tmp) / "home") as rt:
        figures = {lang: measure(rt, lang, Path(tmp), args.quick) for lang in SOURCES}
    node = node_worker(args.quick)
    show(figures, node)
    out = BENCH / "results" / "js_guest.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"glovebox": figures, "node_worker": node}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
