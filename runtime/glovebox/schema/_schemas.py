"""JSON in and out of a tool: input encoding and cached, bounded schema checks.

A validator never fetches anything: it is built with a ``referencing``
registry whose retrieval refuses every URI (the JSON Schema meta-schemas are
bundled), so a ``$ref`` to ``http://...`` that slipped past registration is an
error, not a request made by the host.

Two validators, one answer. A schema whose patterns all run in the linear
engine is checked by jsonschema-rs (``_linear``): accept and refuse, and the
refusal's message and places come from its errors. Otherwise, and for a value
whose JSON text is over ``LINEAR_MAX_CHARS`` when the schema has patterns,
jsonschema checks it with ``pattern``, ``patternProperties`` and
``additionalProperties`` matched by the ECMA-262 engines of ``_ecmaregex``, all
the matching of one validation sharing one time budget. A value jsonschema-rs
cannot take (a ``str`` subclass) goes to jsonschema too.

jsonschema is imported when the first validator is built, not with the package.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

from ..core._errors import CallError, InvalidInput, InvalidOutput
from ..core._jsonlimits import encode
from . import _linear
from ._ecmaregex import LINEAR_MAX_CHARS, PatternError, PatternTimeout, search, time_budget
from ._schemarules import schema_patterns

__all__ = ["MAX_INPUT_BYTES", "MAX_VALIDATION_S", "SchemaCheck", "encode_input", "sized_input"]

MAX_INPUT_BYTES = 4 * 1024 * 1024
#: The most time the patterns of one schema check may take, in seconds.
MAX_VALIDATION_S = 1.0
# Built once: ``json.dumps`` with options builds an encoder per call.
_ENCODE = encode
#: What ``_linear_error`` stands for when the linear engine could not judge a value at all.
_NOT_LINEAR: Any = object()


def _linear_error(fast: Any, value: Any) -> Any:
    """The linear engine's best error for ``value``: None when it is valid, ``_NOT_LINEAR`` when it names none."""
    if fast.is_valid(value):
        return None
    error = _linear.best_error(fast.iter_errors(value))
    return _NOT_LINEAR if error is None else error


