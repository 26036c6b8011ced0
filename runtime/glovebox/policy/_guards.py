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
  Evaluator tools (``checks.evaluators``) are registered tools that judge the
  output: each gets ``{tool, input, output}`` and answers ``{pass, reason}``.
  A failed check turns the call into ``evaluation_failed``. A manifest may
  declare ``checks`` too; the call is then held to both.
- ``output_validation``: what a mismatch between a successful output and the
  tool's own output schema does: ``enforce`` (``invalid_output``), ``warn``
  (the output is answered, the mismatch in ``meta.warnings``) or ``off``. The
  policy's word wins over the manifest's; without either, an imported API
  operation warns and every other tool enforces.
- ``fallback``: tools tried in turn, for the same principal, when the tool
  answers a retryable failure (after its retries) or its breaker is open.
  A tool that is not idempotent falls back only when it did not run
  (``circuit_open``, ``overloaded``, ``rate_limited``): a write that may have
  happened is not made again elsewhere. The fallback's envelope says
  ``meta.routed_from``.

For each field the first matching entry (in document order) that sets it
wins; :func:`plan_guards` says which, for ``policy explain``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from ..core._frozen import Frozen
from ..model._checks import EVALUATOR_PATTERN, Checks
from ..model._manifest import OutputValidation
from ..model._result import ToolInfo
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
    output_validation: OutputValidation | None = Field(
        None,
        description="What an output that misses the tool's output schema does: enforce (invalid_output), warn "
        "(answered, the mismatch in meta.warnings) or off (default: the manifest's; imported operations warn).",
    )
    fallback: list[str] | None = Field(
        None,
        max_length=8,
        description="Tools tried in turn, for the same principal, when this one answers a retryable failure.",
    )

    @field_validator("fallback")
    @classmethod
    def _tool_names(cls, names: list[str] | None) -> list[str] | None:
        for index, name in enumerate(names or ()):
            if not re.match(EVALUATOR_PATTERN, name):
                raise ValueError(f"fallback[{index}]: {name!r} is not a tool name (NAME or NAME@VERSION)")
        if names is not None and len(set(names)) != len(names):
            raise ValueError("fallback: a tool is named twice")
        return names


@dataclass(frozen=True)
class Guards:
    """The guards in force for one tool, and why (``policy explain``)."""

    idempotent: bool = False
    retries: Retries | None = None
    breaker: Breaker | None = None
    checks: Checks | None = None
    reason: tuple[str, ...] = ()
    fallback: tuple[str, ...] = ()
    #: The policy's word on output validation (None: the manifest's, or its default).
    output_validation: OutputValidation | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "idempotent": self.idempotent,
            "retries": self.retries.model_dump() if self.retries is not None else None,
            "breaker": self.breaker.model_dump() if self.breaker is not None else None,
            "checks": self.checks.model_dump() if self.checks is not None else None,
            "reason": list(self.reason),
            "fallback": list(self.fallback),
            "output_validation": self.output_validation,
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
    declared_checks = getattr(info.manifest, "checks", None)
    reason: list[str] = []
    if declared_checks is not None:
        reason.append(f"the manifest of {info.name} checks every successful output (with the policy's, if any)")
    if not matching:
        if not reason and not idempotent_by_default(info):
            return NO_GUARDS
        return Guards(idempotent=idempotent_by_default(info), reason=tuple(reason))
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
        judged = f", judged by {', '.join(checks[1].evaluators)}" if checks[1].evaluators else ""
        reason.append(f"guards[{checks[0]}] checks every successful output{judged}")
    validation = next(((i, r.output_validation) for i, r in matching if r.output_validation is not None), None)
    if validation is not None:
        reason.append(f"guards[{validation[0]}] sets output validation to {validation[1]}")
    fallback = next(((i, r.fallback) for i, r in matching if r.fallback is not None), None)
    routes: tuple[str, ...] = ()
    if fallback is not None:
        routes = tuple(name for name in fallback[1] if name.split("@")[0] != info.name)
        when = "a retryable failure" if idempotent else "circuit_open, overloaded or rate_limited (not idempotent)"
        reason.append(f"guards[{fallback[0]}] falls back to {', '.join(routes) or 'nothing'} on {when}")
    return Guards(
        idempotent,
        chosen,
        breaker[1] if breaker else None,
        checks[1] if checks else None,
        tuple(reason),
        routes,
        validation[1] if validation else None,
    )
