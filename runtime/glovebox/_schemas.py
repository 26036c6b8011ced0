"""JSON in and out of a tool: input encoding and cached schema checks.

jsonschema is imported when the first validator is built, not with the package.
"""

from __future__ import annotations

import json
from typing import Any

from ._errors import InvalidInput, InvalidOutput

__all__ = ["MAX_INPUT_BYTES", "SchemaCheck", "encode_input"]

MAX_INPUT_BYTES = 4 * 1024 * 1024


class SchemaCheck:
    """A cached jsonschema validator that raises the glovebox error for its side."""

    def __init__(self, validator: Any, which: str) -> None:
        self.validator = validator
        self.which = which

    @classmethod
    def for_schema(cls, schema: dict[str, Any] | bool, which: str) -> SchemaCheck:
        """The check of ``schema`` (its own ``$schema`` dialect, else draft 2020-12) for the ``which`` side."""
        import jsonschema

        validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        return cls(validator(schema), which)

    def validate(self, value: Any) -> None:
        if self.validator.is_valid(value):
            return
        import jsonschema

        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is None:
            return
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        details = {"path": where, "schema_path": "/" + "/".join(str(p) for p in error.absolute_schema_path)}
        if self.which == "input":
            raise InvalidInput(
                f"input does not match the tool's input schema at {where}: {error.message}", details=details
            )
        raise InvalidOutput(
            f"the tool's output does not match its output schema at {where}: {error.message}", details=details
        )


def encode_input(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"input is not a JSON value: {exc}") from exc
    size = len(text.encode("utf-8"))
    if size > MAX_INPUT_BYTES:
        raise InvalidInput(
            f"input is {size} bytes, over the {MAX_INPUT_BYTES}-byte limit", details={"input_bytes": size}
        )
    return text
