"""``Execute``: the last step: the tool's executor runs it; its output is decoded and held to its schema."""

from __future__ import annotations

from ...core._errors import InvalidOutput
from ...core._jsonlimits import JsonRejected, escape_surrogates
from ...core._jsonlimits import loads as loads_json
from ...model._result import CallResult
from ...telemetry._tracing import step
from .._call import Call
from ..executors._base import Executors
from ._validate import SchemaCache

__all__ = ["Execute"]


class Execute:
    """The end of the chain: picks the executor of the tool's kind and answers its decoded output."""

    __slots__ = ("_executors", "_schemas")

    def __init__(self, executors: Executors, schemas: SchemaCache) -> None:
        self._executors = executors
        self._schemas = schemas

    def __call__(self, call: Call) -> CallResult:
        state = call.state
        assert state is not None and state.info is not None
        info = state.info
        text = state.output_text = self._executors.for_kind(info.kind).execute(call)
        try:
            output = loads_json(text)
        except JsonRejected as exc:
            details = {**exc.details, "excerpt": escape_surrogates(text[:200])}
            raise InvalidOutput(f"the tool's output {exc}", details=details) from exc
        if info.output_schema is not True:
            if call.tracer is None:
                self._schemas.get(info, "output").validate(output)
            else:
                with step(call.tracer, "glovebox.validate", "output"):
                    self._schemas.get(info, "output").validate(output)
        return CallResult(ok=True, output=output, meta=state.meta)
