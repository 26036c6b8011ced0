"""The official JSON-Schema-Test-Suite, every case, through the host's schema entry points.

Each schema goes through registration's rules (``check_schema``), then each value
through ``SchemaCheck`` twice: as the host builds it (jsonschema-rs when the schema
may use it) and with jsonschema alone (the budgeted engine), so the two validators
are held to the same answers. The only answers allowed to differ from the suite's:

- a schema that needs a remote document (``http://localhost:1234/...``) or a
  meta-schema the host does not bundle is refused at registration: the host
  never fetches one;
- ``format`` is an annotation (the suite's ``optional/format`` files assert it),
  as it was with jsonschema; ``format: regex`` values are checked against the
  host's ECMA-262 rules instead (``compile_pattern``, what registration uses);
- draft 3's optional ``format`` file, for the same reason.

jsonschema alone misses some optional cases jsonschema-rs gets right (``JSONSCHEMA_MISSES``); it
answers only for schemas jsonschema-rs may not check and for long values under patterns.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.schema._ecmaregex import PatternError, compile_pattern
from glovebox.schema._schemarules import check_schema
from glovebox.schema._schemas import SchemaCheck

SUITE = Path(__file__).parent / "suite"
DIALECTS = {
    "draft3": "http://json-schema.org/draft-03/schema#",
    "draft4": "http://json-schema.org/draft-04/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}
# Registration refuses these, naming why; every refusal must be one of them.
REFUSALS = ("points outside the schema", "is not a JSON Schema dialect this host knows")
UNEVALUATED_BESIDE_ADDITIONAL = "unevaluatedProperties with adjacent non-bool additionalProperties"
# (draft, file) or (draft, file, group) where jsonschema alone answers otherwise than the suite, and why.
JSONSCHEMA_MISSES = {
    ("draft7", "optional/content.json"): "contentEncoding and contentMediaType are not asserted",
    ("draft2019-09", "optional/dependencies-compatibility.json"): "draft 7's dependencies is not implemented",
    ("draft2020-12", "optional/dependencies-compatibility.json"): "draft 7's dependencies is not implemented",
    ("draft2019-09", "unevaluatedProperties.json", UNEVALUATED_BESIDE_ADDITIONAL): "keys it evaluated are not counted",
}


def cases(draft: str) -> list[tuple[str, dict[str, Any]]]:
    root = SUITE / draft
    return [(str(path.relative_to(root)), group) for path in sorted(root.rglob("*.json")) for group in load(path)]


def load(path: Path) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return groups


def with_dialect(schema: Any, draft: str) -> Any:
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": DIALECTS[draft], **schema}
    return schema


def registered(schema: Any) -> str | None:
    """None when registration takes ``schema``; else why it refused."""
    try:
        check_schema(schema)
    except ValueError as refused:
        return str(refused)
    return None


def answer(check: SchemaCheck, value: Any) -> bool:
    try:
        check.validate(value)
    except glovebox.InvalidInput as refused:
        assert refused.code == "invalid_input"
        assert "took too long" not in refused.message and "cannot be used" not in refused.message, refused.message
        return False
    return True


@pytest.mark.parametrize("draft", list(DIALECTS))
def test_every_case_of_the_suite(draft: str) -> None:
    tally: Counter[str] = Counter()
    wrong: list[str] = []
    for file, group in cases(draft):
        schema = with_dialect(group["schema"], draft)
        where = f"{draft}/{file}: {group['description']}"
        refusal = registered(schema)
        if refusal is not None:
            assert any(reason in refusal for reason in REFUSALS), f"{where}: refused: {refusal}"
            assert "localhost:1234" in json.dumps(schema), f"{where}: refused without needing a remote: {refusal}"
            tally["refused (needs a remote document)"] += len(group["tests"])
            continue
        host = SchemaCheck.for_schema(schema, "input")
        budgeted = SchemaCheck(host.validator, "input", host.budget_s)
        engine = "jsonschema-rs" if host.fast is not None else "jsonschema"
        for test in group["tests"]:
            expected = expectation(draft, file, schema, test)
            got, alone = answer(host, test["data"]), answer(budgeted, test["data"])
            missed = (draft, file) in JSONSCHEMA_MISSES or (draft, file, group["description"]) in JSONSCHEMA_MISSES
            if got != expected or (alone != expected and not missed):
                wrong.append(f"{where} / {test['description']}: host {got}, jsonschema {alone}, suite {expected}")
            tally[f"checked by {engine}"] += 1
    print(draft, dict(tally))
    assert wrong == []
    if draft != "draft3":
        assert tally["checked by jsonschema-rs"] > 0.95 * sum(tally.values()), tally


def expectation(draft: str, file: str, schema: Any, test: dict[str, Any]) -> bool:
    """The suite's answer, or the host's where the module docstring says it differs."""
    if file.startswith("optional/format/") or (draft == "draft3" and file == "optional/format.json"):
        return True  # format is an annotation
    return bool(test["valid"])


def test_format_regex_values_follow_the_hosts_ecma_262_rules() -> None:
    checked = 0
    for draft, file, group in [(d, file, group) for d in DIALECTS for file, group in cases(d)]:
        if not file.startswith("optional/") or not isinstance(group["schema"], dict):
            continue
        if group["schema"].get("format") != "regex":
            continue
        for test in group["tests"]:
            if not isinstance(test["data"], str):
                continue
            try:
                compile_pattern(test["data"])
                usable = True
            except PatternError:
                usable = False
            assert usable == test["valid"], f"{draft}/{file}: {group['description']} / {test['description']}"
            checked += 1
    assert checked > 0


def test_unevaluated_properties_beside_pattern_properties_now_registers() -> None:
    both = [
        group
        for file, group in cases("draft2020-12")
        if "unevaluatedProperties" in json.dumps(group["schema"]) and "patternProperties" in json.dumps(group["schema"])
    ]
    assert len(both) >= 5
    assert [registered(group["schema"]) for group in both] == [None] * len(both)
