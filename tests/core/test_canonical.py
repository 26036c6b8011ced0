"""The encoders built by ``json_encoder`` write exactly what ``json.JSONEncoder`` writes, and refuse alike."""

from __future__ import annotations

import json
from typing import Any

import pytest

from glovebox.core._canonical import json_encoder

OPTIONS = [
    {},
    {"ensure_ascii": False, "allow_nan": False},
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False, "allow_nan": False},
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": True, "allow_nan": True},
]

VALUES: list[Any] = [
    {"text": 'Größe 日本語 🦊 \u2028 \x00 "q" \\', "n": [1, -2.5, 1e300, None, True, False]},
    {"b": {"z": 1, "a": [{}, []]}, "a": (1, 2)},
    {1: "int key", 2.5: "float key", None: "null key", False: "bool key"},
    "a string alone",
    12345678901234567890,
    [float("nan"), float("inf")],
    {"lone": "\ud800"},
]


@pytest.mark.parametrize("check_circular", [True, False])
@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("value", VALUES)
def test_the_same_text_or_the_same_error(options: dict[str, Any], value: Any, check_circular: bool) -> None:
    plain = json.JSONEncoder(**options).encode
    try:
        expected: Any = plain(value)
    except (TypeError, ValueError) as exc:
        expected = (type(exc), str(exc))
    try:
        made: Any = json_encoder(**options, check_circular=check_circular)(value)
    except (TypeError, ValueError) as exc:
        made = (type(exc), str(exc))
    assert made == expected


def test_without_the_circular_check_a_cycle_ends_in_recursion_error_and_the_encoder_is_still_good() -> None:
    encode = json_encoder(check_circular=False)
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(RecursionError):
        encode(cycle)
    shared = [1]
    assert encode([shared, shared]) == "[[1], [1]]"


def test_a_cycle_is_refused_every_time_and_the_encoder_is_still_good() -> None:
    encode = json_encoder()
    cycle: list[Any] = []
    cycle.append(cycle)
    for _ in range(2):
        with pytest.raises(ValueError, match="Circular reference detected"):
            encode(cycle)
    shared = [1]
    assert encode([shared, shared]) == "[[1], [1]]", "a value seen twice is not a cycle, even after a failure"


def test_what_is_not_json_is_refused_by_type() -> None:
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        json_encoder()({"s": {1}})
