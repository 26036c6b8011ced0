"""A Rust typed-world component (``wit-bindgen``, built here by cargo): records, variants, options, lists and
results round-trip through JSON, its WIT doc comments describe its tools."""

from __future__ import annotations

from pathlib import Path

import pytest

import glovebox
from tests.typedguests import TYPED, built_rust

pytestmark = [pytest.mark.system, pytest.mark.slow]

EVERYTHING = {
    "flag": True,
    "small": 255,
    "signed": -5,
    "wide": str(2**64 - 1),
    "negative": -(2**53) + 1,
    "ratio": 0.5,
    "precise": "NaN",
    "letter": "é",
    "text": "héllo, 世界",
    "bytes": [0, 1, 255],
    "pair": ["a", 4],
    "corner": {"x": 1, "y": -1},
    "figure": {"rect": {"x": 2, "y": 3}},
    "hue": "green",
    "access": ["read", "exec"],
    "maybe": None,
    "nested": {"some": None},
    "outcome": {"err": "bad"},
    "points": [{"x": 0, "y": 0}, {"x": 2**31 - 1, "y": -(2**31)}],
}


@pytest.fixture(scope="module")
def typed_wasm(cache_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_rust(TYPED / "rust-typed", tmp_path_factory.mktemp("rust") / "typed.wasm", cache_root)


def test_records_variants_options_lists_and_results_round_trip(runtime: glovebox.Runtime, typed_wasm: Path) -> None:
    infos = {info.name: info for info in runtime.register_all(typed_wasm)}
    assert set(infos) == {"typed-greet", "typed-move-right", "typed-echo", "typed-divide", "typed-area"}
    echoed = runtime.call("typed-echo", {"value": EVERYTHING})
    assert echoed.ok, echoed.to_dict()
    assert echoed.output == EVERYTHING
    other = {**EVERYTHING, "figure": "empty", "maybe": "x", "nested": {"some": 7}, "outcome": {"ok": 1}, "access": []}
    assert runtime.call("typed-echo", {"value": other}).output == other
    assert runtime.call("typed-greet", {"name": "Ada"}).output == "hello, Ada"
    assert runtime.call("typed-move-right", {"p": {"x": 1, "y": 2}, "dx": 5}).output == {"x": 6, "y": 2}
    assert runtime.call("typed-area", {"s": {"circle": 2.0}}).output == 12.0
    assert runtime.call("typed-divide", {"a": 7, "b": 2}).output == 3


def test_an_err_result_is_the_guest_error(runtime: glovebox.Runtime, typed_wasm: Path) -> None:
    runtime.register_all(typed_wasm)
    result = runtime.call("typed-divide", {"a": 7, "b": 0})
    assert result.error is not None
    assert (result.error.code, result.error.message) == ("guest_error", "division by zero")


def test_doc_comments_describe_the_tools(runtime: glovebox.Runtime, typed_wasm: Path) -> None:
    infos = {info.name: info for info in runtime.register_all(typed_wasm)}
    assert infos["typed-greet"].description == "Greets someone by name."
    assert infos["typed-move-right"].description == "Moves a point right by dx."


def test_out_of_range_and_malformed_values_are_refused(runtime: glovebox.Runtime, typed_wasm: Path) -> None:
    runtime.register_all(typed_wasm)
    for value, path in [
        ({**EVERYTHING, "small": 256}, "/value/small"),
        ({**EVERYTHING, "wide": str(2**64)}, "/value/wide"),
        ({**EVERYTHING, "hue": "mauve"}, "/value/hue"),
        ({**EVERYTHING, "figure": {"hexagon": 1}}, "/value/figure"),
    ]:
        result = runtime.call("typed-echo", {"value": value})
        assert result.error is not None and result.error.code == "invalid_input", value
        assert result.error.details["path"] == path
