"""What the SQL tests share: a real SQLite shop database and a snapshot of everything in it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

ORDERS = [("widget", 3), ("gadget", 1), ("gizmo", 7)]


def make_shop(path: Path) -> Path:
    """A database with orders (3 rows) and users (1 row, with a secret column)."""
    connection = sqlite3.connect(path)
    connection.executescript(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, qty INTEGER);"
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, password TEXT);"
        "INSERT INTO users (name, password) VALUES ('ann', 'hunter2');"
    )
    connection.executemany("INSERT INTO orders (item, qty) VALUES (?, ?)", ORDERS)
    connection.commit()
    connection.close()
    return path


def snapshot(path: Path) -> dict[str, Any]:
    """Every row of every table and the whole schema: equal snapshots mean the database is unchanged."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        schema = connection.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        tables = [name for kind, name, _ in schema if kind == "table"]
        rows = {name: connection.execute(f'SELECT * FROM "{name}"').fetchall() for name in tables}
        return {"schema": schema, "rows": rows}
    finally:
        connection.close()


def shop_policy(dsn: str, **grant: Any) -> dict[str, Any]:
    """A policy that lets anyone call any tool, grants the shop database, and lets `boss` approve."""
    return {
        "version": 1,
        "defaults": {"action": "allow"},
        "principals": {"boss": {"scopes": ["glovebox:approve"]}},
        "grants": [{"tool": "*", "sql": [{"database": "shop", "dsn": dsn, **grant}]}],
    }
