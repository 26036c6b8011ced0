"""Tool schemas attacked by a hostile tool author: remote references, catastrophic
regexes, and patterns in ECMA-262 (not Python) syntax."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.model._manifest import parse_manifest
from glovebox.schema import _ecmaregex
from glovebox.schema._ecmaregex import PatternError, PatternTimeout, compile_pattern, search, time_budget
from glovebox.schema._schemas import SchemaCheck

CATASTROPHIC = "^(a|a)+$"  # exponential backtracking, even for the regex module
# The same, with a lookahead the linear engine cannot run: the budgeted engine backtracks on it.
BACKTRACKING = "^(?=a)(a|a)+$"
# Linear, but hostile to a DFA: the linear engine would take ~2 µs a character on it.
DFA_HOSTILE = "a[ab]{20}c"


class SchemaServer:
    """A server on 127.0.0.1 that serves a schema and counts every request it gets."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                body = json.dumps({"type": "integer"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/schema+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def server() -> Iterator[SchemaServer]:
    served = SchemaServer()
    yield served
    served.close()


@pytest.fixture
def echo(build_guest: Callable[[str], Path]) -> Path:
    return build_guest("echo")


def manifest(input_schema: Any = True, output_schema: Any = True, timeout_ms: int = 2000) -> dict[str, Any]:
    return {
        "name": "schematic",
        "input_schema": input_schema,
        "output_schema": output_schema,
        "limits": {"timeout_ms": timeout_ms},
    }


# -- remote references ---------------------------------------------------------------


def remote_schemas(url: str) -> list[tuple[dict[str, Any], str]]:
    """Schemas that would make jsonschema fetch from ``url``, with the place each refusal names."""
    return [
        ({"$ref": f"{url}/schema.json"}, "/$ref"),
        ({"type": "object", "properties": {"q": {"$ref": f"{url}/q.json#/x"}}}, "/properties/q/$ref"),
        ({"$dynamicRef": f"{url}/meta#node"}, "/$dynamicRef"),
        ({"$schema": f"{url}/dialect"}, "/$schema"),
        ({"$id": f"{url}/root.json", "$ref": "other.json"}, "/$ref"),
        ({"items": {"$id": f"{url}/dir/", "$ref": "item.json"}}, "/items/$ref"),
        ({"anyOf": [{"type": "null"}, {"$ref": f"{url}/a.json"}]}, "/anyOf/1/$ref"),
    ]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jsonschema warns before a fetch; let it fetch
def test_registration_refuses_every_remote_reference_and_fetches_nothing(
    runtime: glovebox.Runtime, echo: Path, server: SchemaServer
) -> None:
    for schema, place in remote_schemas(server.url):
        with pytest.raises(glovebox.InvalidManifest) as refused:
            runtime.register(echo, manifest(input_schema=schema))
        assert refused.value.code == "invalid_manifest"
        assert f"input_schema: {place} = " in refused.value.message, refused.value.message
    with pytest.raises(glovebox.InvalidManifest, match="output_schema: /\\$ref"):
        runtime.register(echo, manifest(output_schema={"$ref": f"{server.url}/out.json"}))
    assert runtime.tools() == []
    assert server.hits == []


def test_local_references_and_embedded_ids_still_resolve(runtime: glovebox.Runtime, echo: Path) -> None:
    schema = {
        "$id": "https://tools.example/schematic.json",
        "$defs": {
            "count": {"type": "integer", "minimum": 0},
            "label": {"$id": "label.json", "type": "string", "maxLength": 3},
        },
        "type": "object",
        "properties": {
            "n": {"$ref": "#/$defs/count"},
            "tag": {"$ref": "label.json"},
            "again": {"$ref": "https://tools.example/schematic.json#/$defs/count"},
        },
    }
    runtime.register(echo, manifest(input_schema=schema))
    assert runtime.call("schematic", {"n": 1, "tag": "abc", "again": 2}).ok
    bad = runtime.call("schematic", {"n": 1, "tag": "abcd"})
    assert bad.code == "invalid_input" and bad.error is not None
    assert bad.error.details["path"] == "/tag"
    assert runtime.call("schematic", {"again": -1}).code == "invalid_input"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jsonschema warns before a fetch; let it fetch
