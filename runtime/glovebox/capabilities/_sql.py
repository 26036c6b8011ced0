"""The ``sql`` capability of one call: a statement on a database alias, judged, maybe approved, run.

The effective grant of an alias is what the tool's manifest declares ∩ what
the call was granted (the first declared and the first granted entry of that
alias): per kind the stricter action, the tables and functions both allow, the
column restrictions of both, the smaller limits. Each ``query``:

1. finds the alias (a tool names databases only by alias; the DSN stays on the host);
2. parses and judges the statement (``_sqlcheck``): a refusal is ``denied``,
   whose reason names the kind and the table, column or function;
3. for a kind whose action is ``require_approval``, spends an approval bound
   to this exact (alias, statement, parameters) — one use, as a call's is — or
   answers ``approval-required`` naming the new request;
4. runs it on the engine (``_sqlite``, or ``_postgres`` with the password read
   from the grant's secret provider), which enforces the grant again, within
   the grant's statement timeout and the call's deadline.

Every statement leaves one entry in the call's ``sql`` record (fingerprint,
kind, tables, decision, rows returned or changed), parameters apart (they
reach the audit row only when the policy stores inputs).
"""

from __future__ import annotations

import base64
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wasmtime.component import Variant

from ..core._canonical import canonical_json, sha256_digest
from ..model._grantrules import sql_kind_phrase
from ..model._grants import SQL_KINDS, SqlActions, SqlGrant, SqlRule
from ._secrets import read_secret
from ._sqlcheck import SqlRefused, Statement, classify, judge
from ._sqlite import Answer, EngineFailed, EngineRefused, EngineTimeout, Plan, run_sqlite

__all__ = ["MAX_STATEMENTS", "Approver", "SqlCapability", "effective_rule", "statement_digest"]

logger = logging.getLogger("glovebox.sql")

#: Statements one call may send.
MAX_STATEMENTS = 256
_RANK = {"allow": 0, "require_approval": 1, "block": 2}

#: ``(digest, shown) -> (verdict, approval_id, expires_at, reason)``: spends an approval for
#: this statement digest (``"approved"``), finds its denial (``"denied"``, with the approver's
#: reason), or files (or finds) the pending request (``"pending"``), showing the approver
#: ``shown`` (database, kind, fingerprint, statement, params: the runtime keeps of it what
#: the audit would keep).
Approver = Callable[[str, dict[str, Any]], tuple[str, str, float, str]]


def statement_digest(database: str, statement: str, params: list[Any]) -> str:
    """What an approval of one statement is bound to: ``sql:sha256:`` of the canonical (alias, text, params)."""
    plain = [{"base64": base64.b64encode(p).decode()} if isinstance(p, bytes) else p for p in params]
    text = canonical_json({"database": database, "statement": statement, "params": plain}, allow_nan=True)
    return "sql:" + sha256_digest(text)


def effective_rule(declared: SqlRule, granted: SqlGrant) -> SqlGrant:
    """``declared`` ∩ ``granted`` for one alias (see the module docstring)."""
    actions = SqlActions(
        **{
            kind: max(getattr(declared.actions, kind), getattr(granted.actions, kind), key=_RANK.__getitem__)
            for kind in SQL_KINDS
        }
    )
    if "*" in declared.tables:
        tables = list(granted.tables)
    elif "*" in granted.tables:
        tables = list(declared.tables)
    else:
        tables = [table for table in declared.tables if table in granted.tables]
    columns = dict(granted.columns)
    for table, names in declared.columns.items():
        columns[table] = [name for name in names if name in columns[table]] if table in columns else list(names)
    return SqlGrant(
        database=granted.database,
        dsn=granted.dsn,
        password=granted.password,
        actions=actions,
        tables=tables,
        columns=columns,
        functions=[name for name in declared.functions if name in granted.functions],
        max_rows=min(declared.max_rows, granted.max_rows),
        max_bytes=min(declared.max_bytes, granted.max_bytes),
        timeout_ms=min(declared.timeout_ms, granted.timeout_ms),
    )


@dataclass
class _Query:
    database: str
    statement: str
    params: list[Any]


