"""The JSON rules at the host boundary, attacked by a hostile caller and a hostile guest.

A caller's input that breaks a rule is ``invalid_input`` before anything else
runs; a guest's output that breaks one is ``invalid_output``. Either way the host
survives, the call leaves exactly one audit row and the chain still verifies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.audit._log import AuditLog
from glovebox.cli._main import cli
from glovebox.core._jsonlimits import MAX_DEPTH, MAX_NUMBER_CHARS, JsonRejected, check_value, checked_text, loads
from glovebox.policy import parse_policy

STORE_ALL = parse_policy("version: 1\nrules: [{action: allow}]\naudit: {store_inputs: true, store_outputs: true}\n")


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def rt(_isolated_env: Path, build_guest: Callable[[str], Path]) -> Iterator[glovebox.Runtime]:
    """A Runtime that stores inputs and outputs in the audit log, with echo and hostile-json."""
    with glovebox.Runtime(home=_isolated_env, policy=STORE_ALL) as runtime:
        runtime.register(build_guest("echo"), {"name": "echo"})
        runtime.register(build_guest("hostile_json"), {"name": "hostile-json"})
        yield runtime


def call_once(rt: glovebox.Runtime, name: str, value: Any, principal: str | None = None) -> glovebox.CallResult:
    """One call; asserts it left exactly one audit row (its own) and the chain verifies."""
    before = rt.audit.verify().rows
    result = rt.call(name, value, principal=principal)
    after = rt.audit.verify()
    assert after.ok and after.rows == before + 1
    record = rt.audit.find(result.meta["call_id"])
    assert record is not None and record["outcome"] == (result.code or "ok")
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")  # every surface can print it
    return result


# -- the rules, on text and on Python values --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" * 100_000 + "]" * 100_000, f"is nested deeper than {MAX_DEPTH} levels"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"is nested deeper than {MAX_DEPTH} levels (at /0/0/0"),
        ("1" * 10_000, f"holds a number of 10000 characters, over the {MAX_NUMBER_CHARS}-character limit"),
        ("0." + "5" * 5_000, f"holds a number of 5002 characters, over the {MAX_NUMBER_CHARS}-character limit"),
        ("[1e400]", "holds the number 1e400, out of the range of a double"),
        ("NaN", "is not JSON: NaN is not a JSON value"),
        ('{"a": ["\\ud800"]}', "holds a lone surrogate (U+D800) in a string at /a/0: strings must be valid Unicode"),
        ('{"\\udfff": 1}', "holds a lone surrogate (U+DFFF) in a string at /"),
        ('"\udc80"', "holds a lone surrogate (U+DC80) in a string at /"),
        ("[1,", "is not JSON: Expecting value at line 1 column 4"),
    ],
)
def test_loads_refuses_with_a_message_saying_what(text: str, problem: str) -> None:
    with pytest.raises(JsonRejected) as caught:
        loads(text)
    assert str(caught.value).startswith(problem)


def test_loads_accepts_what_the_rules_allow() -> None:
    assert loads("[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH) == nested(MAX_DEPTH)
    assert loads("9" * MAX_NUMBER_CHARS) == int("9" * MAX_NUMBER_CHARS)
    assert loads('"\\ud83d\\ude00"') == "\U0001f600", "a surrogate pair is one character"
    assert loads(b'{"a": "\xc3\xa9"}') == {"a": "é"}


def test_loads_refuses_bytes_that_are_not_utf8() -> None:
    with pytest.raises(JsonRejected, match=r"^is not JSON: its bytes are not valid utf-8 \(at byte 7\)"):
        loads(b'{"a": "\xff"}')


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (nested(100_000), f"is nested deeper than {MAX_DEPTH} levels"),
        (nested(MAX_DEPTH + 1), f"is nested deeper than {MAX_DEPTH} levels"),
        pytest.param(
            10**10_000,
            f"holds a number of more than {MAX_NUMBER_CHARS} digits, over the {MAX_NUMBER_CHARS}-character limit",
            id="huge-int",
        ),
        pytest.param({"n": [-(10**MAX_NUMBER_CHARS)]}, "holds a number of 1001 characters at /n/0", id="long-int"),
        ({"k": "\ud800"}, "holds a lone surrogate (U+D800) in a string at /k"),
        ({"\udc00": 1}, "holds a lone surrogate (U+DC00) in a string at /"),
    ],
)
def test_check_value_refuses_with_a_message_saying_what(value: Any, problem: str) -> None:
    with pytest.raises(JsonRejected) as caught:
        check_value(value)
    assert str(caught.value).startswith(problem)


def test_check_value_accepts_the_limits_themselves() -> None:
    check_value(nested(MAX_DEPTH))
    check_value({"n": 10**MAX_NUMBER_CHARS - 1, "s": "\U0001f600 é"})


def test_a_cycle_is_too_deep_not_a_hang() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(JsonRejected, match="nested deeper"):
        check_value(cycle)


class _Big(int):
    """An int subclass: the encoder writes it as an int, the walk checks it as one."""


def _cycle() -> list[Any]:
    cycle: list[Any] = []
    cycle.append({"a": cycle})
    return cycle


#: Values the rules refuse, each reaching a different screen of ``checked_text``.
REFUSED = [
    pytest.param(nested(MAX_DEPTH + 1), id="deep-in-a-short-text"),
    pytest.param({"k": [nested(MAX_DEPTH)]}, id="deep-under-an-object"),
    pytest.param(nested(100_000), id="deep-past-the-recursion-limit"),
    pytest.param({"n": -(10**MAX_NUMBER_CHARS)}, id="long-int"),
    pytest.param([_Big(10**MAX_NUMBER_CHARS)], id="long-int-subclass"),
    pytest.param({"n": 10**10_000}, id="int-past-str-conversion"),
    pytest.param({"a": {"b": "ok \ud800"}}, id="surrogate-in-a-value"),
    pytest.param({"a": [{"\udc00": 1}]}, id="surrogate-in-a-key"),
    pytest.param(_cycle(), id="cycle"),
]


@pytest.mark.parametrize("value", REFUSED)
def test_checked_text_refuses_exactly_what_check_value_refuses(value: Any) -> None:
    with pytest.raises(JsonRejected) as walked:
        check_value(value)
    with pytest.raises(JsonRejected) as checked:
        checked_text(value)
    assert str(checked.value) == str(walked.value) and checked.value.details == walked.value.details


@pytest.mark.parametrize(
    "value",
    [
        {"text": "Größe 日本語 🦊", "n": [1, -2.5, None, True]},
        {"s": "[" * (MAX_DEPTH * 2) + "{" * MAX_DEPTH},  # brackets in a string: the walk runs and passes
        {"n": 10**MAX_NUMBER_CHARS - 1},  # the longest number allowed, in a long text
        nested(MAX_DEPTH),
        {1: "an int key", "b": (1, 2)},  # what the encoder converts, as before
        "just a string",
    ],
)
def test_checked_text_gives_the_input_encoders_text_and_its_utf8_size(value: Any) -> None:
    check_value(value)
    expected = json.dumps(value, ensure_ascii=False, allow_nan=False)
    assert checked_text(value) == (expected, len(expected.encode("utf-8")))


@pytest.mark.parametrize("value", [{1, 2}, {"f": float("nan")}, {"o": object()}, [float("inf")]])
def test_checked_text_gives_none_for_a_value_that_obeys_the_rules_but_is_not_json(value: Any) -> None:
    check_value(value)
    assert checked_text(value) is None


def test_a_short_text_and_a_long_one_are_read_alike() -> None:
    """Texts up to MAX_NUMBER_CHARS are read without the per-integer hook; the answers are the same."""
    short = '{"n": [0, -7, 123456789012345678901234567890], "f": 1.5e3, "t": true}'
    padded = short[:-1] + ', "pad": "' + "x" * MAX_NUMBER_CHARS + '"}'
    assert len(short) <= MAX_NUMBER_CHARS < len(padded)
    value = loads(short)
    assert value == {"n": [0, -7, 123456789012345678901234567890], "f": 1500.0, "t": True}
    assert {k: v for k, v in loads(padded).items() if k != "pad"} == value
    for text in ("[1e999]", "[-1e999]", "[Infinity]", "[NaN]"):
        with pytest.raises(JsonRejected):
            loads(text)


# -- a hostile caller: invalid_input before anything runs ----------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (nested(100_000), "input is nested deeper than 64 levels"),
        (nested(MAX_DEPTH + 1), "input is nested deeper than 64 levels"),
        pytest.param({"n": 10**10_000}, "input holds a number of more than 1000 digits at /n", id="huge-int"),
        ({"text": "\ud800"}, "input holds a lone surrogate (U+D800) in a string at /text"),
        ({"\udfff": "x"}, "input holds a lone surrogate (U+DFFF) in a string at /"),
    ],
)
def test_hostile_inputs_are_invalid_input_with_one_audit_row(rt: glovebox.Runtime, value: Any, problem: str) -> None:
    result = call_once(rt, "echo", value)
    assert result.code == "invalid_input" and result.error is not None
    assert result.error.message.startswith(problem)
    assert result.meta["fuel_used"] == 0 and "logs" not in result.meta, "the tool never ran"
    record = rt.audit.find(result.meta["call_id"])
    assert record is not None and record["input"] is None and record["input_digest"] is None


@pytest.mark.parametrize("who", ["principal", "tool"])
def test_a_lone_surrogate_in_a_principal_or_tool_name_is_refused_before_the_call(
    rt: glovebox.Runtime, who: str
) -> None:
    name, principal = ("echo", "ann\ud800") if who == "principal" else ("ec\udc80ho", "ann")
    result = call_once(rt, name, {"q": 1}, principal=principal)
    assert result.code == "invalid_input" and result.error is not None
    assert "holds a lone surrogate: it must be valid Unicode" in result.error.message
    assert result.meta["fuel_used"] == 0 and "logs" not in result.meta, "the tool never ran"
    escaped = {"principal": "ann\\ud800", "tool": "ec\\udc80ho"}[who]
    assert result.meta[who] == escaped
    record = rt.audit.find(result.meta["call_id"])
    assert record is not None and record[who] == escaped
    verified = CliRunner().invoke(cli, ["--home", str(rt.home), "audit", "verify"], catch_exceptions=False)
    assert verified.exit_code == 0, verified.output


ROW = {"outcome": "ok", "fuel_used": 0, "duration_ms": 0.0, "egress": {}}


def test_the_audit_log_escapes_lone_surrogates_before_hashing(tmp_path: Path) -> None:
    log = AuditLog(tmp_path)
    try:
        log.append({"call_id": "c1", "principal": "\ud800", "tool": "t\udfff", **ROW})
        log.append({"call_id": "c2", "principal": "p", "tool": "t", "input": {"k": "\udc00"}, **ROW})
        verified = log.verify()
        assert verified.ok and verified.rows == 2
        first, second = log.records()
        assert (first["principal"], first["tool"]) == ("\\ud800", "t\\udfff")
        assert second["input"] == '{"k": "\\udc00"}', "the JSON escape of the same string"
    finally:
        log.close()


# -- a hostile guest: invalid_output -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        ("deep 100000", f"the tool's output is nested deeper than {MAX_DEPTH} levels"),
        (f"deep {MAX_DEPTH + 1}", f"the tool's output is nested deeper than {MAX_DEPTH} levels"),
        ("number 1000000", "the tool's output holds a number of 1000000 characters"),
        ("fraction 100000", "the tool's output holds a number of 100002 characters"),
        ("overflow 400", "the tool's output holds the number 1e400, out of the range of a double"),
        ("surrogate 0", "the tool's output holds a lone surrogate (U+D800) in a string at /text"),
        ("surrokey 0", "the tool's output holds a lone surrogate (U+DC00) in a string at /"),
        ("nan 0", "the tool's output is not JSON: NaN is not a JSON value"),
    ],
)
def test_hostile_outputs_are_invalid_output_with_one_audit_row(
    rt: glovebox.Runtime, request_: str, problem: str
) -> None:
    result = call_once(rt, "hostile-json", request_)
    assert result.code == "invalid_output" and result.error is not None
    assert result.error.message.startswith(problem)
    assert result.meta["fuel_used"] > 0, "the tool ran"
    assert len(result.error.details["excerpt"]) <= 200


def test_output_at_the_limits_is_ok(rt: glovebox.Runtime) -> None:
    assert call_once(rt, "hostile-json", f"deep {MAX_DEPTH}").output == nested(MAX_DEPTH)
    assert call_once(rt, "hostile-json", f"number {MAX_NUMBER_CHARS}").output == int("7" * MAX_NUMBER_CHARS)


@pytest.mark.parametrize("text", ['{"a": [1, 2.5, "x"]}', ' {"a": 1}', '{"a": 1}\n', "1", '"s"', "[] ", "\t[]"])
def test_loads_reads_what_json_reads_with_or_without_whitespace_around(text: str) -> None:
    assert loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ['{"a": 1} x', "1 2", "[1,]", "{", "", " ", "nul"])
def test_loads_refuses_with_the_words_json_uses(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    words = f"is not JSON: {expected.value.msg} at line 1 column {expected.value.colno}"
    with pytest.raises(JsonRejected, match=re.escape(words)):
        loads(text)
