"""Running one checked statement on SQLite, with the engine enforcing the grant again.

Defence in depth: what the host's classifier (``_sqlcheck``) misreads, the
engine still refuses. Every statement gets a fresh connection:

- opened through a ``file:`` URI with ``mode=ro`` when the grant allows only
  reads or the statement is a read, else ``mode=rw`` (never ``rwc``: a grant
  never creates a database file);
- ``PRAGMA query_only = ON`` for a read;
- no attached databases (``SQLITE_LIMIT_ATTACHED`` = 0) and no extension loading;
- an authorizer that allows only what this statement was judged to do: reads of
  granted tables (and columns), writes of the kinds the statement holds, on
  granted tables, the allowed functions, DDL only for a ``ddl`` statement, and the
  pragmas that describe a table (``table_info``, ``index_list``, ``foreign_key_list``,
  ...) only for a statement judged to describe that very table (an index's
  description only where every table is granted); it refuses ATTACH, DETACH, every
  other PRAGMA, transactions and anything else;
- a progress handler that interrupts the statement at its stop time (the
  grant's statement timeout, inside the call's deadline); the busy timeout is
  the same time left.

The answer is the JSON text the guest receives:
``{"columns", "rows", "row_count", "truncated", "rows_changed"}``, the rows cut
at ``max_rows`` and ``max_bytes`` of JSON. A blob is ``{"base64": ...}``; a
non-finite float is its text (``"inf"``).
"""

from __future__ import annotations

import base64
import json
import math
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..model._grants import SqlRule
from ._sqlcheck import SAFE_FUNCTIONS, Statement
from ._sqlschema import INDEX_PRAGMAS, TABLE_PRAGMAS

__all__ = ["Answer", "EngineFailed", "EngineRefused", "EngineTimeout", "Plan", "collect", "run_sqlite", "sqlite_path"]

#: Virtual-machine steps between two looks at the clock.
PROGRESS_STEPS = 1000
_FETCH = 64


class EngineRefused(Exception):
    """The database's authorizer refused part of the statement (the classifier missed it)."""


class EngineFailed(Exception):
    """The database failed the statement (a constraint, a missing table, a connection that could not be made)."""


class EngineTimeout(Exception):
    """The statement ran past its stop time and was interrupted."""


@dataclass(frozen=True)
class Plan:
    """What the engine lets one statement do."""

    rule: SqlRule
    statement: Statement
    stop: float  # time.monotonic() at which the statement is interrupted


@dataclass(frozen=True)
class Answer:
    """One statement's result, as JSON text, with the counts the audit keeps."""

    text: str
    row_count: int
    rows_changed: int
    truncated: bool


def sqlite_path(dsn: str) -> Path:
    """The file of a ``sqlite:///relative`` or ``sqlite:////absolute`` DSN."""
    return Path(dsn.removeprefix("sqlite:///"))


def run_sqlite(dsn: str, text: str, params: list[Any], plan: Plan) -> Answer:
    """Run ``text`` once under ``plan``.

    Raises:
        EngineRefused: the authorizer refused part of it.
        EngineTimeout: it ran past ``plan.stop``.
        sqlite3.Error: the database refused or failed it (a constraint, a missing table, a lock).
    """
    read = plan.statement.kinds == {"select"}
    connection = _connect(sqlite_path(dsn), read or _read_only(plan.rule), plan.stop)
    try:
        if read:
            connection.execute("PRAGMA query_only = ON")
        refused: list[str] = []
        connection.set_authorizer(_Authorizer(plan, refused))
        connection.set_progress_handler(_progress(plan.stop), PROGRESS_STEPS)
        try:
            cursor = connection.execute(text, params)
            answer = collect(cursor, plan.rule, plan.statement, _value)
        except sqlite3.DatabaseError as exc:
            if refused:
                raise EngineRefused(refused[0]) from exc
            if "interrupted" in str(exc):
                raise EngineTimeout(str(exc)) from exc
            raise
        return answer
    finally:
        connection.close()


def _read_only(rule: SqlRule) -> bool:
    actions = rule.actions
    return all(getattr(actions, kind) == "block" for kind in ("insert", "update", "delete", "ddl", "other"))


def _connect(path: Path, read_only: bool, stop: float) -> sqlite3.Connection:
    uri = f"file:{quote(str(path))}?mode={'ro' if read_only else 'rw'}"
    connection = sqlite3.connect(
        uri, uri=True, isolation_level=None, check_same_thread=False, timeout=max(0.0, stop - time.monotonic())
    )
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    enable = getattr(connection, "enable_load_extension", None)
    if enable is not None:
        enable(False)
    return connection


def _progress(stop: float) -> Callable[[], int]:
    def check() -> int:
        return 1 if time.monotonic() >= stop else 0

    return check


_WRITES = {sqlite3.SQLITE_INSERT: "insert", sqlite3.SQLITE_UPDATE: "update", sqlite3.SQLITE_DELETE: "delete"}
_DDL = frozenset(
    getattr(sqlite3, name)
    for name in dir(sqlite3)
    if name.startswith(("SQLITE_CREATE_", "SQLITE_DROP_")) or name in ("SQLITE_ALTER_TABLE", "SQLITE_REINDEX")
)