def test_a_stored_manifest_with_a_remote_reference_fetches_nothing(
    runtime: glovebox.Runtime, echo: Path, server: SchemaServer
) -> None:
    runtime.register(echo, manifest(input_schema={"type": "object"}))
    stored = json.loads(glovebox.Manifest(**manifest()).to_json())
    stored["input_schema"] = {"$ref": f"{server.url}/schema.json"}  # as an older host may have stored it
    db = sqlite3.connect(runtime.home / "registry.sqlite")
    with db:
        db.execute("UPDATE tools SET manifest = ?", (json.dumps(stored),))
    db.close()
    with glovebox.Runtime(home=runtime.home) as fresh:
        result = fresh.call("schematic", 5)
        assert result.code == "invalid_input" and result.error is not None
        assert "which the host does not fetch" in result.error.message
        assert result.error.details == {"ref": f"{server.url}/schema.json"}
        assert fresh.call("schematic", 6).code == "invalid_input", "the host survives and refuses again"
        assert fresh.audit.tail(1)[0]["outcome"] == "invalid_input"
    assert server.hits == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jsonschema warns before a fetch; let it fetch
def test_validators_retrieve_nothing(server: SchemaServer) -> None:
    check = SchemaCheck.for_schema({"$ref": f"{server.url}/out.json"}, "output")
    with pytest.raises(glovebox.InvalidOutput, match="which the host does not fetch"):
        check.validate(1)
    assert server.hits == []


# -- catastrophic patterns -----------------------------------------------------------


def test_a_catastrophic_input_pattern_is_cut_off_and_the_host_goes_on(runtime: glovebox.Runtime, echo: Path) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": BACKTRACKING}}}
    runtime.register(echo, manifest(input_schema=schema, timeout_ms=200))
    result = runtime.call("schematic", {"s": "a" * 40 + "b"})
    assert result.code == "invalid_input" and result.error is not None
    assert result.error.message == f"the input schema's pattern {BACKTRACKING!r} took too long to match (over 200 ms)"
    assert result.error.details == {"pattern": BACKTRACKING}
    assert result.meta["fuel_used"] == 0, "the guest never ran"
    assert runtime.call("schematic", {"s": "aaaa"}).output == {"s": "aaaa"}
    assert [row["outcome"] for row in runtime.audit.tail(2)] == ["invalid_input", "ok"]


def test_the_nested_quantifier_that_froze_re_is_answered(runtime: glovebox.Runtime, echo: Path) -> None:
    runtime.register(echo, manifest(input_schema={"type": "string", "pattern": "^(a+)+$"}))
    result = runtime.call("schematic", "a" * 50 + "!")
    assert result.code == "invalid_input" and result.error is not None
    assert 'does not match "^(a+)+$"' in result.error.message
    assert runtime.call("schematic", "a" * 50).ok


def test_a_catastrophic_output_pattern_is_invalid_output(runtime: glovebox.Runtime, echo: Path) -> None:
    runtime.register(echo, manifest(output_schema={"pattern": BACKTRACKING}, timeout_ms=100))
    result = runtime.call("schematic", "a" * 40 + "b")
    assert result.code == "invalid_output" and result.error is not None
    assert "took too long to match (over 100 ms)" in result.error.message


