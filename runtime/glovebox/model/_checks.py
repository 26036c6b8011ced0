"""Output checks: what a successful output must also pass, declared by a policy's guards or a manifest.

The same model serves both places (``guards[].checks`` in a policy,
``checks`` in a tool's manifest). When both declare checks, the call is held
to the tighter of the two (``glovebox.runtime._checks``): a manifest may add
checks, never lift the policy's.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from ..core._frozen import Frozen
from ..schema._ecmaregex import PatternError, compile_pattern
from ..schema._schemarules import check_schema

__all__ = ["EVALUATOR_PATTERN", "SCAN_ORDER", "Checks", "SecretScanAction"]

SecretScanAction = Literal["redact", "refuse", "warn", "off"]
#: The scan actions from the loosest to the tightest (a manifest may tighten the policy's, never loosen it).
SCAN_ORDER: tuple[SecretScanAction, ...] = ("off", "warn", "redact", "refuse")

#: An evaluator tool: ``name`` or ``name@version``, as a call names a tool.
EVALUATOR_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}(@\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?)?$"


class Checks(Frozen):
    """What a successful output must pass before it reaches the caller (else ``evaluation_failed``)."""

    max_output_bytes: int | None = Field(None, gt=0, description="The largest output (its JSON text, in bytes).")
    output_schema: dict[str, Any] | bool | None = Field(
        None, description="A JSON Schema the output must match, besides the tool's own output schema."
    )
    forbidden_patterns: list[str] = Field(
        [], max_length=64, description="ECMA-262 patterns that must match nowhere in the output's JSON text."
    )
    secrets: bool = Field(True, description="Refuse an output that carries one of the call's own secrets.")
    secret_scan: SecretScanAction | None = Field(
        None,
        description=(
            "What a secret-shaped value (known token formats, JWTs, PEM private keys, also inside base64) in the"
            " output or the logs gets: redact (the default), refuse (evaluation_failed), warn (kept, recorded) or off."
        ),
    )
    secret_entropy_bits: float | None = Field(
        None,
        ge=3.0,
        le=6.5,
        description="Also treat strings of 24+ letters and digits with at least this Shannon entropy per character"
        " as secrets (4.5 catches random base64 tokens, spares hex digests); off when unset.",
    )
    evaluators: list[str] = Field(
        [],
        max_length=4,
        description=(
            "Registered tools that judge the output: each gets {tool, input, output} and answers {pass, reason};"
            " run in their own sandbox under the policy, for the same principal."
        ),
    )

    @field_validator("output_schema")
    @classmethod
    def _usable_schema(cls, schema: dict[str, Any] | bool | None) -> dict[str, Any] | bool | None:
        if schema is not None:
            check_schema(schema)
        return schema

    @field_validator("forbidden_patterns")
    @classmethod
    def _usable_patterns(cls, patterns: list[str]) -> list[str]:
        for index, pattern in enumerate(patterns):
            try:
                compile_pattern(pattern)
            except PatternError as exc:
                raise ValueError(f"forbidden_patterns[{index}]: {exc}") from exc
        return patterns

    @field_validator("evaluators")
    @classmethod
    def _tool_names(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            if not re.match(EVALUATOR_PATTERN, name):
                raise ValueError(f"evaluators[{index}]: {name!r} is not a tool name (NAME or NAME@VERSION)")
        if len(set(names)) != len(names):
            raise ValueError("evaluators: a tool is named twice")
        return names
