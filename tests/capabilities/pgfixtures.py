"""What the PostgreSQL tests share: a shop database on the test server, its least-privilege role, a snapshot."""

from __future__ import annotations

import itertools
from typing import Any

from .sqlfixtures import ORDERS

_names = itertools.count()


def make_pg_shop(server: Any) -> str:
    """A fresh database with orders (3 rows), users (a secret column) and a sequence; its DSN (no password)."""
    name = f"shop{next(_names)}"
    dsn = server.create_database(name)
    with server.connect(name) as connection:
        connection.execute(
            "CREATE TABLE orders (id serial PRIMARY KEY, item text NOT NULL, qty integer);"
            "CREATE TABLE users (id serial PRIMARY KEY, name text, password text);"
            "CREATE SEQUENCE tickets;"
            "INSERT INTO users (name, password) VALUES ('ann', 'hunter2');"
        )
        for item, qty in ORDERS:
            connection.execute("INSERT INTO orders (item, qty) VALUES (%s, %s)", (item, qty))
    return str(dsn)


def pg_snapshot(server: Any, dsn: str) -> dict[str, Any]:
    """Every row of every public table, the catalog's relations and the sequence's state."""
    name = dsn.rsplit("/", 1)[1]
    with server.connect(name) as connection:
        relations = connection.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' ORDER BY 1"
        ).fetchall()
        tables = [rel for rel, kind in relations if kind == "r"]
        rows = {table: connection.execute(f'SELECT * FROM "{table}" ORDER BY 1').fetchall() for table in tables}
        sequence = connection.execute("SELECT last_value, is_called FROM tickets").fetchone()
        roles = connection.execute("SELECT rolname, rolsuper FROM pg_roles ORDER BY 1").fetchall()
        objects = connection.execute("SELECT count(*) FROM pg_largeobject_metadata").fetchone()
    return {"relations": relations, "rows": rows, "sequence": sequence, "roles": roles, "large_objects": objects}


def pg_policy(dsn: str, password_env: str, **grant: Any) -> dict[str, Any]:
    """A policy granting the shop database with its password read from ``password_env``; `boss` approves."""
    return {
        "version": 1,
        "defaults": {"action": "allow"},
        "principals": {"boss": {"scopes": ["glovebox:approve"]}},
        "grants": [
            {
                "tool": "*",
                "sql": [
                    {"database": "shop", "dsn": dsn, "password": {"provider": "env", "source": password_env}, **grant}
                ],
            }
        ],
    }
