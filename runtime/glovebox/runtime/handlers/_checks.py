"""``OutputChecks``: the policy's and the manifest's checks of a successful output
(see ``glovebox.runtime._checks``); a failed check answers ``evaluation_failed``, with
``details.effects: "committed"`` when the call's write happened (see ``._output.committed``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...core._errors import EvaluationFailed
from ...model._result import CallResult
from .._call import Call, Handler
from .._checks import OutputChecks as Checks
from .._retry import Attempts as Tries
from ._output import committed

__all__ = ["OutputChecks"]


class OutputChecks(Handler):
    """Judges what the rest of the chain answered, when the policy or the manifest asks for checks.

    ``attempt`` runs one evaluator's call: a fresh attempt below the attempts handler (its own
    sandbox and audit row, the same principal, inside the judged call's deadline).
    """

    __slots__ = ("_attempt", "_kept")

    def __init__(self, attempt: Callable[[Call], CallResult]) -> None:
        super().__init__()
        self._attempt = attempt
        self._kept: dict[tuple[str, str, str], Checks] = {}

    def handle(self, call: Call) -> CallResult:
        next = self.next
        result = next(call)
        state = call.state
        assert state is not None and state.info is not None and state.decision is not None
        info = state.info
        checks, declared = state.decision.guards.checks, info.manifest.checks
        if checks is None and declared is None:
            return result
        key = (info.digest, info.name, "checks")
        kept = self._kept.get(key)
        if kept is None or not kept.kept_for(checks, declared):
            kept = self._kept[key] = Checks(checks, declared)
        scrubber = None
        secrets = state.grants.secrets if state.grants is not None else None
        if kept.secrets and secrets:
            from ...capabilities._secrets import Scrubber, load_secrets

            scrubber = Scrubber(load_secrets(secrets, call.principal))
        assert state.output_text is not None and call.attempts is not None
        deadline = call.attempts.deadline

        def judge(name: str, payload: dict[str, Any]) -> CallResult:
            now = time.perf_counter()
            judged = Call(name, payload, call.principal, started=now, tracer=call.tracer)
            return self._attempt(judged._replace(attempts=Tries(now, within=deadline)))

        try:
            kept.evaluate(
                result.output, state.output_text, scrubber, state.meta, judge, {"tool": info.name, "input": call.input}
            )
        except EvaluationFailed as error:
            if committed(state):  # the write happened: the refusal says so
                error.details["effects"] = "committed"
            raise
        return result
