"""Output checks: what a successful output must pass before it reaches the caller.

The policy's guards may give a tool ``checks`` (``glovebox.policy._guards.Checks``).
They run after the output was decoded and matched the tool's own output
schema, in this order, and the first that fails ends the call as
``evaluation_failed`` (``details.check`` names it, ``details.reason`` says why);
the output is never returned, nor stored in the audit log:

1. ``max_output_bytes``: the output's JSON text, in UTF-8 bytes.
2. ``secrets``: none of the call's own secrets, in any encoding the scrubber
   knows (``glovebox.capabilities._secrets``), may be in the output's text.
3. ``output_schema``: the extra schema, validated like the tool's own
   (cached, patterns bounded, nothing fetched).
4. ``forbidden_patterns``: each ECMA-262 pattern is searched for in the
   output's JSON text by the bounded engine (``glovebox.schema._ecmaregex``); all
   of them share one budget, and a search that runs out of it fails closed.

The verdict goes into ``meta["evaluation"]`` and the audit row's ``egress``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core._canonical import canonical_json
from ..core._errors import EvaluationFailed, InvalidOutput
from ..policy._guards import Checks
from ..schema._ecmaregex import PatternTimeout, search, time_budget
from ..schema._schemas import SchemaCheck

if TYPE_CHECKING:
    from ..capabilities._secrets import Scrubber

__all__ = ["MAX_CHECK_S", "OutputChecks"]

#: Seconds the forbidden patterns of one output may take in all.
MAX_CHECK_S = 0.25


class OutputChecks:
    """Runs one tool's checks; the extra schema's validator is made once and kept."""

    def __init__(self, checks: Checks) -> None:
        self.checks = checks
        schema = checks.output_schema
        self._schema = SchemaCheck.for_schema(schema, "output") if schema is not None else None

    def evaluate(self, output: Any, text: str, scrubber: Scrubber | None, meta: dict[str, Any]) -> None:
        """Return when ``output`` passes every check; else raise ``EvaluationFailed`` (the verdict in ``meta``)."""
        try:
            self._run(output, text, scrubber)
        except EvaluationFailed as failed:
            meta["evaluation"] = {"verdict": "fail", "check": failed.details["check"]}
            raise
        meta["evaluation"] = {"verdict": "pass"}

    def _run(self, output: Any, text: str, scrubber: Scrubber | None) -> None:
        checks = self.checks
        size = len(text.encode("utf-8", "surrogatepass"))
        if checks.max_output_bytes is not None and size > checks.max_output_bytes:
            _fail("max_output_bytes", f"the output is {size} bytes, over the {checks.max_output_bytes}-byte check")
        if checks.secrets and scrubber:
            canonical = canonical_json(output)  # the decoded text: a secret escaped in the JSON shows here
            if scrubber.text(text) != text or scrubber.text(canonical) != canonical:
                _fail("secrets", "the output carries a secret the host added to this call's requests")
        if self._schema is not None:
            try:
                self._schema.validate(output)
            except InvalidOutput as refused:
                _fail("output_schema", refused.message.replace("its output schema", "the policy's output schema"))
        with time_budget(MAX_CHECK_S):
            for index, pattern in enumerate(checks.forbidden_patterns):
                try:
                    found = search(pattern, text)
                except PatternTimeout:
                    _fail(f"forbidden_patterns[{index}]", f"the pattern took over {MAX_CHECK_S * 1000:.0f} ms")
                if found:
                    _fail(f"forbidden_patterns[{index}]", f"the output matches the forbidden pattern {pattern!r}")


def _fail(check: str, reason: str) -> None:
    raise EvaluationFailed(
        f"an output check refused the result ({check}): {reason}", details={"check": check, "reason": reason}
    )
