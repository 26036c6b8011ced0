"""Guards around a tool's calls: the policy's ``guards`` section and what it means for one tool.

A guard entry names a tool pattern (no principals: a guard is about how a
tool behaves, whoever calls it) and any of:

- ``idempotent``: whether running the tool twice with one input does no more
  than running it once. Unset, a tool imported from an API is idempotent when
  its operation is a read (HTTP ``GET``, ``HEAD`` or ``OPTIONS``, not a
  GraphQL mutation); every other tool is not.
- ``retries``: how often a failed call is tried again, and after how long.
  Only codes that are retryable may be listed (a ``timeout`` is not: the
  attempt that timed out used the call's whole deadline), and retries apply
  only to an idempotent tool: a write is never retried unless the policy
  declares it idempotent.
- ``breaker``: a circuit breaker per tool and per upstream host. After
  ``failures`` failed calls (codes in ``count``) within ``window_ms`` it opens:
  calls fail fast with ``circuit_open`` for ``open_ms``; then one probe call
  goes through (half-open), and its success closes the breaker, its failure
  opens it again. The state lives in the home (``glovebox.guards``).
- ``checks``: what a successful output must also pass before it reaches the
  caller: a size bound, an extra JSON Schema, forbidden patterns (ECMA-262,
  matched by the host's bounded engine) and, unless turned off, that it
  carries none of the call's own secrets in any encoding the scrubber knows.
  A failed check turns the call into ``evaluation_failed``.

For each field the first matching entry (in document order) that sets it
wins; :func:`plan_guards` says which, for ``policy explain``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from ..core._frozen import Frozen
from ..model._result import ToolInfo
from ..schema._ecmaregex import PatternError, compile_pattern
from ..schema._schemarules import check_schema
from ._patterns import match_tool

__all__ = [
    "NO_GUARDS",
    "Breaker",
    "BreakerCode",
    "Checks",
    "GuardRule",
    "Guards",
    "Retries",
    "RetryCode",
    "plan_guards",
]

#: The codes a retry may be asked for: those the host marks retryable.
RetryCode = Literal["upstream_error", "overloaded", "rate_limited"]
#: HTTP methods that read (RFC 9110 "safe" methods).
READS = frozenset({"GET", "HEAD", "OPTIONS"})


class Retries(Frozen):
    """How a failed call of an idempotent tool is tried again (each attempt a fresh sandbox)."""

    attempts: int = Field(ge=1, le=10, description="Attempts in all, the first included (1: no retry).")
    backoff_ms: int = Field(
        100, ge=0, le=60_000, description="Wait before the second attempt; doubled before each further one."
    )
    max_backoff_ms: int = Field(2_000, ge=0, le=600_000, description="The longest wait between two attempts.")
    retry_on: list[RetryCode] = Field(
        ["upstream_error", "overloaded"],
        min_length=1,
        description="The error codes that are retried (retryable codes only).",
    )

    @model_validator(mode="after")
    def _backoff_fits(self) -> Self:
        if self.max_backoff_ms < self.backoff_ms:
            raise ValueError(f"max_backoff_ms ({self.max_backoff_ms}) is below backoff_ms ({self.backoff_ms})")
        return self

    def delay_ms(self, attempt: int, rng: random.Random | None = None) -> float:
        """The wait before attempt ``attempt`` (2 or more): exponential, capped, with equal jitter."""
        ceiling = float(min(self.max_backoff_ms, self.backoff_ms * 2 ** (attempt - 2)))
        return ceiling / 2 + (rng or _RNG).uniform(0, ceiling / 2)


_RNG = random.Random()

#: The failures a breaker may count: those an unhealthy tool or upstream causes.
BreakerCode = Literal["upstream_error", "timeout", "guest_trap", "internal_error"]


class Breaker(Frozen):
    """A circuit breaker for a tool's calls and for the upstream hosts they reach."""

    failures: int = Field(5, ge=1, le=10_000, description="Failures within window_ms that open the breaker.")
    window_ms: int = Field(30_000, ge=1, le=86_400_000, description="How far back failures are counted.")
    open_ms: int = Field(
        10_000, ge=1, le=86_400_000, description="How long an open breaker refuses before a probe may go through."
    )
    scopes: list[Literal["tool", "host"]] = Field(
        ["tool", "host"], min_length=1, description="What is broken off: the tool, each upstream host, or both."
    )
    count: list[BreakerCode] = Field(
        ["upstream_error", "timeout"], min_length=1, description="The error codes that count as failures."
    )


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


