"""The SQL part of ``glovebox demo``: an agent on a real SQLite database, and the DROP TABLE that never runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import click

from ..importers import import_sql
from ..model._result import CallResult
from ..policy import Policy
from ..runtime._runtime import Runtime

__all__ = ["sql_scenarios"]


def _shop(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.executescript(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, qty INTEGER);"
        "INSERT INTO orders (item, qty) VALUES ('widget', 3), ('gadget', 1), ('test-order', 9), ('test-order-2', 9);"
    )
    connection.commit()
    connection.close()


def _state(path: Path) -> tuple[int, list[Any]]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT count(*) FROM orders").fetchone()[0]
        schema = connection.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        return int(rows), schema
    finally:
        connection.close()


def sql_scenarios(home: Path, work: Path) -> tuple[list[tuple[str, str, Any, str, CallResult]], bool]:
    """Import a shop database, read it, try DROP TABLE and DELETE; return the rows and whether it is intact."""
    database = work / "shop.db"
    _shop(database)
    before = _state(database)
    click.secho(f"\nImporting the database {database.name} as tools (glovebox import sql)", bold=True)
    with Runtime(home=home) as rt:
        imported = import_sql(rt, f"sqlite:///{database}", name="shop")
    for name in sorted(imported.added):
        click.echo(f"  {imported.ref(name)}")
    policy = Policy.model_validate({**imported.policy, "principals": {"admin": {"scopes": ["glovebox:approve"]}}})
    rows: list[tuple[str, str, Any, str, CallResult]] = []
    with Runtime(home=home, policy=policy) as rt:

        def run(title: str, tool: str, value: Any, expect: str) -> CallResult:
            result = rt.call(tool, value, principal="agent")
            rows.append((title, tool, value, expect, result))
            return result

        run("the agent reads the orders", "shop-query", {"sql": "SELECT item, qty FROM orders"}, "ok")
        run('"delete the test data" as DROP TABLE', "shop-execute", {"sql": "DROP TABLE orders"}, "capability_denied")
        run(
            "a DELETE hidden in a read",
            "shop-query",
            {"sql": "WITH x AS (SELECT 1) DELETE FROM orders"},
            "capability_denied",
        )
        delete = {"sql": "DELETE FROM orders WHERE item LIKE ?", "params": ["test-%"]}
        run("the same as a DELETE waits for a person", "shop-execute", delete, "approval_required")
    after = _state(database)
    intact = after == before
    click.echo(
        f"  the orders table afterwards: {after[0]} rows (before: {before[0]}), "
        f"schema {'unchanged' if after[1] == before[1] else 'CHANGED'}"
    )
    return rows, intact