class SqlCapability:
    """The databases one call may use, and the approvals its statements may spend."""

    def __init__(self, declared: list[SqlRule], granted: list[SqlGrant], approver: Approver | None = None) -> None:
        self._rules: dict[str, SqlGrant] = {}
        for rule in declared:
            grant = next((g for g in granted if g.database == rule.database), None)
            if grant is not None and rule.database not in self._rules:
                self._rules[rule.database] = effective_rule(rule, grant)
        self._approver = approver
        self._count = 0
        #: The parameters of each statement sent, in order (for the audit, when it stores inputs).
        self.params: list[list[Any]] = []

    @property
    def databases(self) -> list[str]:
        """The aliases this call may use."""
        return sorted(self._rules)

    def query(self, database: str, statement: str, params: list[Any], state: Any) -> Any:
        """Answer one ``query``: the rows' JSON text, or a ``sql-error`` variant."""
        self._count += 1
        query = _Query(database, statement, params)
        entry: dict[str, Any] = {"database": state.clip(database, 64), "kind": "unknown"}
        started = time.monotonic()
        try:
            return self._answer(query, entry, state)
        finally:
            entry["ms"] = round((time.monotonic() - started) * 1000, 3)
            state.add_sql(entry)
            self.params.append(params)

    def _answer(self, query: _Query, entry: dict[str, Any], state: Any) -> Any:
        rule = self._rules.get(query.database)
        if self._count > MAX_STATEMENTS:
            return self._deny(entry, state, f"a call may send at most {MAX_STATEMENTS} statements", {})
        if rule is None:
            return self._deny(entry, state, f"the database {query.database!r} is not granted to this call", {})
        try:
            statement = classify(query.statement, rule.engine)
            entry.update(kind=statement.kind, fingerprint=statement.fingerprint, tables=list(statement.tables))
            action = judge(statement, rule)
        except SqlRefused as refusal:
            if refusal.details.get("kind", "unknown") != "unknown":
                entry["kind"] = refusal.details["kind"]
            return self._deny(entry, state, refusal.reason, refusal.details)
        if action == "require_approval":
            answer = self._approval(query, statement, entry, state)
            if answer is not None:
                return answer
        return self._run(rule, query, statement, entry, state)

    def _approval(self, query: _Query, statement: Statement, entry: dict[str, Any], state: Any) -> Any:
        if self._approver is None:
            reason = f"{sql_kind_phrase(statement.kind, plural=True)} need approval, and none can be given here"
            return self._deny(entry, state, reason, {})
        shown = {
            "database": query.database, "kind": statement.kind, "fingerprint": statement.fingerprint,
            "statement": query.statement, "params": query.params,
        }  # fmt: skip
        verdict, approval_id, expires_at, reason = self._approver(
            statement_digest(query.database, query.statement, query.params), shown
        )
        entry["approval_id"] = approval_id
        if verdict == "approved":
            entry["decision"] = "approved"
            return None
        if verdict == "denied":
            return self._deny(entry, state, f"an approver denied this statement: {reason}", {"kind": statement.kind})
        entry["decision"] = "approval_required"
        state.note_approval(
            {"approval_id": approval_id, "expires_at": expires_at, "database": entry["database"],
             "kind": statement.kind, "fingerprint": entry.get("fingerprint", "")}
        )  # fmt: skip
        reason = f"{sql_kind_phrase(statement.kind, plural=True)} need approval: request {approval_id}"
        return Variant("approval-required", reason)

    def _run(self, rule: SqlGrant, query: _Query, statement: Statement, entry: dict[str, Any], state: Any) -> Any:
        entry.setdefault("decision", "allow")
        stop = min(state.deadline, time.monotonic() + rule.timeout_ms / 1000.0)
        try:
            answer = self._engine(rule, query, Plan(rule, statement, stop))
        except EngineRefused as refusal:
            return self._deny(entry, state, f"the database refused it: {refusal}", {"kind": statement.kind})
        except EngineTimeout:
            entry["error"] = "timeout"
            if stop >= state.deadline:
                state.timed_out = True
            return Variant("timeout", f"the statement ran past its {rule.timeout_ms} ms timeout or the call's deadline")
        except sqlite3.Error as exc:
            entry["error"] = "database"
            return Variant("database", state.clip(f"{type(exc).__name__}: {exc}"))
        except EngineFailed as exc:
            entry["error"] = "database"
            return Variant("database", state.clip(str(exc)))
        entry.update(rows_returned=answer.row_count, rows_changed=answer.rows_changed, truncated=answer.truncated)
        return answer.text

    @staticmethod
    def _engine(rule: SqlGrant, query: _Query, plan: Plan) -> Answer:
        if rule.engine == "sqlite":
            return run_sqlite(rule.dsn, query.statement, query.params, plan)
        from ._postgres import run_postgres

        password = None
        if rule.password is not None:
            password = read_secret(rule.password.provider, rule.password.source)
            if password is None:
                logger.warning("the password secret of database %r has no usable value", rule.database)
                raise EngineFailed("the database's password secret has no usable value on this host")
        return run_postgres(rule.dsn, password, query.statement, query.params, plan)

    def _deny(self, entry: dict[str, Any], state: Any, reason: str, details: dict[str, Any]) -> Any:
        entry.update(decision="denied", reason=reason)
        denial = {"capability": "sql", "database": entry["database"], "reason": reason, "kind": entry["kind"]}
        for key in ("table", "column", "function"):
            if key in details:
                denial[key] = details[key]
        state.add_denial(denial)
        return Variant("denied", reason)
