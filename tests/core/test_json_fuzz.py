"""Fuzzing the JSON boundary with hypothesis, through ``Runtime.call`` and real guests.

Inputs (nesting, lone surrogates, huge numbers, huge strings) go to the echo guest;
output texts chosen byte by byte come back through the unquote guest. Whatever the
value, only documented error codes come out, no exception escapes, and every call
leaves exactly one audit row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import glovebox
from glovebox.core._jsonlimits import JsonRejected, loads
from glovebox.schema._schemas import MAX_INPUT_BYTES

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
INPUT_CODES = {None, "invalid_input", "output_too_large"}  # echo answers 1 MiB at most
OUTPUT_CODES = {None, "invalid_output", "output_too_large"}

lone_surrogates = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "x\ud834y"])
strings = st.text(max_size=20) | lone_surrogates | st.builds(lambda n: "s" * n, st.integers(0, 5_000_000))
numbers = (
    st.integers()
    | st.builds(lambda n: 10**n, st.integers(900, 20_000))
    | st.floats(allow_nan=True, allow_infinity=True)
)


def nested(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


json_values = st.recursive(
    st.none() | st.booleans() | numbers | strings,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(strings, children, max_size=4),
    max_leaves=12,
)
inputs = json_values | st.builds(nested, st.integers(0, 3_000), json_values)


def dumps(value: Any) -> str:
    """JSON text of a generated value (lone surrogates as escapes), or a stand-in the encoder cannot write."""
    try:
        return json.dumps(value)
    except ValueError:  # an integer over Python's 4300-digit conversion limit
        return "9" * 5_000
    except RecursionError:  # nested deeper than the encoder goes
        return "[" * 3_000 + "]" * 3_000


fragments = st.sampled_from(
    [
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        '"',
        '"a"',
        "1",
        "-",
        ".5",
        "e9",
        "1e999",
        "NaN",
        "Infinity",
        "null",
        "\\ud800",
        "\\udc00",
        "\\ud83d\\ude00",
        "\\",
        " ",
        "é",
        "\u2028",
    ]  # fmt: skip
)
output_texts = (
    st.lists(fragments, max_size=40).map("".join)
    | st.builds(lambda n: "[" * n + "]" * n, st.integers(0, 200_000))
    | st.builds(lambda n: "9" * n, st.integers(1, 400_000))
    | inputs.map(dumps)
)


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory, build_guest: Callable[[str], Path]) -> Iterator[glovebox.Runtime]:
    with glovebox.Runtime(home=tmp_path_factory.mktemp("fuzz")) as runtime:
        runtime.register(build_guest("echo"), {"name": "echo"})
        runtime.register(
            build_guest("unquote"),
            {
                "name": "unquote",
                "limits": {"output_bytes": 512 * 1024, "fuel": 2_000_000_000, "memory_bytes": 64 * 1024 * 1024},
            },
        )
        yield runtime


def call_once(rt: glovebox.Runtime, name: str, value: Any) -> glovebox.CallResult:
    before = rt.audit.verify().rows
    result = rt.call(name, value)
    after = rt.audit.verify()
    assert after.ok and after.rows == before + 1, "exactly one audit row per call"
    json.dumps(result.to_dict(), ensure_ascii=False, allow_nan=False).encode("utf-8")  # printable anywhere
    return result


@FUZZ
@given(value=inputs)
def test_inputs_give_only_documented_codes(rt: glovebox.Runtime, value: Any) -> None:
    result = call_once(rt, "echo", value)
    assert result.code in INPUT_CODES, result.error
    if result.ok:
        assert result.output == json.loads(json.dumps(value))


@FUZZ
@given(text=output_texts)
def test_outputs_give_only_documented_codes(rt: glovebox.Runtime, text: str) -> None:
    result = call_once(rt, "unquote", text)
    assert result.code in OUTPUT_CODES | {"invalid_input"}, result.error
    if result.code == "invalid_input":
        assert len(text) > MAX_INPUT_BYTES // 2 and "over the 4194304-byte limit" in str(result.error)
        return
    if result.code == "output_too_large":
        return
    try:
        expected = loads(text)
    except JsonRejected:
        assert result.code == "invalid_output"
    else:
        assert result.ok and result.output == expected
