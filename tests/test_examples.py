"""The example tools, built from source, registered and called."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import glovebox

CASES: list[tuple[str, Any, str, Any]] = [
    ("text-stats", {"text": "héllo wörld\n"}, "ok", {"characters": 12, "words": 2, "lines": 1, "bytes": 14}),
    ("text-stats", {"text": ""}, "ok", {"characters": 0, "words": 0, "lines": 0, "bytes": 0}),
    ("primes", {"n": 100}, "ok", {"n": 100, "count": 25, "largest": 97}),
    ("primes", {"n": 100_000_000}, "fuel_exhausted", None),
    ("calc", {"expression": "2 * (3 + 4) ^ 2 - -1"}, "ok", {"value": 99}),
    ("calc", {"expression": "1 / (2 - 2)"}, "guest_error", "division by zero"),
    ("calc", {"expression": "2 +"}, "guest_error", "column 4"),
    ("word-freq", {"text": "b a b c b a", "top": 2}, "ok", None),
    ("stress", {"mode": "spin"}, "timeout", None),
    ("stress", {"mode": "allocate", "mib": 64}, "memory_limit", None),
    ("stress", {"mode": "allocate", "mib": 2}, "ok", {"held_bytes": 2 * 1024 * 1024}),
    ("stress", {"mode": "burn", "steps": 1000}, "ok", {"steps": 1000}),
]


@pytest.mark.parametrize(("tool", "value", "expect", "detail"), CASES)
def test_example(
    runtime: glovebox.Runtime,
    build_example: Callable[[str], Path],
    tool: str,
    value: Any,
    expect: str,
    detail: Any,
) -> None:
    runtime.register(build_example(tool))
    result = runtime.call(tool, value)
    assert (result.code or "ok") == expect, result.to_dict()
    if expect == "ok" and detail is not None:
        assert result.output == detail
    if expect == "guest_error":
        assert detail in result.error.message  # type: ignore[union-attr]


def test_word_freq_logs_and_ranks(runtime: glovebox.Runtime, build_example: Callable[[str], Path]) -> None:
    runtime.register(build_example("word-freq"))
    result = runtime.call("word-freq", {"text": "B a b c b A", "top": 2})
    assert result.output == {"words": 6, "distinct": 3, "top": [{"word": "b", "count": 3}, {"word": "a", "count": 2}]}
    assert result.meta["logs"][0] == {"level": "info", "message": "counted 6 words, 3 distinct"}


def test_memory_limit_envelope(runtime: glovebox.Runtime, build_example: Callable[[str], Path]) -> None:
    runtime.register(build_example("stress"))
    error = runtime.call("stress", {"mode": "allocate", "mib": 64}).to_dict()["error"]
    assert error["code"] == "memory_limit"
    assert error["details"]["memory_bytes"] == 8 * 1024 * 1024
    assert error["retryable"] is False


def test_async_call(runtime: glovebox.Runtime, build_example: Callable[[str], Path]) -> None:
    import asyncio

    runtime.register(build_example("calc"))

    async def many() -> list[glovebox.CallResult]:
        return await asyncio.gather(*(runtime.acall("calc", {"expression": f"{i} * 2"}) for i in range(20)))

    results = asyncio.run(many())
    assert [r.output["value"] for r in results] == [i * 2 for i in range(20)]


def test_closed_runtime_refuses_use(build_example: Callable[[str], Path], tmp_path: Path) -> None:
    rt = glovebox.Runtime(home=tmp_path / "h")
    rt.close()
    rt.close()
    with pytest.raises(ValueError, match="closed"):
        rt.call("x", {})
    with pytest.raises(TypeError):
        glovebox.Runtime(home=tmp_path / "h2").call(42, {})  # type: ignore[arg-type]


TEXTS = ["héllo wörld\n", "", "one\n\ntwo  three\t four\r\nfive", "🙂 emoji 𝄞\n\n", "no newline"]


@pytest.mark.parametrize("text", TEXTS)
def test_the_typescript_text_stats_answers_as_the_c_one(
    runtime: glovebox.Runtime, build_example: Callable[[str], Path], build_js: Callable[[Path], Path], text: str
) -> None:
    runtime.register(build_example("text-stats"))
    runtime.register(build_js(Path(__file__).parents[1] / "guest" / "examples" / "ts-text-stats" / "tool.ts"))
    c, ts = runtime.call("text-stats", {"text": text}), runtime.call("ts-text-stats", {"text": text})
    assert ts.ok and c.ok, (ts.to_dict(), c.to_dict())
    assert ts.output == c.output
