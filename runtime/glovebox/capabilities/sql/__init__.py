"""The ``sql`` capability: ``query`` in ``glovebox:tool/sql@0.1.0``.

A manifest declares databases by alias (``capabilities.sql``), a policy grants
them with their DSN (``sql``); a call's :class:`~glovebox.capabilities._sql.SqlCapability`
parses, judges and runs each statement. The parsers and drivers are imported only
when a call is granted a database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from ...core._world import SQL_INTERFACE
from ...model._capability import Capability, HostFunction
from ...model._grantrules import SqlGrant, SqlRule

__all__ = ["CAPABILITY", "SqlCapabilityKind", "sql_query"]

WIT = """\
  variant sql-value { null, integer(s64), float(f64), text(string), blob(list<u8>) }
  variant sql-error { denied(string), approval-required(string), timeout(string), database(string) }
  query: func(database: string, statement: string, params: list<sql-value>) -> result<string, sql-error>;
"""


def sql_query(state: Any, database: str, statement: str, params: list[Any]) -> Any:
    """Answer one guest statement for the call on this thread: the rows' JSON text or a ``sql-error``."""
    from wasmtime.component import Variant

    if state is not None and state.sql is not None:
        return state.sql.query(database, statement, params, state)
    reason = "the sql capability is not granted to this call"
    if state is not None:
        database = state.clip(database, 64)
        state.add_denial({"capability": "sql", "database": database, "kind": "unknown", "reason": reason})
    return Variant("denied", reason)


class SqlCapabilityKind(Capability):
    """Statements on a granted database alias, judged on the host and enforced again by the engine."""

    name = "sql"
    interface = SQL_INTERFACE
    wit = WIT

    def manifest_fields(self) -> Mapping[str, Any]:
        return {
            "sql": (list[SqlRule], Field([], description="Databases (by alias) and what statements on them may do."))
        }

    def grant_fields(self) -> Mapping[str, Any]:
        return {"sql": (list[SqlGrant], [])}

    def policy_fields(self) -> Mapping[str, Any]:
        return {
            "sql": (list[SqlGrant], Field([], description="Databases granted (alias, DSN) and what statements may do."))
        }

    def functions(self) -> Sequence[HostFunction]:
        from wasmtime.component import Variant

        from ...sandbox._hostabi import lift_query, lower_sql

        return (HostFunction("query", lift_query, sql_query, lower_sql, Variant("database", "host error")),)

    def bind(self, declared: Any, grants: Any, context: Any) -> Any:
        if not declared.sql or not grants.sql:
            return None  # the host function answers `denied` without opening a database
        from .._sql import SqlCapability  # sqlglot only when a call may use it

        approver = context.statement_approver() if context.statement_approver is not None else None
        return SqlCapability(declared.sql, grants.sql, approver)

    def finish(self, bound: Any, trace: Any) -> None:
        if trace is not None:
            trace.sql_params = bound.params  # the audit stores them with the row when the policy stores inputs

    def egress(self, meta: Mapping[str, Any], *, store_inputs: bool, extras: Mapping[str, Any]) -> Any:
        if "sql" not in meta:
            return None
        entries = [dict(entry) for entry in meta["sql"]]
        params = extras.get("sql")  # already plain and redacted by the audit
        if store_inputs and params:
            for entry, values in zip(entries, params, strict=False):
                entry["params"] = values
        return entries


CAPABILITY = SqlCapabilityKind()