class GuardRule(Frozen):
    """Guards for the calls of matching tools, whoever calls them."""

    tool: str = Field("*", description="Tool name pattern (fnmatch-style; 'name@version' when it contains '@').")
    idempotent: bool | None = Field(
        None,
        description="Whether the tool may safely run twice on one input (default: imported API reads only).",
    )
    retries: Retries | None = Field(None, description="Retries of failed calls (idempotent tools only).")
    breaker: Breaker | None = Field(None, description="A circuit breaker for the tool and its upstream hosts.")
    checks: Checks | None = Field(None, description="Checks on a successful output (else evaluation_failed).")


@dataclass(frozen=True)
class Guards:
    """The guards in force for one tool, and why (``policy explain``)."""

    idempotent: bool = False
    retries: Retries | None = None
    breaker: Breaker | None = None
    checks: Checks | None = None
    reason: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "idempotent": self.idempotent,
            "retries": self.retries.model_dump() if self.retries is not None else None,
            "breaker": self.breaker.model_dump() if self.breaker is not None else None,
            "checks": self.checks.model_dump() if self.checks is not None else None,
            "reason": list(self.reason),
        }


NO_GUARDS = Guards()


def idempotent_by_default(info: ToolInfo) -> bool:
    """Whether a tool is idempotent when no guard entry says: an imported read."""
    operation = info.manifest.operation
    if operation is None:
        return False
    if operation.graphql is not None:  # sent as a POST either way: the document says which it is
        return not operation.graphql.query.lstrip().startswith("mutation")
    return operation.method in READS


def plan_guards(rules: list[GuardRule], info: ToolInfo) -> Guards:
    """The guards of ``info`` under the policy's ``guards`` entries."""
    matching = [(i, rule) for i, rule in enumerate(rules) if match_tool(rule.tool, info.name, info.version)]
    if not matching:
        return NO_GUARDS if not idempotent_by_default(info) else Guards(idempotent=True)
    reason: list[str] = []
    declared = next(((i, r.idempotent) for i, r in matching if r.idempotent is not None), None)
    if declared is not None:
        idempotent = bool(declared[1])
        reason.append(f"guards[{declared[0]}] declares {info.name} {'' if idempotent else 'not '}idempotent")
    else:
        idempotent = idempotent_by_default(info)
        kind = "an imported read" if idempotent else "not an imported read"
        reason.append(f"{info.name} is {kind}: {'' if idempotent else 'not '}idempotent by default")
    retries = next(((i, r.retries) for i, r in matching if r.retries is not None), None)
    chosen = None
    if retries is not None:
        index, chosen = retries
        if idempotent:
            reason.append(f"guards[{index}] retries {list(chosen.retry_on)} up to {chosen.attempts} attempts")
        else:
            reason.append(f"guards[{index}] retries are not applied: {info.name} is not idempotent")
            chosen = None
    breaker = next(((i, r.breaker) for i, r in matching if r.breaker is not None), None)
    if breaker is not None:
        index, rule = breaker
        reason.append(
            f"guards[{index}] breaks off {' and '.join(rule.scopes)} after {rule.failures} failures"
            f" ({', '.join(rule.count)}) within {rule.window_ms} ms, for {rule.open_ms} ms"
        )
    checks = next(((i, r.checks) for i, r in matching if r.checks is not None), None)
    if checks is not None:
        reason.append(f"guards[{checks[0]}] checks every successful output")
    return Guards(idempotent, chosen, breaker[1] if breaker else None, checks[1] if checks else None, tuple(reason))