@pytest.mark.parametrize(
    "schema, value",
    [
        ({"patternProperties": {BACKTRACKING: {}}}, {"a" * 40 + "b": 1}),
        ({"patternProperties": {BACKTRACKING: {}}, "additionalProperties": False}, {"a" * 40 + "b": 1}),
        ({"propertyNames": {"pattern": BACKTRACKING}}, {"a" * 40 + "b": 1}),
        ({"items": {"pattern": BACKTRACKING}}, ["a" * 40 + "b"] * 50),
    ],
    ids=["patternProperties", "additionalProperties", "propertyNames", "items"],
)
def test_every_keyword_that_matches_a_pattern_is_bounded(schema: dict[str, Any], value: Any) -> None:
    check = SchemaCheck.for_schema(schema, "input", timeout_ms=50)
    assert check.fast is None, "a lookahead keeps the schema on the budgeted engine"
    with pytest.raises(glovebox.InvalidInput, match="took too long to match") as refused:
        check.validate(value)
    assert refused.value.details == {"pattern": BACKTRACKING}


@pytest.mark.parametrize(
    "schema, value",
    [
        ({"type": "string", "pattern": CATASTROPHIC}, "a" * 40 + "b"),
        ({"patternProperties": {CATASTROPHIC: {"type": "integer"}}}, {"a" * 40: "x"}),
        ({"patternProperties": {CATASTROPHIC: True}, "additionalProperties": False}, {"a" * 40 + "b": 1}),
        ({"propertyNames": {"pattern": CATASTROPHIC}}, {"a" * 40 + "b": 1}),
        ({"items": {"pattern": CATASTROPHIC}}, ["a" * 40 + "b"] * 50),
        ({"patternProperties": {CATASTROPHIC: True}, "unevaluatedProperties": False}, {"a" * 40 + "b": 1}),
    ],
    ids=["pattern", "patternProperties", "additionalProperties", "propertyNames", "items", "unevaluatedProperties"],
)
def test_a_catastrophic_pattern_is_answered_by_the_linear_engine(schema: dict[str, Any], value: Any) -> None:
    parse_manifest(manifest(input_schema=schema))
    check = SchemaCheck.for_schema(schema, "input", timeout_ms=50)
    assert check.fast is not None
    with pytest.raises(glovebox.InvalidInput, match="^input does not match the tool's input schema at /") as refused:
        check.validate(value)
    assert refused.value.code == "invalid_input"
    assert "took too long" not in refused.value.message


class Counting:
    """A jsonschema-rs validator that counts the values it is asked about."""

    def __init__(self, fast: Any) -> None:
        self.fast, self.seen = fast, 0

    def is_valid(self, value: Any) -> bool:
        self.seen += 1
        return bool(self.fast.is_valid(value))

    def iter_errors(self, value: Any) -> Any:
        return self.fast.iter_errors(value)


