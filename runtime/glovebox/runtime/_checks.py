"""Output checks: what a successful output must pass before it reaches the caller.

Checks come from the policy's guards (``guards[].checks``) and from the tool's
manifest (``checks``), both ``glovebox.model._checks.Checks``. With both, the
call is held to the tighter of the two: the smaller ``max_output_bytes``, both
schemas, every pattern, every evaluator, and the secrets check unless both
turn it off. So a manifest can add checks but never lift the policy's. A
check from the manifest is named ``manifest.<check>`` in ``details.check``.

They run after the output was decoded and matched the tool's own output
schema, cheapest first, and the first that fails ends the call as
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
5. ``evaluators``: each is a registered tool, called by the Runtime (a fresh
   sandbox, its own audit row, the same principal, under the policy, inside
   the call's deadline) with ``{"tool", "input", "output"}``. It must answer
   ``{"pass": true|false, "reason": "..."}``. Anything else fails closed:
   an evaluator that fails (a trap, ``timeout``, ``permission_denied``...),
   answers no boolean ``pass``, or is itself judged by another evaluator
   (a chain of judges is refused, so no call can recurse). The reason an
   evaluator gives is shown to the caller, cut to :data:`MAX_REASON`
   characters.

The verdict goes into ``meta["evaluation"]`` and the audit row's ``egress``
(with each evaluator's call id, so its own row can be found).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core._canonical import canonical_json
from ..core._errors import EvaluationFailed, InvalidOutput
from ..model._checks import Checks
from ..model._result import CallResult
from ..schema._ecmaregex import PatternTimeout, search, time_budget
from ..schema._schemas import SchemaCheck

if TYPE_CHECKING:
    from ..capabilities._secrets import Scrubber

__all__ = ["MAX_CHECK_S", "MAX_REASON", "Judge", "OutputChecks"]

#: Seconds the forbidden patterns of one output may take in all.
MAX_CHECK_S = 0.25
#: The longest evaluator reason shown to the caller (characters).
MAX_REASON = 500
#: Runs an evaluator tool on ``{"tool", "input", "output"}``: the Runtime's call of it.
Judge = Callable[[str, dict[str, Any]], CallResult]
_JUDGING: contextvars.ContextVar[bool] = contextvars.ContextVar("glovebox_judging", default=False)


class OutputChecks:
    """One tool's checks (the policy's and its manifest's), validators made once and kept."""

    def __init__(self, policy: Checks | None, manifest: Checks | None = None) -> None:
        self.policy, self.manifest = policy, manifest
        sources = [(label, c) for label, c in (("", policy), ("manifest.", manifest)) if c is not None]
        bounds = [(c.max_output_bytes, f"{label}max_output_bytes") for label, c in sources if c.max_output_bytes]
        self.max_bytes = min(bounds) if bounds else None
        self.secrets = any(c.secrets for _, c in sources)
        self._schemas = [
            (f"{label}output_schema", SchemaCheck.for_schema(c.output_schema, "output"))
            for label, c in sources
            if c.output_schema is not None
        ]
        self._patterns = [
            (f"{label}forbidden_patterns[{i}]", pattern)
            for label, c in sources
            for i, pattern in enumerate(c.forbidden_patterns)
        ]
        seen: set[str] = set()
        self.evaluators: list[tuple[str, str]] = []
        for label, c in sources:
            for i, name in enumerate(c.evaluators):
                if name not in seen:
                    seen.add(name)
                    self.evaluators.append((f"{label}evaluators[{i}]", name))

    def kept_for(self, policy: Checks | None, manifest: Checks | None) -> bool:
        """Whether these are the checks of ``policy`` and ``manifest`` (a reloaded policy makes new ones)."""
        return self.policy is policy and self.manifest is manifest

    def evaluate(
        self,
        output: Any,
        text: str,
        scrubber: Scrubber | None,
        meta: dict[str, Any],
        judge: Callable[[str, dict[str, Any]], CallResult] | None = None,
        call: dict[str, Any] | None = None,
    ) -> None:
        """Return when ``output`` passes every check; else raise ``EvaluationFailed`` (the verdict in ``meta``).

        ``judge`` runs an evaluator tool; ``call`` is ``{"tool", "input"}`` of the call judged.
        """
        judged: list[dict[str, Any]] = []
        try:
            self._run(output, text, scrubber)
            for label, name in self.evaluators:
                self._judge(label, name, judge, {**(call or {}), "output": output}, judged, scrubber)
        except EvaluationFailed as failed:
            meta["evaluation"] = {"verdict": "fail", "check": failed.details["check"]}
            if judged:
                meta["evaluation"]["evaluators"] = judged
            raise
        meta["evaluation"] = {"verdict": "pass", **({"evaluators": judged} if judged else {})}

    def _run(self, output: Any, text: str, scrubber: Scrubber | None) -> None:
        size = len(text.encode("utf-8", "surrogatepass"))
        if self.max_bytes is not None and size > self.max_bytes[0]:
            bound, label = self.max_bytes
            _fail(label, f"the output is {size} bytes, over the {bound}-byte check")
        if self.secrets and scrubber:
            canonical = canonical_json(output)  # the decoded text: a secret escaped in the JSON shows here
            if scrubber.text(text) != text or scrubber.text(canonical) != canonical:
                _fail("secrets", "the output carries a secret the host added to this call's requests")
        for label, schema in self._schemas:
            try:
                schema.validate(output)
            except InvalidOutput as refused:
                whose = "the manifest's" if label.startswith("manifest.") else "the policy's"
                _fail(label, refused.message.replace("its output schema", f"{whose} output schema"))
        with time_budget(MAX_CHECK_S):
            for label, pattern in self._patterns:
                try:
                    found = search(pattern, text)
                except PatternTimeout:
                    _fail(label, f"the pattern took over {MAX_CHECK_S * 1000:.0f} ms")
                if found:
                    _fail(label, f"the output matches the forbidden pattern {pattern!r}")

    def _judge(
        self,
        label: str,
        name: str,
        judge: Judge | None,
        payload: dict[str, Any],
        judged: list[dict[str, Any]],
        scrubber: Scrubber | None = None,
    ) -> None:
        """One evaluator's verdict; anything but a clean ``{"pass": true}`` refuses the output."""
        if judge is None or _JUDGING.get():
            _fail(label, f"the evaluator {name!r} would judge an evaluator's output: a chain of judges is refused")
        assert judge is not None
        token = _JUDGING.set(True)
        try:
            result = judge(name, payload)
        finally:
            _JUDGING.reset(token)
        entry = {"tool": name, "call_id": result.meta["call_id"]}
        judged.append(entry)
        if result.error is not None:
            entry["verdict"] = result.error.code
            _fail(label, f"the evaluator {name!r} failed ({result.error.code}), so the output is refused")
        answer = result.output
        if not isinstance(answer, dict) or not isinstance(answer.get("pass"), bool):
            entry["verdict"] = "invalid"
            _fail(label, f'the evaluator {name!r} did not answer {{"pass": true|false, "reason": "..."}}')
        reason = answer.get("reason")
        reason = reason[:MAX_REASON] if isinstance(reason, str) else ""
        entry["verdict"] = "pass" if answer["pass"] else "fail"
        if not answer["pass"]:
            reason = _shown_reason(reason, payload["output"], scrubber)
            _fail(label, f"the evaluator {name!r} refused the output: {reason or '(no reason given)'}")


#: A string of the refused output this long, quoted in an evaluator's reason, withholds the reason.
QUOTED_CHARS = 8


def _shown_reason(reason: str, output: Any, scrubber: Scrubber | None) -> str:
    """An evaluator's reason as the caller may read it: never a piece of the output it refused, nor a secret.

    The output is refused so that the caller does not get it; a judge that explains
    itself by quoting it ("it contains 4111-1111-...") would hand part of it over.
    Any run of ``QUOTED_CHARS`` characters the reason shares with the output's JSON
    withholds the reason (the judge's own audit row keeps it for the operator).
    """
    if scrubber is not None:
        reason = scrubber.text(reason)
    text = "\n".join([canonical_json(output), *_strings(output)])  # the strings unescaped too
    if any(reason[i : i + QUOTED_CHARS] in text for i in range(len(reason) - QUOTED_CHARS + 1)):
        return "(withheld: the reason quotes the refused output; the judge's audit row keeps it)"
    return reason


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (key, *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _fail(check: str, reason: str) -> None:
    raise EvaluationFailed(
        f"an output check refused the result ({check}): {reason}", details={"check": check, "reason": reason}
    )
