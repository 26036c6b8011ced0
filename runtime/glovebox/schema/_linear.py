"""The linear-time validator: jsonschema-rs, for the schemas it checks as the host must.

jsonschema-rs (Rust) passes the official JSON-Schema-Test-Suite for drafts 4,
6, 7, 2019-09 and 2020-12, ``optional/ecmascript-regex`` included (the copy in
``tests/schema/suite`` is run through the host's entry points), at a fraction of
jsonschema's cost. Its ``pattern`` keywords run in Rust's ``regex`` crate, which
never backtracks, so a schema may use ``unevaluatedProperties`` beside
``patternProperties`` when it checks with this engine.

:func:`validator` builds it for a schema only when every pattern of the schema
runs in the linear engine of ``_ecmaregex`` (the same options), its dialect is
one jsonschema-rs implements (not draft 3), and it builds offline; otherwise
the caller keeps jsonschema with the budgeted engine. Formats are annotations,
as they are for jsonschema without a format checker. Nothing is fetched:
``offline=True`` refuses every remote resource.

jsonschema-rs is imported when the first validator is built, not with the package.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._ecmaregex import PatternError, linear, linear_options

__all__ = ["best_error", "validator"]

_DRAFT3 = ("http://json-schema.org/draft-03/schema", "http://json-schema.org/draft-03/schema#")
_BRANCHES = frozenset({"anyOf", "oneOf"})


def validator(schema: dict[str, Any] | bool, patterns: Iterable[str]) -> Any:
    """jsonschema-rs's validator of ``schema`` whose ``patterns`` are all listed; None when it may not check it.

    >>> validator({"patternProperties": {"^x": True}, "unevaluatedProperties": False}, ["^x"]).is_valid({"y": 1})
    False
    >>> validator({"pattern": "(?<=a)b"}, ["(?<=a)b"]) is None  # lookbehind: the budgeted engine's
    True
    """
    if isinstance(schema, dict) and schema.get("$schema") in _DRAFT3:
        return None
    try:
        if any(linear(pattern) is None for pattern in patterns):
            return None
    except PatternError:
        return None
    import jsonschema_rs

    try:
        return jsonschema_rs.validator_for(
            schema, validate_formats=False, pattern_options=linear_options(), offline=True
        )
    except (ValueError, TypeError, OverflowError):  # its ValidationError and ReferencingError are ValueErrors
        return None


def best_error(errors: Iterable[Any]) -> Any:
    """The error that says most about what is wrong, as jsonschema's ``best_match`` chooses.

    The shallowest error of all wins; a failed ``anyOf``/``oneOf`` is replaced by the deepest
    error of its branches (one that is not a type mismatch when there is one), unless two
    branches fail equally deep.
    """
    best = min(errors, key=lambda error: len(error.instance_path), default=None)
    while best is not None and best.kind.name in _BRANCHES:
        context = [error for branch in getattr(best.kind, "context", ()) for error in branch]
        if not context:
            break
        ranked = sorted(context, key=lambda error: (-len(error.instance_path), error.kind.name == "type"))
        if len(ranked) > 1 and _rank(ranked[0]) == _rank(ranked[1]):
            break
        best = ranked[0]
    return best


def _rank(error: Any) -> tuple[int, bool]:
    return (len(error.instance_path), error.kind.name == "type")