#: The authorizer's other actions by name, for a refusal's reason.
_ACTIONS = {
    getattr(sqlite3, f"SQLITE_{name}"): said
    for name, said in (
        ("ATTACH", "ATTACH"), ("DETACH", "DETACH"), ("PRAGMA", "a PRAGMA"), ("ANALYZE", "ANALYZE"),
        ("TRANSACTION", "a transaction (BEGIN, COMMIT, ROLLBACK)"), ("SAVEPOINT", "a savepoint"),
        ("CREATE_VTABLE", "CREATE VIRTUAL TABLE"), ("DROP_VTABLE", "DROP of a virtual table"),
    )
    if hasattr(sqlite3, f"SQLITE_{name}")
}  # fmt: skip
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"})


class _Authorizer:
    """The engine's own check of one statement: only what it was judged to do (see the module docstring)."""

    def __init__(self, plan: Plan, refused: list[str]) -> None:
        self.rule, self.kinds, self.refused = plan.rule, plan.statement.kinds, refused
        self.statement = plan.statement
        self.tables = None if "*" in plan.rule.tables else set(plan.rule.tables) | plan.statement.ctes
        self.functions = SAFE_FUNCTIONS | set(plan.rule.functions)

    def __call__(self, action: int, arg1: str | None, arg2: str | None, database: str | None, _: str | None) -> int:
        why = self.decide(action, arg1, arg2, database)
        if why is None:
            return sqlite3.SQLITE_OK
        self.refused.append(why)
        return sqlite3.SQLITE_DENY

    def table_ok(self, name: str | None) -> bool:
        return self.tables is None or (name or "").lower() in self.tables

    def column_ok(self, table: str | None, column: str | None) -> bool:
        granted = self.rule.columns.get((table or "").lower())
        return granted is None or not column or column.lower() in granted

    def decide(self, action: int, arg1: str | None, arg2: str | None, database: str | None) -> str | None:
        if database not in (None, "main"):
            return f"the database {database!r} is not reachable"
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
            return None
        if action == sqlite3.SQLITE_READ:
            ok = self.table_ok(arg1) and self.column_ok(arg1, arg2)
            return None if ok else f"reading {arg1}.{arg2} is not granted"
        if action == sqlite3.SQLITE_FUNCTION:
            return None if (arg2 or "").lower() in self.functions else f"function {arg2}() is not allowed"
        if action in _WRITES:
            return self.write(action, arg1, arg2)
        if action in _DDL:
            table = arg2 if action == sqlite3.SQLITE_ALTER_TABLE else arg1
            ok = "ddl" in self.kinds and self.table_ok(table)
            return None if ok else "schema changes are not what this statement was judged to do"
        if action == sqlite3.SQLITE_PRAGMA and self.description_ok((arg1 or "").lower(), (arg2 or "").lower()):
            return None
        name = _ACTIONS.get(action, f"action {action}")
        if action == sqlite3.SQLITE_PRAGMA and arg1:
            name = f"PRAGMA {arg1}" + (f"({arg2})" if arg2 else "")
        return f"{name} is not allowed: only what the statement was judged to do runs"

    def description_ok(self, pragma: str, named: str) -> bool:
        """A pragma that only describes what the statement was judged to describe (see the module docstring)."""
        statement = self.statement
        if not named or statement.kinds != {"select"}:
            return False
        if pragma in TABLE_PRAGMAS:
            return (
                statement.describes
                and named in statement.tables
                and self.table_ok(named)
                and (named not in self.rule.columns)
            )
        return (
            pragma in INDEX_PRAGMAS
            and f"pragma {pragma}" in statement.catalog
            and (self.tables is None and not self.rule.columns)
        )

    def write(self, action: int, table: str | None, column: str | None) -> str | None:
        kind = _WRITES[action]
        if "ddl" in self.kinds and (table or "").lower() in _SCHEMA_TABLES:
            return None  # a schema change writes the schema table itself
        if kind not in self.kinds or not self.table_ok(table):
            return f"{kind} on {table} is not what this statement was judged to do"
        if action == sqlite3.SQLITE_UPDATE and not self.column_ok(table, column):
            return f"updating {table}.{column} is not granted"
        return None


def collect(cursor: Any, rule: SqlRule, statement: Statement, value: Callable[[Any], Any]) -> Answer:
    """The rows of ``cursor`` as the guest's JSON text, cut at the rule's row and byte limits."""
    columns = [item[0] for item in cursor.description or ()]
    rows: list[str] = []
    used, truncated = 0, False
    while not truncated and cursor.description is not None:
        batch = cursor.fetchmany(_FETCH)
        if not batch:
            break
        for row in batch:
            encoded = json.dumps([value(item) for item in row], ensure_ascii=False, allow_nan=False)
            if len(rows) >= rule.max_rows or used + len(encoded) > rule.max_bytes:
                truncated = True
                break
            rows.append(encoded)
            used += len(encoded) + 1
    changed = cursor.rowcount if statement.kind != "select" and cursor.rowcount > 0 else 0
    cursor.close()
    head = json.dumps(columns, ensure_ascii=False)
    text = (
        f'{{"columns":{head},"rows":[{",".join(rows)}],"row_count":{len(rows)},'
        f'"truncated":{"true" if truncated else "false"},"rows_changed":{changed}}}'
    )
    return Answer(text=text, row_count=len(rows), rows_changed=changed, truncated=truncated)


def _value(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
