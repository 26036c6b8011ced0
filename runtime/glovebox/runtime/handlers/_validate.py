"""``ValidateInput``: the input against the tool's input schema; its text as the tool receives it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ...core._errors import InvalidInput
from ...model._manifest import GraphqlField, Operation, SqlOperation
from ...model._result import CallResult, ToolInfo
from ...schema._schemas import SchemaCheck, encode_input, sized_input
from ...telemetry._tracing import step
from .._call import Call, Handler

if TYPE_CHECKING:
    from .._selection import Selections

__all__ = ["SchemaCache", "ValidateInput"]


class SchemaCache:
    """One compiled validator per (artifact, tool, input|output), made on first use."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str, str], SchemaCheck] = {}

    def get(self, info: ToolInfo, which: Literal["input", "output"]) -> SchemaCheck:
        key = (info.digest, info.name, which)
        validator = self._kept.get(key)
        if validator is None:
            schema = info.input_schema if which == "input" else info.output_schema
            validator = self._kept[key] = SchemaCheck.for_schema(schema, which, info.manifest.limits.timeout_ms)
        return validator


class ValidateInput(Handler):
    """Refuses input that breaks the tool's schema (``invalid_input``) before anything runs.

    For an imported GraphQL field, the input field that chooses the answer's fields
    (see ``glovebox.runtime._selection``) becomes the document sent, never a variable.
    """

    __slots__ = ("_schemas", "_selections")

    def __init__(self, schemas: SchemaCache, selections: Selections | None = None) -> None:
        super().__init__()
        self._schemas = schemas
        self._selections = selections

    def handle(self, call: Call) -> CallResult:
        next = self.next
        state = call.state
        assert state is not None and state.info is not None
        info, value = state.info, call.input
        input_text = encode_input(value) if state.encoded is None else sized_input(*state.encoded)
        if info.input_schema is not True:
            if call.tracer is None:
                self._schemas.get(info, "input").validate(value, input_text)
            else:
                with step(call.tracer, "glovebox.validate", "input"):
                    self._schemas.get(info, "input").validate(value, input_text)
        if info.kind == "mcp-remote" and not isinstance(value, dict):  # MCP arguments are an object
            raise InvalidInput(f"a remote MCP tool takes a JSON object as input, not {type(value).__name__}")
        operation: Operation | SqlOperation | None = info.manifest.operation or info.manifest.sql_operation
        if operation is not None:  # an imported operation: the generic guest reads both
            graphql = operation.graphql if isinstance(operation, Operation) else None
            chooser = graphql.selection_input if graphql is not None else None
            if chooser is not None and isinstance(value, dict) and chooser in value:
                assert isinstance(operation, Operation) and graphql is not None
                operation, input_text = self._selected(operation, graphql, chooser, value)
            input_text = f'{{"operation":{operation.model_dump_json()},"input":{input_text}}}'
        state.input_text = input_text
        return next(call)

    def _selected(
        self, operation: Operation, graphql: GraphqlField, chooser: str, value: dict[str, Any]
    ) -> tuple[Operation, str]:
        """The operation sending the document with the chosen fields, and the variables without them."""
        if self._selections is None:
            raise InvalidInput(f"{chooser}: this host does not take GraphQL selections")
        variables = {key: item for key, item in value.items() if key != chooser}
        document = self._selections.document(graphql, value[chooser])
        chosen = graphql.model_copy(update={"query": document})
        return operation.model_copy(update={"graphql": chosen}), encode_input(variables)
