"""Schema checks before and after jsonschema-rs, timed alternately in one process.

Run ``python bench/bench_schema.py [--quick] [--before COMMIT]``. "Before" is the
schema package of ``COMMIT`` (default ``d9fc396``: jsonschema, the hand-written fast
path ``_fastschema`` and the ``regex``-module ECMA engine), loaded from git into a
package of its own beside today's; "after" is the working tree's. Each case times
the same value through both ``SchemaCheck.validate``, in rounds that take turns,
and prints the median µs per check and before ÷ after. A last table times full
``Runtime.call``\\ s of the C text-stats example on two Runtimes in one home, one
holding before-checks and one after-checks, taking turns call by call.
Nothing here is a test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from bench_call import INPUT, build_tool, percentile  # noqa: E402

OBJECT = {
    "type": "object",
    "required": ["text"],
    "additionalProperties": False,
    "properties": {"text": {"type": "string", "description": "The text to measure."}},
}
OUTPUT = {
    "type": "object",
    "required": ["characters", "words", "lines", "bytes"],
    "properties": {k: {"type": "integer"} for k in ("characters", "words", "lines", "bytes")},
}
PATTERNS = {
    "type": "object",
    "required": ["id"],
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z0-9-]{1,64}$"},
        "email": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+\\.\\w+$"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^\\p{Letter}+$"}},
    },
}
API = {
    "$defs": {
        "money": {
            "type": "object",
            "required": ["amount", "currency"],
            "properties": {"amount": {"type": "number", "minimum": 0}, "currency": {"enum": ["EUR", "USD", "JPY"]}},
        },
        "line": {
            "type": "object",
            "properties": {
                "sku": {"type": "string", "minLength": 1},
                "qty": {"type": "integer", "minimum": 1},
                "price": {"$ref": "#/$defs/money"},
            },
            "required": ["sku", "qty"],
        },
    },
    "type": "object",
    "properties": {
        "order": {"type": "string"},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}, "maxItems": 500},
        "note": {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "null"}]},
    },
    "required": ["order", "lines"],
}
UNEVALUATED = {
    "patternProperties": {"^x-": True},
    "properties": {"id": {"type": "integer"}},
    "unevaluatedProperties": False,
}
LINE = {"sku": "A-1", "qty": 2, "price": {"amount": 9.5, "currency": "EUR"}}
CASES: list[tuple[str, Any, Any, bool]] = [
    ("text-stats input (valid)", OBJECT, INPUT, True),
    ("text-stats input (refused)", OBJECT, {"text": 5}, False),
    ("text-stats output (valid)", OUTPUT, {"characters": 1, "words": 2, "lines": 3, "bytes": 4}, True),
    ("3 patterns (valid)", PATTERNS, {"id": "tool-7", "email": "a@b.io", "tags": ["école", "x"]}, True),
    ("3 patterns (refused)", PATTERNS, {"id": "Tool 7"}, False),
    ("$ref + anyOf + enum, 20 lines (valid)", API, {"order": "o1", "lines": [LINE] * 20, "note": None}, True),
    ("$ref + anyOf + enum, 20 lines (refused)", API, {"order": "o1", "lines": [LINE] * 19 + [{"sku": ""}]}, False),
    ("$ref + anyOf + enum, 500 lines (valid)", API, {"order": "o1", "lines": [LINE] * 500}, True),
    ("unevaluatedProperties + patternProperties", UNEVALUATED, {"id": 1, "x-a": 2}, True),
]


def load_before(commit: str) -> types.ModuleType:
    """The schema package of ``commit`` as the package ``gb_before`` (imports rewritten to reach glovebox.core)."""
    folder = Path(tempfile.mkdtemp(prefix="gb-before-")) / "gb_before"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for name in ("_ecmaregex", "_fastschema", "_schemas"):
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:runtime/glovebox/schema/{name}.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (folder / f"{name}.py").write_text(source.replace("from ..core.", "from glovebox.core."))
    sys.path.insert(0, str(folder.parent))
    import gb_before._schemas

    return gb_before._schemas


def check(make: Any, schema: Any) -> Callable[[Any], bool]:
    validator = make.SchemaCheck.for_schema(schema, "input")

    def run(value: Any) -> bool:
        try:
            validator.validate(value)
        except Exception:
            return False
        return True

    return run


def alternate(
    before: Callable[[Any], bool], after: Callable[[Any], bool], value: Any, rounds: int, per: int
) -> tuple[float, float]:
    """Median µs per check of each, over ``rounds`` rounds of ``per`` checks taking turns."""
    samples: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(rounds):
        for name, run in (("before", before), ("after", after)):
            t0 = time.perf_counter_ns()
            for _ in range(per):
                run(value)
            samples[name].append((time.perf_counter_ns() - t0) / 1000 / per)
    return statistics.median(samples["before"]), statistics.median(samples["after"])


def full_calls(before_schemas: Any, calls: int) -> dict[str, float]:
    """p50/p99 of Runtime.call on text-stats: a Runtime with before-checks and one with after-checks, taking turns."""
    import glovebox.runtime._runtime as runtime_module
    from glovebox import Runtime

    work = Path(tempfile.mkdtemp(prefix="gb-schema-bench-"))
    wasm = build_tool(work)
    home = str(work / "home")
    with Runtime(home=home) as after, Runtime(home=home) as before:
        after.register(str(wasm))
        assert after.call("text-stats", INPUT).ok
        current = runtime_module.SchemaCheck
        runtime_module.SchemaCheck = before_schemas.SchemaCheck  # type: ignore[misc]  # its first call caches them
        try:
            assert before.call("text-stats", INPUT).ok
        finally:
            runtime_module.SchemaCheck = current  # type: ignore[misc]
        samples: dict[str, list[float]] = {"before": [], "after": []}
        for index in range(calls + calls // 10):
            for name, rt in (("before", before), ("after", after)):
                t0 = time.perf_counter_ns()
                rt.call("text-stats", INPUT)
                if index >= calls // 10:
                    samples[name].append((time.perf_counter_ns() - t0) / 1000)
    return {f"{name}_p{pct}": percentile(s, pct) for name, s in samples.items() for pct in (50, 99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--before", default="d9fc396", help="the commit whose schema package is 'before'")
    args = parser.parse_args()
    rounds, per, calls = (7, 200, 1000) if args.quick else (21, 1000, 5000)
    import glovebox.schema._schemas as after_schemas

    before_schemas = load_before(args.before)
    print(f"schema checks, median µs per check over {rounds} alternating rounds of {per}")
    print("| case | before | after | before ÷ after |")
    print("|---|---|---|---|")
    for name, schema, value, valid in CASES:
        if name.startswith("unevaluated"):
            alone = check(after_schemas, schema)
            a = alternate(alone, alone, value, rounds, per)[1]
            print(f"| {name} | refused at registration | {a:.1f} | |")
            continue
        before, after = check(before_schemas, schema), check(after_schemas, schema)
        assert before(value) is valid and after(value) is valid, name
        b, a = alternate(before, after, value, rounds, per)
        print(f"| {name} | {b:.1f} | {a:.1f} | {b / a:.1f}× |")
    figures = full_calls(before_schemas, calls)
    print(f"\nRuntime.call text-stats, {calls} calls each, taking turns (µs)")
    print("| | before | after | before ÷ after |")
    print("|---|---|---|---|")
    for pct in (50, 99):
        b, a = figures[f"before_p{pct}"], figures[f"after_p{pct}"]
        print(f"| p{pct} | {b:.1f} | {a:.1f} | {b / a:.2f}× |")


if __name__ == "__main__":
    main()