class SchemaCheck:
    """A cached validator (jsonschema-rs, else jsonschema) that raises the glovebox error for its side."""

    def __init__(
        self,
        validator: Any,
        which: str,
        budget_s: float = MAX_VALIDATION_S,
        fast: Any = None,
        patterns: int = 0,
    ) -> None:
        #: The jsonschema validator (bounded patterns): the one that answers when ``fast`` may not.
        self.validator = validator
        self.which = which
        #: Seconds all the pattern matching of one ``validate`` may take.
        self.budget_s = budget_s
        #: jsonschema-rs's validator (see ``_linear``), or None when the schema needs jsonschema.
        self.fast = fast
        #: How many patterns the schema has: with any, a long value goes to ``validator``.
        self.patterns = patterns

    @classmethod
    def for_schema(cls, schema: dict[str, Any] | bool, which: str, timeout_ms: int | None = None) -> SchemaCheck:
        """The check of ``schema`` (its own ``$schema`` dialect, else draft 2020-12) for the ``which`` side.

        Its patterns get ``MAX_VALIDATION_S``, or the tool's ``timeout_ms`` when that is shorter.
        """
        import jsonschema

        base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        budget_s = MAX_VALIDATION_S if timeout_ms is None else min(MAX_VALIDATION_S, timeout_ms / 1000)
        patterns = schema_patterns(schema)
        fast = _linear.validator(schema, patterns)
        return cls(_bounded(base)(schema, registry=_offline_registry()), which, budget_s, fast, len(patterns))

    def validate(self, value: Any, text: str | None = None) -> None:
        """Raise InvalidInput (or InvalidOutput) unless ``value`` matches the schema.

        ``text``, when the caller has it, is ``value``'s JSON text as the input
        encoder writes it (``glovebox.core._jsonlimits.encode``), so it is not made twice.
        """
        fast = self.fast
        if fast is not None and (
            not self.patterns or len(text if text is not None else _ENCODE(value)) <= LINEAR_MAX_CHARS
        ):
            try:
                error = _linear_error(fast, value)
            except ValueError:  # a value it cannot read (a str subclass): the same value as plain JSON
                try:
                    error = _linear_error(fast, json.loads(_ENCODE(value)))
                except (TypeError, ValueError):
                    error = _NOT_LINEAR  # not JSON at all: jsonschema decides, and says why
            if error is None:
                return
            if error is not _NOT_LINEAR:
                self._refuse(error.message, error.instance_path, error.evaluation_path)
        from referencing.exceptions import Unresolvable

        budget_s = self.budget_s
        try:
            with time_budget(budget_s):
                errors = list(self.validator.iter_errors(value))
                error = _best_match(errors)
        except PatternTimeout as exc:
            raise self._error(
                f"the {self.which} schema's pattern {exc.pattern!r} took too long to match "
                f"(over {budget_s * 1000:.0f} ms)",
                {"pattern": exc.pattern},
            ) from exc
        except PatternError as exc:
            raise self._error(f"the {self.which} schema cannot be used: {exc}", {}) from exc
        except Unresolvable as exc:
            raise self._error(
                f"the {self.which} schema refers to {exc.ref!r}, which the host does not fetch", {"ref": exc.ref}
            ) from exc
        if error is not None:
            self._refuse(error.message, error.absolute_path, error.absolute_schema_path)

    def _refuse(self, message: str, path: Any, schema_path: Any) -> None:
        where = "/" + "/".join(str(p) for p in path)
        details = {"path": where, "schema_path": "/" + "/".join(str(p) for p in schema_path)}
        if self.which == "input":
            raise InvalidInput(f"input does not match the tool's input schema at {where}: {message}", details=details)
        raise InvalidOutput(
            f"the tool's output does not match its output schema at {where}: {message}", details=details
        )

    def _error(self, message: str, details: dict[str, Any]) -> CallError:
        if self.which == "input":
            return InvalidInput(message, details=details)
        return InvalidOutput(message, details=details)


def _best_match(errors: list[Any]) -> Any:
    """jsonschema's ``best_match``; the first error where it fails (draft 3's ``type`` of schemas)."""
    import jsonschema

    try:
        return jsonschema.exceptions.best_match(errors)
    except TypeError:
        return errors[0] if errors else None


def encode_input(value: Any) -> str:
    try:
        text = _ENCODE(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"input is not a JSON value: {exc}") from exc
    return sized_input(text)


def sized_input(text: str, size: int | None = None) -> str:
    """An input's JSON text, refused when it is over ``MAX_INPUT_BYTES`` (``size``: its UTF-8 bytes, if known)."""
    if size is None:
        size = len(text.encode("utf-8"))
    if size > MAX_INPUT_BYTES:
        raise InvalidInput(
            f"input is {size} bytes, over the {MAX_INPUT_BYTES}-byte limit", details={"input_bytes": size}
        )
    return text


@functools.cache
def _offline_registry() -> Any:
    """A ``referencing`` registry that retrieves nothing (jsonschema adds the bundled meta-schemas)."""
    from referencing import Registry
    from referencing.exceptions import NoSuchResource

    def refuse(uri: str) -> Any:
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

    return Registry(retrieve=refuse)  # type: ignore[call-arg]


@functools.cache
def _bounded(base: Any) -> Any:
    """``base`` with the keywords that match regexes replaced by bounded ECMA-262 ones."""
    import jsonschema

    keywords = {"pattern": _pattern, "patternProperties": _pattern_properties}
    keywords["additionalProperties"] = _additional_properties
    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base, {k: v for k, v in keywords.items() if k in base.VALIDATORS}
    )


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """jsonschema's ``additionalProperties``, with the patterns matched here."""
    if not validator.is_type(instance, "object"):
        return
    from jsonschema.exceptions import ValidationError

    properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = [k for k in instance if k not in properties and not any(search(p, k) for p in patterns)]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        listed = ", ".join(repr(key) for key in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {', '.join(map(repr, patterns))}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")
