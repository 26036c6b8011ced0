"""The same echo tool in C, Rust, Go, JavaScript and Python, side by side: cost per call, memory per live
instance, component size, build times; every figure also as a ratio to C.

Run ``python bench/bench_languages.py [--quick] [--cold] [--only c,rust,...]``. The tools
(``bench/echo/``) answer ``{"text": ...}`` with the text they were given. For each:

- ``Runtime.call`` p50 and p99 (a fresh instance per call, the whole pipeline);
- a bare instantiate + call p50 and p99 (the sandbox's own engine, linker and store);
- fuel per call, the component's size;
- PSS per live instance: ``/proc/self/smaps_rollup`` before and after holding N instances
  that have answered one call (shared pages split between their mappers);
- build time: warm (the source changed by one comment, the toolchains' caches as this user's builds left
  them: ``~/.cache/glovebox``, or ``ZIG_GLOBAL_CACHE_DIR``, ``CARGO_HOME``, ``GOCACHE``, ... when set) and, with
  ``--cold``, for Rust and Go a first build with empty caches (a fresh home: cargo downloads and
  compiles the crates, Go compiles its runtime). First builds of C, Python and JavaScript are in
  docs/guide/building.md.

Nothing here is a test. Results go to ``bench/results/languages.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_call import INPUT, percentile  # noqa: E402
from bench_pydense import ROLLUP, Bare, memory  # noqa: E402

ECHO = BENCH / "echo"
LANGS = ("c", "rust", "go", "js", "python")
SOURCES = {
    "c": ECHO / "c" / "tool.c",
    "rust": ECHO / "rust",
    "go": ECHO / "go",
    "js": ECHO / "js" / "tool.js",
    "python": ECHO / "python" / "tool.py",
}
#: The file a warm build changes, per language (a comment appended).
EDITED = {"rust": Path("src/lib.rs"), "go": Path("main.go")}
COMMENT = {"c": "/* {n} */\n", "rust": "// {n}\n", "go": "// {n}\n", "js": "// {n}\n", "python": "# {n}\n"}
LIMITS = {"memory_bytes": 64 * 1024 * 1024, "fuel": 5_000_000_000, "timeout_ms": 10_000}
#: Environment variables that would point a cold build at warm caches.
CACHE_VARIABLES = ("CARGO_HOME", "CARGO_TARGET_DIR", "GOCACHE", "GOMODCACHE")


def timed(op: Callable[[], object], calls: int, warmup: int) -> tuple[float, float]:
    """p50 and p99 in µs of ``calls`` timed runs of ``op`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        op()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        op()
        samples.append((time.perf_counter_ns() - t0) / 1000)
    return percentile(samples, 50), percentile(samples, 99)


def staged(lang: str, workdir: Path) -> Path:
    """A copy of the language's echo source in ``workdir`` (a build may then change it)."""
    src = SOURCES[lang]
    target = workdir / "src" / lang
    if src.is_dir():
        shutil.copytree(src, target, ignore=shutil.ignore_patterns("*.wasm", "*.glovebox.toml", "target"))
        return target
    target.mkdir(parents=True)
    shutil.copyfile(src, target / src.name)
    return target / src.name


def build_times(lang: str, src: Path, workdir: Path, cold: bool) -> tuple[Path, dict[str, float]]:
    """Build ``src`` (as found), then a warm rebuild after a one-comment change; with ``cold``, a first build
    with empty caches (Rust, Go). Returns the component and the times in seconds."""
    import glovebox

    times: dict[str, float] = {}
    if cold and lang in ("rust", "go"):
        saved = {name: os.environ.pop(name) for name in CACHE_VARIABLES if name in os.environ}
        try:
            t0 = time.monotonic()
            glovebox.build(src, workdir / f"{lang}-cold.wasm", home=workdir / "cold-home", progress=lambda _: None)
            times["cold_s"] = time.monotonic() - t0
        finally:
            os.environ.update(saved)
    t0 = time.monotonic()
    out = glovebox.build(src, workdir / f"{lang}.wasm", progress=lambda _: None)
    times["first_s"] = time.monotonic() - t0
    edited = src / EDITED[lang] if src.is_dir() else src
    edited.write_text(edited.read_text() + COMMENT[lang].format(n=time.time_ns()))
    t0 = time.monotonic()
    glovebox.build(src, workdir / f"{lang}-warm.wasm", progress=lambda _: None)
    times["warm_s"] = time.monotonic() - t0
    return out, times


def per_live_pss(bare: Bare, count: int) -> float:
    """PSS bytes per live instance that has answered a call."""
    bare.call()
    before = memory()
    held = [bare.call() for _ in range(count)]
    after = memory()
    del held
    return (after["pss"] - before["pss"]) / count


def measure(rt: Any, lang: str, workdir: Path, quick: bool, cold: bool) -> dict[str, Any]:
    wasm, builds = build_times(lang, staged(lang, workdir), workdir, cold)
    name = f"echo-{lang}"
    rt.register(wasm, manifest={"name": name, "limits": LIMITS})
    first = rt.call(name, INPUT)
    if not first.ok or first.output != INPUT:
        raise SystemExit(f"{lang}: the echo failed: {first.to_dict()}")
    info = rt._registry.resolve(name)
    bare = Bare(rt._sandbox, rt._component(info), info.manifest.limits)
    slow = lang in ("python", "js", "go")
    calls = (40 if quick else 300) if slow else (300 if quick else 2000)
    call_p50, call_p99 = timed(lambda: rt.call(name, INPUT), calls, calls // 10)
    bare_p50, bare_p99 = timed(bare.call, calls, calls // 10)
    return {
        "runtime_call_p50_us": call_p50,
        "runtime_call_p99_us": call_p99,
        "bare_call_p50_us": bare_p50,
        "bare_call_p99_us": bare_p99,
        "fuel_per_call": first.meta["fuel_used"],
        "component_bytes": wasm.stat().st_size,
        "pss_per_live_bytes": per_live_pss(bare, 20 if slow else 300),
        **builds,
    }


ROWS: list[tuple[str, str, str]] = [
    ("Runtime.call p50 (µs)", "runtime_call_p50_us", "{:,.0f}"),
    ("Runtime.call p99 (µs)", "runtime_call_p99_us", "{:,.0f}"),
    ("bare instantiate+call p50 (µs)", "bare_call_p50_us", "{:,.0f}"),
    ("bare instantiate+call p99 (µs)", "bare_call_p99_us", "{:,.0f}"),
    ("fuel per call", "fuel_per_call", "{:,.0f}"),
    ("PSS per live instance (KiB)", "pss_per_live_bytes", "{:,.0f}"),
    ("component size (KiB)", "component_bytes", "{:,.0f}"),
    ("build, cold (s)", "cold_s", "{:,.1f}"),
    ("build, warm (s)", "warm_s", "{:,.1f}"),
]
_KIB = {"pss_per_live_bytes", "component_bytes"}


def show(figures: dict[str, dict[str, Any]]) -> None:
    langs = list(figures)
    print(f"{'':32}" + "".join(f"{lang:>18}" for lang in langs))
    for label, key, fmt in ROWS:
        cells = []
        for lang in langs:
            value = figures[lang].get(key)
            if value is None:
                cells.append(f"{'-':>18}")
                continue
            shown = value / 1024 if key in _KIB else value
            base = figures.get("c", {}).get(key)
            ratio = f" ({value / base:.1f}x)" if base and lang != "c" and not key.endswith("_s") else ""
            cells.append(f"{fmt.format(shown) + ratio:>18}")
        print(f"{label:32}" + "".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--cold", action="store_true", help="also time first Rust and Go builds with empty caches")
    parser.add_argument("--only", default=",".join(LANGS), help="comma-separated languages (default: all)")
    args = parser.parse_args(argv)
    if not ROLLUP.exists():
        raise SystemExit("needs Linux /proc/self/smaps_rollup")
    from glovebox import Runtime

    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="glovebox-bench-") as tmp, Runtime(home=Path(tmp) / "rt") as rt:
        for lang in args.only.split(","):
            figures[lang] = measure(rt, lang, Path(tmp), args.quick, args.cold)
            print(f"measured {lang}", file=sys.stderr, flush=True)
    show(figures)
    out = BENCH / "results" / "languages.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
