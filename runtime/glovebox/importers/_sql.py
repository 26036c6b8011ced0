"""``glovebox import sql``: a database as two tools, ``<name>-query`` and ``<name>-execute``.

Both run the generic SQL guest (``guest/sqlop/sqlop.c``) with the input
``{"sql": "...", "params": [...]}`` and answer
``{"columns", "rows", "row_count", "truncated", "rows_changed"}``. What a
statement may do is the host's to decide, per statement: ``<name>-query``
declares SELECT only; ``<name>-execute`` declares the safe defaults (writes
need approval, DDL and everything else are blocked), so it answers
``capability_denied`` for ``DROP TABLE`` and ``approval_required`` for
``DELETE``. The descriptions list the tables and columns read from the
database's catalog. The policy fragment allows both tools (the statement
decides) and grants the alias with its DSN; the manifests never hold the DSN.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..core._errors import InvalidSpec
from ..model._grants import SqlGrant
from ..model._manifest import Limits, Manifest
from ._batch import Planned
from ._common import api_name

__all__ = ["SQL_INPUT_SCHEMA", "SQL_LIMITS", "SQL_OUTPUT_SCHEMA", "plan_sql", "sql_fragment"]

#: The limits of an imported SQL tool: a small guest waiting on one statement.
SQL_LIMITS = Limits(fuel=200_000_000, memory_bytes=32 * 1024 * 1024, timeout_ms=10_000, output_bytes=2 * 1024 * 1024)
#: How much of the catalog a description lists.
MAX_DESCRIPTION_CHARS = 4000
SQL_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sql": {"type": "string", "minLength": 1, "maxLength": 65536, "description": "One SQL statement (SQLite)."},
        "params": {
            "type": "array",
            "maxItems": 256,
            "items": {"type": ["null", "boolean", "number", "string"]},
            "description": "Values for the statement's ? placeholders, in order.",
        },
    },
    "required": ["sql"],
    "additionalProperties": False,
}
SQL_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "columns": {"type": "array", "items": {"type": "string"}},
        "rows": {"type": "array", "items": {"type": "array"}},
        "row_count": {"type": "integer", "minimum": 0},
        "truncated": {"type": "boolean"},
        "rows_changed": {"type": "integer", "minimum": 0},
    },
    "required": ["columns", "rows", "row_count", "truncated"],
}
_READ_ONLY = {"select": "allow", "insert": "block", "update": "block", "delete": "block", "ddl": "block"}


def plan_sql(dsn: str, name: str) -> tuple[str, list[Planned], str]:
    """The two tools of one database, and the DSN the fragment grants (absolute).

    Raises:
        InvalidSpec: the DSN is not ``sqlite:///path``, or the file is not a SQLite database.
    """
    api = api_name(name, "--name")
    path = _path(dsn)
    catalog = _catalog(path, dsn)
    tables = ", ".join(f"{table}({', '.join(columns)})" for table, columns in catalog) or "(no tables)"
    if len(tables) > MAX_DESCRIPTION_CHARS:
        tables = tables[: MAX_DESCRIPTION_CHARS - 1] + "…"
    common = {"input_schema": SQL_INPUT_SCHEMA, "output_schema": SQL_OUTPUT_SCHEMA, "limits": SQL_LIMITS, "kind": "sql"}
    query = Manifest.model_validate(
        {
            **common,
            "name": f"{api}-query",
            "description": f"Run one read-only SQL statement (SELECT, SQLite dialect, ? placeholders) on the "
            f"database {api}. Tables: {tables}",
            "sql_operation": {"api": api, "database": api, "mode": "query"},
            "capabilities": {"sql": [{"database": api, "actions": _READ_ONLY}]},
        }
    )
    execute = Manifest.model_validate(
        {
            **common,
            "name": f"{api}-execute",
            "description": f"Run one SQL statement that changes data (INSERT, UPDATE, DELETE; SQLite dialect, ? "
            f"placeholders) on the database {api}; writes wait for approval, schema changes are refused. "
            f"Tables: {tables}",
            "sql_operation": {"api": api, "database": api, "mode": "execute"},
            "capabilities": {"sql": [{"database": api}]},
        }
    )
    planned = [
        Planned(query, "allow", f"{dsn} (query)"),
        Planned(execute, "allow", f"{dsn} (execute)"),
    ]
    return api, planned, f"sqlite:///{path}"


def _path(dsn: str) -> Path:
    try:
        SqlGrant(database="x", dsn=dsn)
    except ValueError as exc:
        raise InvalidSpec(f"{dsn!r}: only sqlite:///path DSNs can be imported (sqlite:////abs/path.db)") from exc
    path = Path(dsn.removeprefix("sqlite:///")).resolve()
    if not path.is_file():
        raise InvalidSpec(f"{dsn}: {path} is not a file (a grant never creates a database)")
    return path


def _catalog(path: Path, dsn: str) -> list[tuple[str, list[str]]]:
    """(table or view, its columns with their declared types), read from the catalog, read-only."""
    try:
        connection = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
        try:
            names = connection.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'"
                " ORDER BY name"
            ).fetchall()
            found = []
            for (table,) in names:
                info = connection.execute("SELECT name, type FROM pragma_table_info(?)", (table,)).fetchall()
                found.append((str(table), [f"{column} {kind}".strip() for column, kind in info]))
            return found
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise InvalidSpec(f"{dsn}: cannot read the database's catalog: {exc}") from exc


def sql_fragment(
    api: str, manifests: list[Manifest], actions: list[str], _secrets: list[Any], dsn: str = ""
) -> dict[str, Any]:
    """The policy fragment of an imported database: both tools allowed, the alias granted with its DSN."""
    rules = [
        {
            "tool": manifest.name,
            "action": action,
            "reason": "SELECT only"
            if manifest.sql_operation is not None and manifest.sql_operation.mode == "query"
            else "each statement decides: writes wait for approval, DDL is refused",
        }
        for manifest, action in zip(manifests, actions, strict=True)
    ]
    return {
        "version": 1,
        "description": f"imported database {api}: reads allowed, writes held for approval, schema changes refused",
        "rules": rules,
        "grants": [{"tool": f"{api}-*", "sql": [{"database": api, "dsn": dsn}]}],
    }
