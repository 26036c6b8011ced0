"""``glovebox import sql``: a database as two tools, ``<name>-query`` and ``<name>-execute``.

Both run the generic SQL guest (``guest/sqlop/sqlop.c``) with the input
``{"sql": "...", "params": [...]}`` and answer
``{"columns", "rows", "row_count", "truncated", "rows_changed"}``. What a
statement may do is the host's to decide, per statement: ``<name>-query``
declares SELECT only; ``<name>-execute`` declares the safe defaults (writes
need approval, DDL and everything else are blocked), so it answers
``capability_denied`` for ``DROP TABLE`` and ``approval_required`` for
``DELETE``. The descriptions list the tables and columns read from the
database's catalog, the foreign keys between them (``lines.order_id ->
orders.id``), and how to read the schema through ``<name>-query`` (``PRAGMA
table_info`` and ``EXPLAIN QUERY PLAN`` on SQLite, ``information_schema`` and
``EXPLAIN`` on PostgreSQL). The policy fragment allows both tools (the statement
decides) and grants the alias with its DSN (and, for PostgreSQL, where the
host reads the password); the manifests never hold the DSN.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

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


def plan_sql(dsn: str, name: str, password: dict[str, str] | None = None) -> tuple[str, list[Planned], dict[str, Any]]:
    """The two tools of one database, and the grant entry the fragment holds (DSN absolute, password source).

    Raises:
        InvalidSpec: the DSN is neither ``sqlite:///path`` nor ``postgresql://user@host/db``, the
            file is not a SQLite database, or the server's catalog cannot be read.
    """
    api = api_name(name, "--name")
    granted: dict[str, Any]
    if dsn.startswith(("postgresql://", "postgres://")):
        grant = _postgres_grant(dsn, password)
        catalog, keys = _pg_catalog(grant, dsn)
        dialect, marks, granted = "PostgreSQL", "$1, $2 placeholders", {"dsn": dsn}
        schema = "EXPLAIN (without ANALYZE) and reads of information_schema and pg_catalog"
        if grant.password is not None:
            granted["password"] = grant.password.model_dump()
    else:
        if password is not None:
            raise InvalidSpec("a password source is for PostgreSQL DSNs only (SQLite files have none)")
        path = _path(dsn)
        catalog, keys = _catalog(path, dsn)
        dialect, marks, granted = "SQLite dialect", "? placeholders", {"dsn": f"sqlite:///{path}"}
        schema = "PRAGMA table_info/index_list/foreign_key_list(table) and EXPLAIN QUERY PLAN"
    tables = _tables_text(catalog, keys)
    common = {"input_schema": SQL_INPUT_SCHEMA, "output_schema": SQL_OUTPUT_SCHEMA, "limits": SQL_LIMITS, "kind": "sql"}
    query = Manifest.model_validate(
        {
            **common,
            "name": f"{api}-query",
            "description": f"Run one read-only SQL statement (SELECT, {dialect}, {marks}) on the "
            f"database {api}; {schema} read its schema. Tables: {tables}",
            "sql_operation": {"api": api, "database": api, "mode": "query"},
            "capabilities": {"sql": [{"database": api, "actions": _READ_ONLY}]},
        }
    )
    execute = Manifest.model_validate(
        {
            **common,
            "name": f"{api}-execute",
            "description": f"Run one SQL statement that changes data (INSERT, UPDATE, DELETE; {dialect}, "
            f"{marks}) on the database {api}; writes wait for approval, schema changes are refused. "
            f"Tables: {tables}",
            "sql_operation": {"api": api, "database": api, "mode": "execute"},
            "capabilities": {"sql": [{"database": api}]},
        }
    )
    planned = [
        Planned(query, "allow", f"{dsn} (query)"),
        Planned(execute, "allow", f"{dsn} (execute)"),
    ]
    return api, planned, granted


def _tables_text(catalog: list[tuple[str, list[str]]], keys: list[str]) -> str:
    """The tables with their columns, then the foreign keys, cut at :data:`MAX_DESCRIPTION_CHARS`."""
    text = ", ".join(f"{table}({', '.join(columns)})" for table, columns in catalog) or "(no tables)"
    if keys:
        text += ". Foreign keys: " + ", ".join(keys)
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[: MAX_DESCRIPTION_CHARS - 1] + "…"
    return text


def _postgres_grant(dsn: str, password: dict[str, str] | None) -> SqlGrant:
    try:
        return SqlGrant(database="x", dsn=dsn, password=password)
    except ValueError as exc:
        problem = exc.errors()[0]["msg"] if hasattr(exc, "errors") else str(exc)
        raise InvalidSpec(f"{_safe(dsn)}: {problem}") from None


def _safe(dsn: str) -> str:
    """The DSN as an error may show it: never with a password."""
    parts = urlsplit(dsn)
    netloc = parts.netloc if parts.password is None else parts.netloc.replace(f":{parts.password}@", ":[REDACTED]@")
    return urlunsplit((parts.scheme, netloc, parts.path, "[query left out]" if parts.query else "", ""))


_PG_FOREIGN_KEYS = """
SELECT c.conrelid::regclass::text, a.attname, c.confrelid::regclass::text, f.attname
FROM pg_catalog.pg_constraint c
JOIN pg_catalog.pg_namespace n ON n.oid = c.connamespace
CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(col, fcol, pos)
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col
JOIN pg_catalog.pg_attribute f ON f.attrelid = c.confrelid AND f.attnum = k.fcol
WHERE c.contype = 'f' AND n.nspname = 'public'
ORDER BY 1, c.conname, k.pos
"""


def _pg_catalog(grant: SqlGrant, dsn: str) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """(table or view, its columns with their types) of the public schema and its foreign keys
    (``table.column -> table.column``), read in a read-only transaction."""
    from ..capabilities._secrets import read_secret

    try:
        import psycopg
    except ImportError:
        raise InvalidSpec(
            "importing a PostgreSQL database needs the postgres extra (glovebox-runtime[postgres])"
        ) from None
    secret = None
    if grant.password is not None:
        secret = read_secret(grant.password.provider, grant.password.source)
        if secret is None:
            raise InvalidSpec(f"{dsn}: the password source ({grant.password.provider}) has no usable value")
    try:
        with psycopg.connect(dsn, password=secret, connect_timeout=10, autocommit=True) as connection:
            connection.execute("BEGIN READ ONLY")
            rows = connection.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
            ).fetchall()
            references = connection.execute(_PG_FOREIGN_KEYS).fetchall()
            connection.execute("ROLLBACK")
    except psycopg.Error as exc:
        raise InvalidSpec(f"{dsn}: cannot read the database's catalog ({type(exc).__name__})") from None
    found: dict[str, list[str]] = {}
    for table, column, kind in rows:
        found.setdefault(str(table), []).append(f"{column} {kind}")
    keys = [f"{table}.{column} -> {target}.{to}" for table, column, target, to in references]
    return list(found.items()), keys


def _path(dsn: str) -> Path:
    try:
        SqlGrant(database="x", dsn=dsn)
    except ValueError as exc:
        raise InvalidSpec(
            f"{_safe(dsn)!r}: only sqlite:///path (sqlite:////abs/path.db) and postgresql://user@host/db DSNs "
            "can be imported"
        ) from exc
    path = Path(dsn.removeprefix("sqlite:///")).resolve()
    if not path.is_file():
        raise InvalidSpec(f"{dsn}: {path} is not a file (a grant never creates a database)")
    return path


def _catalog(path: Path, dsn: str) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """(table or view, its columns with their declared types) and the foreign keys
    (``table.column -> table.column``), read-only."""
    try:
        connection = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
        try:
            names = connection.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'"
                " ORDER BY name"
            ).fetchall()
            found: list[tuple[str, list[str]]] = []
            keys: list[str] = []
            for (table,) in names:
                info = connection.execute("SELECT name, type FROM pragma_table_info(?)", (table,)).fetchall()
                found.append((str(table), [f"{column} {kind}".strip() for column, kind in info]))
                references = connection.execute(
                    'SELECT k."table", k."from", k."to" FROM pragma_foreign_key_list(?) k'
                    ' LEFT JOIN pragma_table_info(?) c ON c.name = k."from" ORDER BY c.cid, k.id, k.seq',
                    (table, table),
                ).fetchall()
                keys.extend(f"{table}.{column} -> {_referenced(target, to)}" for target, column, to in references)
            return found, keys
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise InvalidSpec(f"{dsn}: cannot read the database's catalog: {exc}") from exc


def _referenced(table: str, column: str | None) -> str:
    return f"{table}.{column}" if column else f"{table} (its primary key)"


def sql_fragment(
    api: str, manifests: list[Manifest], actions: list[str], _secrets: list[Any], granted: dict[str, Any] | None = None
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
        "grants": [{"tool": f"{api}-*", "sql": [{"database": api, **(granted or {})}]}],
    }
