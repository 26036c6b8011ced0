"""``glovebox import sql``: a real SQLite database as NAME-query and NAME-execute, attacked through them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli
from glovebox.importers._guest import _sources, _target, sql_guest

from ..capabilities.sqlfixtures import make_shop, snapshot

ATTACKS = [
    "COMMIT; DROP TABLE orders",
    "WITH x AS (SELECT 1) DELETE FROM orders",
    "PRAGMA writable_schema = 1",
    "ATTACH DATABASE '{tmp}/attached.db' AS x",
    "VACUUM INTO '{tmp}/copy.db'",
    "SELECT load_extension('{tmp}/evil')",
    "SELECT /*! 1; DROP TABLE orders */ 1",
    "SELECT * INTO stolen FROM orders",
    "WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d",
    "SELECT readfile('/etc/passwd')",
    "DROP TABLE orders",
    "UPDATE orders SET qty = 0",
]


@pytest.fixture(scope="session")
def sqlop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generic SQL guest, built once per session."""
    return sql_guest(tmp_path_factory.mktemp("sqlop-home"))


def _seed(home: Path, sqlop: Path) -> None:
    """Put the built guest where ``home``'s import looks for it (the cache an import fills)."""
    target = _target(home, _sources("sqlop"), "sqlop")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(sqlop.read_bytes())


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return make_shop(tmp_path / "shop.db")


@pytest.fixture
def imported(tmp_path: Path, shop: Path, sqlop: Path) -> tuple[Path, dict[str, Any]]:
    """A home with the shop imported, and the policy fragment (plus an approver) in force."""
    home = tmp_path / "home"
    _seed(home, sqlop)
    with glovebox.Runtime(home=home) as rt:
        result = glovebox.import_sql(rt, f"sqlite:///{shop}", name="shop")
    assert sorted(result.added) == ["shop-execute", "shop-query"]
    policy = {**result.policy, "principals": {"boss": {"scopes": ["glovebox:approve"]}}}
    return home, policy


def _rt(imported: tuple[Path, dict[str, Any]]) -> glovebox.Runtime:
    home, policy = imported
    return glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(policy))


def test_the_tools_describe_the_catalog_and_the_fragment_grants_the_alias(
    imported: tuple[Path, dict[str, Any]], shop: Path
) -> None:
    _, policy = imported
    with _rt(imported) as rt:
        query = rt.tool("shop-query")
    assert "orders(id INTEGER, item TEXT, qty INTEGER)" in query.manifest.description
    assert "users(id INTEGER, name TEXT, password TEXT)" in query.manifest.description
    assert query.manifest.capabilities.sql[0].actions.delete == "block"
    assert policy["grants"] == [{"tool": "shop-*", "sql": [{"database": "shop", "dsn": f"sqlite:///{shop.resolve()}"}]}]
    assert "dsn" not in query.manifest.to_json()


def test_query_returns_columns_and_rows(imported: tuple[Path, dict[str, Any]]) -> None:
    with _rt(imported) as rt:
        result = rt.call(
            "shop-query", {"sql": "SELECT item, qty FROM orders WHERE qty >= ? ORDER BY id", "params": [3]}
        )
    assert result.ok, result.to_dict()
    assert result.output == {
        "columns": ["item", "qty"],
        "rows": [["widget", 3], ["gizmo", 7]],
        "row_count": 2,
        "truncated": False,
        "rows_changed": 0,
    }


@pytest.mark.parametrize("tool", ["shop-query", "shop-execute"])
@pytest.mark.parametrize("sql", ATTACKS)
def test_each_bypass_through_the_imported_tools(
    imported: tuple[Path, dict[str, Any]], shop: Path, tmp_path: Path, tool: str, sql: str
) -> None:
    before = snapshot(shop)
    with _rt(imported) as rt:
        result = rt.call(tool, {"sql": sql.format(tmp=tmp_path)})
    writes = ("WITH x AS (SELECT 1) DELETE", "WITH d AS (DELETE", "UPDATE orders")
    expected = "approval_required" if tool == "shop-execute" and sql.startswith(writes) else "capability_denied"
    assert result.code == expected, result.to_dict()
    assert snapshot(shop) == before
    assert not (tmp_path / "attached.db").exists() and not (tmp_path / "copy.db").exists()


def test_execute_refuses_drop_and_holds_delete_for_approval(imported: tuple[Path, dict[str, Any]], shop: Path) -> None:
    before = snapshot(shop)
    with _rt(imported) as rt:
        dropped = rt.call("shop-execute", {"sql": "DROP TABLE orders"})
        deleted = rt.call("shop-execute", {"sql": "DELETE FROM orders WHERE qty < ?", "params": [2]})
        assert dropped.code == "capability_denied"
        assert dropped.error.details["denials"][0]["kind"] == "ddl"
        assert deleted.code == "approval_required"
        assert snapshot(shop) == before
        rt.approve(deleted.error.details["approval_id"], principal="boss")
        other = rt.call("shop-execute", {"sql": "DELETE FROM orders WHERE qty < ?", "params": [100]})
        assert other.code == "approval_required"
        assert snapshot(shop) == before
        done = rt.call("shop-execute", {"sql": "DELETE FROM orders WHERE qty < ?", "params": [2]})
    assert done.ok and done.output["rows_changed"] == 1
    assert [row[1] for row in snapshot(shop)["rows"]["orders"]] == ["widget", "gizmo"]