def test_a_long_value_under_a_hostile_linear_pattern_goes_to_the_budgeted_engine() -> None:
    check = SchemaCheck.for_schema({"type": "array", "items": {"type": "string", "pattern": DFA_HOSTILE}}, "input")
    assert check.fast is not None
    counting = check.fast = Counting(check.fast)
    long = ["ab" * (_ecmaregex.LINEAR_MAX_CHARS // 2)]
    with pytest.raises(glovebox.InvalidInput, match="does not match") as refused:
        check.validate(long)
    assert refused.value.details["path"] == "/0"
    assert counting.seen == 0, "a value over LINEAR_MAX_CHARS is never given to the linear engine"
    check.validate(["a" + "b" * 20 + "c"])
    assert counting.seen == 1


def test_a_long_text_under_a_hostile_linear_pattern_is_matched_by_the_budgeted_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []
    linear = _ecmaregex.linear

    def counting(pattern: str) -> Any:
        asked.append(pattern)
        return linear(pattern)

    monkeypatch.setattr(_ecmaregex, "linear", counting)
    text = "ab" * _ecmaregex.LINEAR_MAX_CHARS
    assert not search(DFA_HOSTILE, text)
    assert search(DFA_HOSTILE, text + "a" + "b" * 20 + "c")
    assert asked == []
    assert search(DFA_HOSTILE, "a" + "b" * 20 + "c")
    assert asked == [DFA_HOSTILE]


def test_other_threads_run_while_a_pattern_backtracks() -> None:
    slow = SchemaCheck.for_schema({"pattern": BACKTRACKING}, "input", timeout_ms=1000)
    quick = SchemaCheck.for_schema({"pattern": "^b"}, "input")
    started, outcome = threading.Event(), []

    def backtrack() -> None:
        started.set()
        try:
            slow.validate("a" * 40 + "b")
        except glovebox.InvalidInput as error:
            outcome.append(error.details)

    worker = threading.Thread(target=backtrack)
    worker.start()
    started.wait()
    quick.validate("b")  # needs the GIL, which the backtracking match has let go of
    still_matching = worker.is_alive()
    worker.join()
    assert still_matching
    assert outcome == [{"pattern": BACKTRACKING}]


def test_the_matches_of_one_check_share_its_budget() -> None:
    with time_budget(0.0):
        with pytest.raises(PatternTimeout):
            search("^a", "a")  # nothing is left for a second match, however cheap
    assert search("^a", "a")


def test_one_schema_check_per_call(runtime: glovebox.Runtime, echo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime.register(echo, manifest(input_schema={"type": "string", "pattern": "^a"}))
    matched: list[Any] = []
    for_schema = SchemaCheck.for_schema

    def counting(schema: Any, which: str, timeout_ms: int | None = None) -> SchemaCheck:
        check = for_schema(schema, which, timeout_ms)
        validate = check.validate
        check.validate = lambda value, *text: (matched.append(value), validate(value, *text))[1]  # type: ignore[method-assign]
        return check

    monkeypatch.setattr(SchemaCheck, "for_schema", counting)
    assert runtime.call("schematic", "abc").ok
    assert runtime.call("schematic", "xyz").code == "invalid_input"
    assert matched == ["abc", "xyz"]


# -- ECMA-262 patterns -----------------------------------------------------------------

ECMA_CASES = [
    ("^abc$", "abc", True),
    ("^abc$", "abc\n", False),  # $ matches only at the end
    ("^\\t$", "\t", True),
    ("^\\cC$", "\x03", True),
    ("^\\cc$", "\x03", True),
    ("^\\d$", "0", True),
    ("^\\d$", "\u09ea", False),  # BENGALI DIGIT FOUR: \d is ASCII
    ("^\\D$", "\u09ea", True),
    ("^\\w$", "a", True),
    ("^\\w$", "\u00e9", False),  # \w is ASCII
    ("^\\W$", "\u00e9", True),
    ("^\\s$", "\u00a0", True),  # \s is Unicode white space
    ("^\\s$", "\ufeff", True),
    ("^\\s$", "\u2003", True),
    ("^\\S$", "\u2003", False),
    ("^[\\s]$", "\u3000", True),
    ("^[^\\d]$", "5", False),
    ("^[\\W]$", "_", False),
    ("\\p{Letter}cole", "\u00e9cole", True),
    ("\\p{Letter}cole", "5cole", False),
    ("^\\p{digit}+$", "\u09ea\u09e8", True),
    ("\\wcole", "\u00e9cole", False),
    ("[a-z]cole", "\u00e9cole", False),
    ("^.$", "\n", False),
    ("^.$", "\u2028", False),
    ("^[^]$", "\n", True),
    ("[]", "anything", False),
    ("\\bb", "\u00e9b", True),  # \b is an ASCII word boundary
    ("^(?<n>a)\\k<n>$", "aa", True),
    ("(?<=a+)b", "aaab", True),
    ("^\\u{1F600}$", "\U0001f600", True),
    ("^a{2}$", "aa", True),
]


@pytest.mark.parametrize("pattern, text, matches", ECMA_CASES)
def test_patterns_mean_what_ecma_262_says(pattern: str, text: str, matches: bool) -> None:
    check = SchemaCheck.for_schema({"type": "string", "pattern": pattern}, "input")
    if matches:
        check.validate(text)
    else:
        with pytest.raises(glovebox.InvalidInput, match="does not match"):
            check.validate(text)


def test_pattern_properties_use_ecma_262_too() -> None:
    schema = {"type": "object", "patternProperties": {"^\\p{Letter}cole$": True}, "additionalProperties": False}
    check = SchemaCheck.for_schema(schema, "input")
    check.validate({"\u00e9cole": 1})
    with pytest.raises(glovebox.InvalidInput, match="Additional properties are not allowed") as refused:
        check.validate({"5cole": 1, "\u0661cole": 2})
    assert "'5cole', '\u0661cole' were unexpected" in refused.value.message
    digits = SchemaCheck.for_schema({"patternProperties": {"^\\d+$": {"type": "string"}}}, "input")
    digits.validate({"\u09ea": 1})  # not ASCII digits, so the subschema does not apply
    with pytest.raises(glovebox.InvalidInput, match='is not of type "string"'):
        digits.validate({"42": 1})


def test_unicode_property_escapes_register(runtime: glovebox.Runtime, echo: Path) -> None:
    runtime.register(echo, manifest(input_schema={"type": "string", "pattern": "^\\p{Letter}+$"}))
    assert runtime.call("schematic", "\u00e9cole").ok
    assert runtime.call("schematic", "ecole5").code == "invalid_input"


@pytest.mark.parametrize(
    "pattern", ["(?i)abc", "(?ims)abc", "(?P<name>x)", "(?P<n>a)(?P=n)", "(?#comment)a", "\\a", "\\A", "^(", "[a", "\\"]
)
def test_registration_refuses_patterns_that_are_not_ecma_262(pattern: str) -> None:
    for schema, place in [
        ({"pattern": pattern}, "/pattern"),
        ({"properties": {"x": {"patternProperties": {pattern: {}}}}}, "/properties/x/patternProperties/"),
    ]:
        with pytest.raises(glovebox.InvalidManifest) as refused:
            parse_manifest(manifest(input_schema=schema))
        assert refused.value.code == "invalid_manifest"
        assert f"the pattern at {place}" in refused.value.message, refused.value.message


@pytest.mark.parametrize("pattern", ["(?<name>x)", "(?<n>a)\\k<n>", "(?<=a+)b", "[]", "[^]", "\\cA", "\\/", "[&&~|]"])
def test_ecma_262_syntax_is_accepted(pattern: str) -> None:
    parse_manifest(manifest(input_schema={"pattern": pattern}))
    compile_pattern(pattern)


def test_unevaluated_properties_next_to_a_backtracking_pattern_is_refused() -> None:
    schema = {"allOf": [{"patternProperties": {"^x(?=y)": {}}}], "unevaluatedProperties": False}
    with pytest.raises(glovebox.InvalidManifest, match="unevaluatedProperties at /unevaluatedProperties") as refused:
        parse_manifest(manifest(input_schema=schema))
    assert "linear-time engine" in refused.value.message


def test_unevaluated_properties_next_to_linear_patterns_registers_and_checks(
    runtime: glovebox.Runtime, echo: Path
) -> None:
    schema = {"allOf": [{"patternProperties": {"^x\\d$": {"type": "integer"}}}], "unevaluatedProperties": False}
    runtime.register(echo, manifest(input_schema=schema))
    assert runtime.call("schematic", {"x1": 1}).ok
    refused = runtime.call("schematic", {"x1": 1, "y": 2})
    assert refused.code == "invalid_input" and refused.error is not None
    assert refused.error.details == {"path": "/", "schema_path": "/unevaluatedProperties"}
    assert "'y' was unexpected" in refused.error.message
    assert runtime.call("schematic", {"x\u0661": 1}).code == "invalid_input", "\\d is ASCII"


def test_a_pattern_error_in_a_stored_schema_is_invalid_input() -> None:
    check = SchemaCheck.for_schema({"pattern": "(?i)x"}, "input")  # registration would have refused it
    with pytest.raises(glovebox.InvalidInput, match="the input schema cannot be used"):
        check.validate("x")
    with pytest.raises(PatternError):
        compile_pattern("(?i)x")
