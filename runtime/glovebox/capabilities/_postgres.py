"""Running one checked statement on PostgreSQL, with the server enforcing the grant again.

Defence in depth: what the host's classifier (``_pgcheck``) misreads, the
server still refuses. Each statement runs in a transaction of its own, sent
through ``psycopg`` in pipeline mode, which always uses the extended query
protocol: the server parses the text as exactly one statement, and
``COMMIT; DROP TABLE ...`` fails with "cannot insert multiple commands into a
prepared statement" before anything runs.

- ``BEGIN READ ONLY`` for a read (or any statement on a grant that allows
  only reads), and the session's ``default_transaction_read_only`` is on for
  such a grant, so even a statement that ends the transaction leaves a
  read-only one behind; the server then refuses writes, ``nextval``, ``SELECT
  INTO`` and data-modifying CTEs itself;
- ``SET LOCAL statement_timeout`` (and ``lock_timeout``) to the time left: the
  grant's statement timeout, inside the call's deadline;
- ``ROLLBACK`` after a read, ``COMMIT`` after a write that succeeded;
- the DSN's user should be a role holding only the granted privileges (see
  :func:`role_statements`, printed by ``glovebox sql role``): then file
  reads, ``lo_export``, ``COPY ... TO PROGRAM`` and ``dblink`` fail for lack of
  privilege whatever the host believed.

Connections are kept per (DSN, password) for the next statement (at most
:data:`IDLE_CONNECTIONS` idle); one whose transaction did not end cleanly is
closed, never reused. The password is read by the caller from the grant's
secret provider and never appears in an answer or a log line.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import hashlib
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..model._grants import SQL_KINDS, SqlGrant, SqlRule
from ._sqlite import Answer, EngineFailed, EngineRefused, EngineTimeout, Plan, collect

__all__ = ["IDLE_CONNECTIONS", "close_idle", "role_statements", "run_postgres"]

logger = logging.getLogger("glovebox.sql")

#: Idle connections kept per (DSN, password).
IDLE_CONNECTIONS = 4
#: Seconds a connection attempt may take at most (less when the call has less time left).
CONNECT_TIMEOUT = 10
#: SQLSTATEs of what the server refused on the grant's behalf.
_REFUSALS = {"25006": "read-only transaction", "42501": "insufficient privilege", "42601": "more than one statement"}
_TIMEOUTS = frozenset({"57014", "55P03"})  # query_canceled, lock_not_available

_idle: dict[str, list[Any]] = {}
_lock = threading.Lock()


def _key(dsn: str, password: str | None) -> str:
    return hashlib.sha256(f"{dsn}\0{password or ''}".encode()).hexdigest()


def _read_only(rule: SqlRule) -> bool:
    return all(getattr(rule.actions, kind) == "block" for kind in ("insert", "update", "delete", "ddl", "other"))


def _connect(dsn: str, password: str | None, read_only: bool, stop: float) -> Any:
    import psycopg

    options = "-c default_transaction_read_only=on" if read_only else ""
    timeout = max(1, min(CONNECT_TIMEOUT, math.ceil(stop - time.monotonic())))
    try:
        connection = psycopg.connect(
            dsn, password=password, autocommit=True, connect_timeout=timeout, options=options,
            application_name="glovebox",
        )  # fmt: skip
    except psycopg.Error as exc:
        logger.warning("cannot connect to a granted PostgreSQL database: %s", type(exc).__name__)
        raise EngineFailed(f"cannot connect to the database ({type(exc).__name__})") from None
    return connection


@contextmanager
def _connection(dsn: str, password: str | None, read_only: bool, stop: float) -> Iterator[Any]:
    key = _key(dsn, password) + ("ro" if read_only else "rw")
    with _lock:
        pool = _idle.setdefault(key, [])
        connection = pool.pop() if pool else None
    if connection is None or connection.closed:
        connection = _connect(dsn, password, read_only, stop)
    healthy = False
    try:
        yield connection
        healthy = connection.info.transaction_status == 0  # idle: the transaction ended cleanly
    finally:
        with _lock:
            pool = _idle.setdefault(key, [])
            if healthy and len(pool) < IDLE_CONNECTIONS:
                pool.append(connection)
                connection = None
        if connection is not None:
            connection.close()


def close_idle() -> None:
    """Close every idle connection (tests, and a host shutting down)."""
    with _lock:
        pools = list(_idle.values())
        _idle.clear()
    for pool in pools:
        for connection in pool:
            connection.close()


def run_postgres(dsn: str, password: str | None, text: str, params: list[Any], plan: Plan) -> Answer:
    """Run ``text`` once under ``plan``, with ``$1``-style parameters.

    Raises:
        EngineRefused: the server refused it on the grant's behalf (read-only
            transaction, missing privilege, more than one statement).
        EngineTimeout: it ran past ``plan.stop``.
        EngineFailed: the server failed it for another reason, or no connection could be made.
    """
    import psycopg

    read = plan.statement.kinds == {"select"} or _read_only(plan.rule)
    left_ms = int((plan.stop - time.monotonic()) * 1000)
    if left_ms <= 0:
        raise EngineTimeout("no time left for the statement")
    with _connection(dsn, password, _read_only(plan.rule), plan.stop) as connection:
        cursor = psycopg.RawCursor(connection)
        try:
            with connection.pipeline() as pipeline:
                connection.execute("BEGIN READ ONLY" if read else "BEGIN")
                connection.execute(f"SET LOCAL statement_timeout = {left_ms}")
                connection.execute(f"SET LOCAL lock_timeout = {left_ms}")
                cursor.execute(text, params)
                pipeline.sync()
                answer = collect(cursor, plan.rule, plan.statement, _value)
                connection.execute("ROLLBACK" if read else "COMMIT")
        except psycopg.Error as exc:
            _abandon(connection)
            state = getattr(exc, "sqlstate", None) or ""
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if state in _REFUSALS:
                raise EngineRefused(f"{_REFUSALS[state]}: {first}") from None
            if state in _TIMEOUTS:
                raise EngineTimeout(first) from None
            raise EngineFailed(f"{type(exc).__name__}: {first}") from None
        finally:
            cursor.close()
    return answer


def _abandon(connection: Any) -> None:
    """End whatever transaction a failed statement left; a connection that cannot is closed."""
    try:
        if not connection.closed and connection.info.transaction_status != 0:
            connection.execute("ROLLBACK")
    except Exception:  # a broken connection: the pool will not keep it
        connection.close()


def _value(value: Any) -> Any:
    if isinstance(value, (bytes, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID, datetime.timedelta)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_value(item) for item in value]
    if isinstance(value, dict):
        try:
            json.dumps(value, allow_nan=False)
            return value
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def role_statements(grant: SqlGrant, role: str) -> list[str]:
    """The SQL an operator runs to make ``role`` hold only what ``grant`` allows.

    A login role without superuser, CREATEDB, CREATEROLE or inherited rights,
    with CONNECT on the database, USAGE on the public schema, and per granted
    table the privileges of the kinds the grant does not block (columns
    where the grant restricts a table's); DDL and "other" are never granted
    (the role owns nothing, so it can drop nothing). Tables ``*`` become
    ``ALL TABLES IN SCHEMA public``.
    """
    from urllib.parse import urlsplit

    database = urlsplit(grant.dsn).path.lstrip("/")
    who = _quote(role)
    lines = [
        f"CREATE ROLE {who} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS;",
        f"REVOKE ALL ON DATABASE {_quote(database)} FROM {who};",
        f"GRANT CONNECT ON DATABASE {_quote(database)} TO {who};",
        f"REVOKE CREATE ON SCHEMA public FROM {who};",
        f"GRANT USAGE ON SCHEMA public TO {who};",
    ]
    privileges = [
        kind.upper() for kind in SQL_KINDS[:4] if getattr(grant.actions, kind) != "block"
    ]  # select, insert, update, delete
    if not privileges:
        return lines
    tables = ["ALL TABLES IN SCHEMA public"] if "*" in grant.tables else [_quote(t) for t in grant.tables]
    for table in tables:
        name = table.strip('"')
        columns = grant.columns.get(name) if "*" not in grant.tables else None
        if columns:
            listed = ", ".join(_quote(column) for column in columns)
            per_column = [p for p in privileges if p != "DELETE"]
            lines.extend(f"GRANT {p} ({listed}) ON {table} TO {who};" for p in per_column)
            if "DELETE" in privileges:
                lines.append(f"GRANT DELETE ON {table} TO {who};")
        else:
            on = table if table.startswith("ALL ") else f"TABLE {table}"
            lines.append(f"GRANT {', '.join(privileges)} ON {on} TO {who};")
    if "INSERT" in privileges:
        lines.append(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {who};")
    return lines