def test_a_reimport_of_the_same_database_changes_nothing(imported: tuple[Path, dict[str, Any]], shop: Path) -> None:
    with _rt(imported) as rt:
        again = glovebox.import_sql(rt, f"sqlite:///{shop}", name="shop")
    assert again.added == [] and sorted(again.unchanged) == ["shop-execute", "shop-query"]


@pytest.mark.parametrize("dsn", ["postgresql://x/y", "sqlite:///{tmp}/missing.db", "sqlite:///{tmp}/not-a-db.txt"])
def test_a_bad_dsn_is_refused_by_name(tmp_path: Path, dsn: str) -> None:
    (tmp_path / "not-a-db.txt").write_text("hello, not a database " * 100)
    with (
        glovebox.Runtime(home=tmp_path / "home") as rt,
        pytest.raises(glovebox.InvalidSpec, match="sqlite|file|catalog|user, host and database"),
    ):
        glovebox.import_sql(rt, dsn.format(tmp=tmp_path), name="shop")
        assert rt.tools() == []


def test_the_cli_imports_and_writes_the_fragment(tmp_path: Path, shop: Path, sqlop: Path) -> None:
    _seed(tmp_path / "home", sqlop)
    out = tmp_path / "fragment.yaml"
    runner = CliRunner()
    env = {"GLOVEBOX_HOME": str(tmp_path / "home")}
    result = runner.invoke(
        cli, ["import", "sql", f"sqlite:///{shop}", "--name", "shop", "--policy-out", str(out)], env=env
    )
    assert result.exit_code == 0, result.output
    assert "shop-query" in result.output and "shop-execute" in result.output
    fragment = yaml.safe_load(out.read_text())
    assert fragment["grants"][0]["sql"][0]["database"] == "shop"
    listed = runner.invoke(cli, ["tools", "--json"], env=env)
    assert {tool["name"] for tool in json.loads(listed.output)} == {"shop-query", "shop-execute"}


def test_a_denied_statement_is_refused_with_the_approvers_reason(
    imported: tuple[Path, dict[str, Any]], shop: Path
) -> None:
    before = snapshot(shop)
    statement = {"sql": "DELETE FROM orders WHERE qty < ?", "params": [2]}
    with _rt(imported) as rt:
        asked = rt.call("shop-execute", statement)
        assert asked.code == "approval_required"
        rt.deny(asked.error.details["approval_id"], principal="boss", reason="that is production data")
        refused = rt.call("shop-execute", statement)
        assert refused.code == "capability_denied"
        [denial] = refused.error.details["denials"]
        assert denial["kind"] == "delete" and "that is production data" in denial["reason"]
        again = rt.call("shop-execute", {"sql": "DELETE FROM orders WHERE qty < ?", "params": [3]})
        assert again.code == "approval_required"  # the denial is bound to that one statement
    assert snapshot(shop) == before


def test_the_description_lists_foreign_keys_and_query_reads_the_schema(tmp_path: Path, sqlop: Path) -> None:
    path = make_shop(tmp_path / "shop.db")
    connection = sqlite3.connect(path)
    connection.executescript(
        "CREATE TABLE lines (id INTEGER PRIMARY KEY, order_id INTEGER REFERENCES orders (id),"
        " user_id INTEGER REFERENCES users, note TEXT);"
    )
    connection.close()
    before = snapshot(path)
    home = tmp_path / "home"
    _seed(home, sqlop)
    with glovebox.Runtime(home=home) as rt:
        policy = glovebox.import_sql(rt, f"sqlite:///{path}", name="shop").policy
    with glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(policy)) as rt:
        description = rt.tool("shop-query").manifest.description
        keys = rt.call("shop-query", {"sql": "PRAGMA foreign_key_list(lines)"})
        columns = rt.call("shop-query", {"sql": "PRAGMA table_info(orders)"})
        plan = rt.call(
            "shop-query", {"sql": "EXPLAIN QUERY PLAN SELECT * FROM lines WHERE order_id = ?", "params": [1]}
        )
        writes = rt.call("shop-query", {"sql": "PRAGMA user_version = 3"})
        explained = rt.call("shop-execute", {"sql": "EXPLAIN QUERY PLAN DELETE FROM orders"})
    assert "Foreign keys: lines.order_id -> orders.id, lines.user_id -> users (its primary key)" in description
    assert "PRAGMA table_info" in description and "EXPLAIN QUERY PLAN" in description
    assert keys.ok and {row[2] for row in keys.output["rows"]} == {"orders", "users"}, keys.to_dict()
    assert columns.ok and [row[1] for row in columns.output["rows"]] == ["id", "item", "qty"]
    assert plan.ok and plan.output["rows"][0][3].startswith("SCAN lines"), plan.to_dict()
    assert writes.code == "capability_denied" and writes.error.details["denials"][0]["kind"] == "other"
    assert explained.code == "approval_required"  # judged as the DELETE it explains
    assert "a DELETE statement on the database 'shop' needs approval" in explained.error.message
    assert snapshot(path) == before
