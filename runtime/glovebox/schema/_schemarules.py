"""What a tool's JSON Schema may contain, checked when its manifest is parsed.

Besides the meta-schema of its dialect, a schema is refused, naming the place
(a JSON pointer into the schema), when it:

- names a ``$schema`` dialect that the host does not bundle;
- has a ``$ref``, ``$dynamicRef`` or ``$recursiveRef`` that leaves the
  document: references resolve within the schema only (``#/...`` pointers,
  anchors, ``$defs``, subschemas with their own ``$id``) or to a bundled
  meta-schema; the host never fetches a schema;
- has a ``pattern`` or a ``patternProperties`` name that is not an ECMA-262
  regex the host can run (see ``_ecmaregex``);
- uses ``unevaluatedProperties`` in a schema that has ``patternProperties``
  and is not checked by the linear-time validator (``_linear``: a pattern that
  needs backtracking, or draft 3): jsonschema would match those patterns for
  that keyword outside the host's bounded regex engines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urldefrag, urljoin

from . import _linear
from ._ecmaregex import PatternError, compile_pattern

__all__ = ["check_schema", "schema_patterns"]

_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_DATA = frozenset({"const", "enum", "default", "examples"})
_NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})


@dataclass
class _Found:
    """What a walk over a schema collected; places are JSON pointers."""

    ids: set[str] = field(default_factory=set)
    refs: list[tuple[str, str, str]] = field(default_factory=list)  # (place, reference, resolved target)
    dialects: list[tuple[str, str]] = field(default_factory=list)
    patterns: list[tuple[str, str]] = field(default_factory=list)
    keywords: dict[str, str] = field(default_factory=dict)  # first place of each keyword


def check_schema(schema: dict[str, Any] | bool) -> None:
    """Raise ValueError, naming the place, unless ``schema`` is a JSON Schema the host may use."""
    import jsonschema

    found = _walk(schema)
    for place, dialect in found.dialects:
        _check_dialect(place, dialect)
    for place, pattern in found.patterns:
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            raise ValueError(f"the pattern at {place} cannot be used: {exc}") from exc
    for place, ref, target in found.refs:
        if target and target not in found.ids and not _is_dialect(target):
            raise ValueError(
                f"{place} = {ref!r} points outside the schema; references resolve within the schema only "
                "(#/... pointers, anchors, $defs, embedded $id) and the host never fetches one"
            )
    if "unevaluatedProperties" in found.keywords and "patternProperties" in found.keywords:
        if _linear.validator(schema, [pattern for _, pattern in found.patterns]) is None:
            raise ValueError(
                f"unevaluatedProperties at {found.keywords['unevaluatedProperties']} cannot be used in a schema "
                f"with patternProperties (at {found.keywords['patternProperties']}) unless every pattern of the "
                "schema runs in the linear-time engine (no lookaround, backreferences or \\b)"
            )
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema, format_checker=_format_checker(validator))  # type: ignore[arg-type,call-arg]
    except jsonschema.exceptions.SchemaError as exc:
        where = "/" + "/".join(str(p) for p in exc.absolute_path)
        raise ValueError(f"not a valid JSON Schema at {where}: {exc.message}") from exc


def schema_patterns(schema: Any) -> list[str]:
    """Every ``pattern`` and ``patternProperties`` name of ``schema``, where it is a schema.

    >>> schema_patterns({"properties": {"pattern": {"pattern": "^a"}}, "enum": [{"pattern": "x"}]})
    ['^a']
    """
    return [pattern for _, pattern in _walk(schema).patterns]


def _walk(schema: Any) -> _Found:
    found = _Found()
    stack: list[tuple[Any, str, str]] = [(schema, "", "")]
    while stack:
        node, place, base = stack.pop()
        if not isinstance(node, dict):
            continue
        base = _visit(node, place, base, found)
        for key, value in node.items():
            where = f"{place}/{_escape(key)}"
            if key in _DATA:
                continue
            if key in _NAMED and isinstance(value, dict):
                stack.extend((sub, f"{where}/{_escape(name)}", base) for name, sub in value.items())
            elif isinstance(value, dict):
                stack.append((value, where, base))
            elif isinstance(value, list):
                stack.extend((item, f"{where}/{index}", base) for index, item in enumerate(value))
    return found


def _visit(node: dict[str, Any], place: str, base: str, found: _Found) -> str:
    """Record what ``node`` itself says; return the base URI of its subschemas."""
    for key in ("$id", "id"):
        if isinstance(node.get(key), str):
            base = urljoin(base, node[key])
            found.ids.add(urldefrag(base).url)
    if isinstance(node.get("$schema"), str):
        found.dialects.append((f"{place}/$schema", node["$schema"]))
    for key in _REFS:
        if isinstance(node.get(key), str):
            found.refs.append((f"{place}/{key}", node[key], urldefrag(urljoin(base, node[key])).url))
    if isinstance(node.get("pattern"), str):
        found.patterns.append((f"{place}/pattern", node["pattern"]))
    if isinstance(node.get("patternProperties"), dict):
        found.patterns.extend((f"{place}/patternProperties/{_escape(p)}", p) for p in node["patternProperties"])
    for key in ("unevaluatedProperties", "patternProperties"):
        if key in node:
            found.keywords.setdefault(key, f"{place}/{key}")
    return base


def _check_dialect(place: str, dialect: str) -> None:
    if not _is_dialect(dialect):
        raise ValueError(
            f"{place} = {dialect!r} is not a JSON Schema dialect this host knows "
            "(use https://json-schema.org/draft/2020-12/schema or another published draft)"
        )


def _is_dialect(uri: str) -> bool:
    from referencing.jsonschema import UnknownDialect, specification_with

    try:
        specification_with(uri)
    except UnknownDialect:
        return False
    return True


def _format_checker(validator: Any) -> Any:
    """The dialect's format checker, with ``regex`` meaning an ECMA-262 regex this host can run."""
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(validator.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=PatternError)(compile_pattern)
    return checker


def _escape(token: Any) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")
