"""Reading a SQLite database's schema under a read grant, through a real C guest, and attacks on it.

``PRAGMA table_info``/``table_xinfo``/``index_list``/``foreign_key_list`` of a granted
table and ``EXPLAIN [QUERY PLAN]`` of a read are reads; every pragma that sets
something or has a side effect, a description of a table not granted (or of one whose
columns the grant restricts), and ``EXPLAIN`` of a write stay refused with the exact
code and kind, and leave the database unchanged. The engine's authorizer is attacked
apart, with the host's classifier bypassed.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.capabilities._sqlcheck import classify
from glovebox.capabilities._sqlite import EngineRefused, Plan, run_sqlite
from glovebox.model._grants import SqlRule

from .sqlfixtures import make_shop, shop_policy, snapshot
from .test_sql import _call

READ_ONLY = {"select": "allow", "insert": "block", "update": "block", "delete": "block", "ddl": "block"}


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """The shop database plus an index on orders and a table whose foreign key references orders."""
    path = make_shop(tmp_path / "shop.db")
    connection = sqlite3.connect(path)
    connection.executescript(
        "CREATE INDEX orders_item ON orders (item);"
        "CREATE TABLE lines (id INTEGER PRIMARY KEY,"
        " order_id INTEGER NOT NULL REFERENCES orders (id) ON DELETE CASCADE, note TEXT);"
    )
    connection.close()
    return path


@pytest.fixture
def reader(tmp_path: Path, shop: Path, build_guest: Callable[[str], Path]) -> Callable[..., glovebox.Runtime]:
    """A Runtime whose `client` tool may only read the shop database, granted as given."""

    def make(**grant: Any) -> glovebox.Runtime:
        policy = glovebox.Policy.model_validate(shop_policy(f"sqlite:///{shop}", **grant))
        rt = glovebox.Runtime(home=tmp_path / "home", policy=policy)
        manifest = {"name": "client", "capabilities": {"sql": [{"database": "shop", "actions": READ_ONLY}]}}
        rt.register(build_guest("sql_client"), manifest=manifest)
        return rt

    return make


def test_a_read_grant_describes_its_tables_and_explains_its_reads(reader: Callable[..., glovebox.Runtime]) -> None:
    with reader(tables=["orders", "lines"]) as rt:
        info = _call(rt, "PRAGMA table_info(orders)")
        quoted = _call(rt, "PRAGMA main.table_xinfo('orders')")
        indexes = _call(rt, "PRAGMA index_list(orders)")
        keys = _call(rt, "PRAGMA foreign_key_list(lines)")
        plan = _call(rt, "EXPLAIN QUERY PLAN SELECT item FROM orders WHERE item = ?", text="widget")
        code = _call(rt, "EXPLAIN SELECT item FROM orders")
    assert info.ok, info.to_dict()
    assert info.output["columns"] == ["cid", "name", "type", "notnull", "dflt_value", "pk"]
    assert [row[1:3] for row in info.output["rows"]] == [["id", "INTEGER"], ["item", "TEXT"], ["qty", "INTEGER"]]
    assert quoted.ok and [row[1] for row in quoted.output["rows"]] == ["id", "item", "qty"], quoted.to_dict()
    assert indexes.ok and [row[1] for row in indexes.output["rows"]] == ["orders_item"], indexes.to_dict()
    assert keys.ok, keys.to_dict()
    assert [row[2:5] + row[6:7] for row in keys.output["rows"]] == [["orders", "order_id", "id", "CASCADE"]]
    assert plan.ok and "USING COVERING INDEX orders_item" in plan.output["rows"][0][3], plan.to_dict()
    assert code.ok and code.output["columns"][:2] == ["addr", "opcode"], code.to_dict()
    entry = info.meta["sql"][0]
    assert (entry["kind"], entry["tables"], entry["decision"]) == ("select", ["orders"], "allow")
    assert plan.meta["sql"][0]["fingerprint"] == "EXPLAIN QUERY PLAN SELECT item FROM orders WHERE item = ?"


def test_an_index_description_needs_every_table_granted(reader: Callable[..., glovebox.Runtime]) -> None:
    with reader() as rt:
        whole = _call(rt, "PRAGMA index_info(orders_item)")
    with reader(tables=["orders"]) as rt:
        some = _call(rt, "PRAGMA index_xinfo(orders_item)")
    assert whole.ok and whole.output["rows"] == [[0, 1, "item"]], whole.to_dict()
    assert some.code == "capability_denied", some.to_dict()
    denial = some.error.details["denials"][0]
    assert (denial["kind"], denial["table"]) == ("select", "pragma index_xinfo")
    assert "tables: ['*']" in denial["reason"]


ATTACKS = [
    ("PRAGMA table_info(users)", "select"),  # a table not granted
    ("PRAGMA foreign_key_list('users')", "select"),
    ("PRAGMA temp.table_info(orders)", "unknown"),
    ("PRAGMA index_info(orders_item)", "select"),  # names an index: every table must be granted
    ("PRAGMA user_version = 5", "other"),
    ("PRAGMA main.user_version = 5", "other"),
    ("PRAGMA user_version", "other"),
    ("PRAGMA writable_schema = ON", "other"),
    ("PRAGMA writable_schema", "other"),
    ("PRAGMA journal_mode = DELETE", "other"),
    ("PRAGMA foreign_keys = OFF", "other"),
    ("PRAGMA incremental_vacuum(100)", "other"),
    ("PRAGMA optimize", "other"),
    ("PRAGMA wal_checkpoint(TRUNCATE)", "other"),
    ("PRAGMA table_info(5)", "other"),
    ("PRAGMA table_info(orders); DROP TABLE orders", "unknown"),
    ("EXPLAIN QUERY PLAN DELETE FROM orders", "delete"),
    ("EXPLAIN DELETE FROM orders", "delete"),
    ("EXPLAIN UPDATE orders SET qty = 0", "update"),
    ("explain /* x */ query -- y\n plan INSERT INTO orders (item) VALUES ('x')", "insert"),
    ("EXPLAIN QUERY PLAN SELECT name FROM users", "select"),
    ("EXPLAIN EXPLAIN SELECT 1", "other"),
    ("EXPLAIN PRAGMA user_version = 5", "other"),
    ("EXPLAIN QUERY PLAN DROP TABLE orders", "ddl"),
]


@pytest.mark.parametrize(("sql", "kind"), ATTACKS)
def test_what_is_not_a_description_of_a_granted_table_stays_refused(
    reader: Callable[..., glovebox.Runtime], shop: Path, sql: str, kind: str
) -> None:
    before = snapshot(shop)
    version = sqlite3.connect(shop).execute("PRAGMA user_version").fetchone()
    with reader(tables=["orders", "lines"]) as rt:
        result = _call(rt, sql)
    assert result.code == "capability_denied", result.to_dict()
    denial = result.error.details["denials"][0]
    assert denial["capability"] == "sql" and denial["kind"] == kind, denial
    assert snapshot(shop) == before
    assert sqlite3.connect(shop).execute("PRAGMA user_version").fetchone() == version


def test_a_table_whose_columns_are_restricted_is_not_described(reader: Callable[..., glovebox.Runtime]) -> None:
    with reader(columns={"users": ["id", "name"]}) as rt:
        described = _call(rt, "PRAGMA table_info(users)")
        catalog = _call(rt, "PRAGMA index_list(orders)")
        fine = _call(rt, "PRAGMA table_info(orders)")
    assert described.code == "capability_denied", described.to_dict()
    assert "would name the others" in described.error.details["denials"][0]["reason"]
    assert catalog.ok and fine.ok, (catalog.to_dict(), fine.to_dict())


ENGINE_ATTACKS = [
    "PRAGMA user_version = 5",
    "PRAGMA writable_schema = ON",
    "PRAGMA table_info(users)",
    "PRAGMA table_info = users",
    "PRAGMA index_info(orders_item)",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA foreign_keys = OFF",
]


@pytest.mark.parametrize("sql", ENGINE_ATTACKS)
def test_the_engine_refuses_a_pragma_that_is_not_the_judged_description(shop: Path, sql: str) -> None:
    before = snapshot(shop)
    rule = SqlRule(database="shop", tables=["orders"], actions=READ_ONLY)
    plan = Plan(rule, classify("PRAGMA table_info(orders)"), time.monotonic() + 5)  # what the host believed
    with pytest.raises((EngineRefused, sqlite3.OperationalError)):
        run_sqlite(f"sqlite:///{shop}", sql, [], plan)
    assert snapshot(shop) == before
    assert sqlite3.connect(shop).execute("PRAGMA user_version").fetchone() == (0,)
    answer = run_sqlite(f"sqlite:///{shop}", "PRAGMA table_info(orders)", [], plan)
    assert answer.row_count == 3


def test_the_engine_refuses_an_explained_read_of_a_table_not_granted(shop: Path) -> None:
    rule = SqlRule(database="shop", tables=["orders"], actions=READ_ONLY)
    plan = Plan(rule, classify("EXPLAIN QUERY PLAN SELECT item FROM orders"), time.monotonic() + 5)
    with pytest.raises(EngineRefused):
        run_sqlite(f"sqlite:///{shop}", "EXPLAIN QUERY PLAN SELECT password FROM users", [], plan)
    assert run_sqlite(f"sqlite:///{shop}", "EXPLAIN QUERY PLAN SELECT item FROM orders", [], plan).row_count == 1


def test_the_engines_refusal_names_what_it_refused(shop: Path) -> None:
    rule = SqlRule(database="shop", actions=READ_ONLY)
    plan = Plan(rule, classify("PRAGMA table_info(orders)"), time.monotonic() + 5)
    with pytest.raises(EngineRefused, match=r"^PRAGMA user_version\(5\) is not allowed: only what the statement"):
        run_sqlite(f"sqlite:///{shop}", "PRAGMA user_version = 5", [], plan)
    with pytest.raises(EngineRefused, match=r"^a transaction \(BEGIN, COMMIT, ROLLBACK\) is not allowed"):
        run_sqlite(f"sqlite:///{shop}", "BEGIN", [], plan)
