"""The sql capability, attacked through a real C guest on a real SQLite database.

Every bypass class that defeated read-only guards elsewhere is sent by a guest
that names the database by alias; each must end with the exact error code and
leave the database unchanged (rows and sqlite_master). The engine's own
checks are attacked apart, with the host's classifier bypassed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.capabilities._sqlcheck import classify
from glovebox.capabilities._sqlite import EngineRefused, Plan, run_sqlite
from glovebox.model._grants import SqlRule

from .sqlfixtures import make_shop, shop_policy, snapshot

#: Every test here runs on the native core and on the pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("sandbox_path")

READ_ONLY = {"select": "allow", "insert": "block", "update": "block", "delete": "block", "ddl": "block"}


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return make_shop(tmp_path / "shop.db")


def _runtime(home: Path, shop: Path, declared: dict[str, Any], **grant: Any) -> glovebox.Runtime:
    policy = glovebox.Policy.model_validate(shop_policy(f"sqlite:///{shop}", **grant))
    return glovebox.Runtime(home=home, policy=policy)


@pytest.fixture
def client(tmp_path: Path, shop: Path, build_guest: Callable[[str], Path]) -> Callable[..., glovebox.Runtime]:
    """A Runtime with the sql_client guest registered, declaring the shop database as given."""

    def make(
        declared: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **grant: Any
    ) -> glovebox.Runtime:
        declared = declared if declared is not None else {"database": "shop"}
        rt = _runtime(tmp_path / "home", shop, declared, **grant)
        manifest: dict[str, Any] = {"name": "client", "capabilities": {"sql": [declared]}}
        if limits:
            manifest["limits"] = limits
        rt.register(build_guest("sql_client"), manifest=manifest)
        return rt

    return make


def _call(rt: glovebox.Runtime, sql: str, principal: str | None = None, **extra: Any) -> glovebox.CallResult:
    return rt.call("client", {"database": "shop", "sql": sql, **extra}, principal=principal)


ATTACKS = [
    ("COMMIT; DROP TABLE orders", "unknown"),
    ("SELECT 1; DROP TABLE orders", "unknown"),
    ("WITH x AS (SELECT 1) DELETE FROM orders", "delete"),
    ("WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d", "delete"),
    ("PRAGMA writable_schema = 1", "other"),
    ("PRAGMA query_only = OFF", "other"),
    ("ATTACH DATABASE '{tmp}/attached.db' AS x", "other"),
    ("VACUUM INTO '{tmp}/copy.db'", "other"),
    ("SELECT load_extension('{tmp}/evil')", "select"),
    ("SELECT /*! 1; DROP TABLE orders */ 1", "unknown"),
    ("SELECT * INTO stolen FROM orders", "ddl"),
    ("SELECT readfile('/etc/passwd')", "select"),
    ("SELECT zeroblob(1000000000)", "select"),
    ("SELECT * FROM pragma_table_info('users')", "select"),
    ("SELECT name, password FROM users", "select"),
    ("SELECT * FROM other.orders", "unknown"),
    ("INSERT INTO orders (item, qty) SELECT name, 1 FROM users", "insert"),
    ("DROP TABLE orders", "ddl"),
    ("DELETE FROM orders", "delete"),
    ("UPDATE orders SET qty = 0", "update"),
    ("BEGIN IMMEDIATE", "other"),
    ("SELECT ?1", "unknown"),
    ("SELEC 1", "unknown"),
]


@pytest.mark.parametrize(("sql", "kind"), ATTACKS)
def test_each_bypass_is_refused_and_changes_nothing(
    client: Callable[..., glovebox.Runtime], shop: Path, tmp_path: Path, sql: str, kind: str
) -> None:
    before = snapshot(shop)
    with client({"database": "shop", "actions": READ_ONLY}, tables=["orders"]) as rt:
        result = _call(rt, sql.format(tmp=tmp_path))
    assert result.code == "capability_denied", result.to_dict()
    denial = result.error.details["denials"][0]
    assert denial["capability"] == "sql" and denial["database"] == "shop"
    assert denial["kind"] == kind
    assert snapshot(shop) == before
    assert not (tmp_path / "attached.db").exists() and not (tmp_path / "copy.db").exists()


def test_denial_names_the_table_and_the_function(client: Callable[..., glovebox.Runtime]) -> None:
    with client(tables=["orders"]) as rt:
        table = _call(rt, "SELECT name FROM users").error.details["denials"][0]
        function = _call(rt, "SELECT load_extension('x')").error.details["denials"][0]
    assert (table["kind"], table["table"]) == ("select", "users")
    assert (function["kind"], function["function"]) == ("select", "load_extension")


def test_a_granted_select_returns_rows_with_column_names(client: Callable[..., glovebox.Runtime]) -> None:
    with client() as rt:
        result = _call(rt, "SELECT item, qty FROM orders WHERE qty > ? ORDER BY id", int=2)
    assert result.ok, result.to_dict()
    assert result.output == {
        "columns": ["item", "qty"],
        "rows": [["widget", 3], ["gizmo", 7]],
        "row_count": 2,
        "truncated": False,
        "rows_changed": 0,
    }
    entry = result.meta["sql"][0]
    assert entry["kind"] == "select" and entry["tables"] == ["orders"] and entry["rows_returned"] == 2
    assert entry["fingerprint"] == "SELECT item, qty FROM orders WHERE qty > ? ORDER BY id"


def test_an_alias_not_granted_is_denied(client: Callable[..., glovebox.Runtime], shop: Path) -> None:
    with client() as rt:
        result = rt.call("client", {"database": "elsewhere", "sql": "SELECT 1"})
    assert result.code == "capability_denied"
    assert "not granted" in result.error.details["denials"][0]["reason"]


def test_without_a_grant_the_capability_answers_denied(tmp_path: Path, build_guest: Callable[[str], Path]) -> None:
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        rt.register(build_guest("sql_client"), manifest={"name": "client"})
        result = rt.call("client", {"database": "shop", "sql": "SELECT 1"})
    assert result.code == "capability_denied"
    assert result.error.details["denials"][0]["reason"] == "the sql capability is not granted to this call"


def test_columns_restrict_what_a_select_names(client: Callable[..., glovebox.Runtime]) -> None:
    with client(tables=["users"], columns={"users": ["id", "name"]}) as rt:
        allowed = _call(rt, "SELECT id, name FROM users")
        secret = _call(rt, "SELECT password FROM users")
        star = _call(rt, "SELECT * FROM users")
    assert allowed.ok and allowed.output["rows"] == [[1, "ann"]]
    assert secret.code == "capability_denied" and secret.error.details["denials"][0]["column"] == "password"
    assert star.code == "capability_denied"


def test_a_delete_waits_for_approval_bound_to_that_exact_statement(
    client: Callable[..., glovebox.Runtime], shop: Path
) -> None:
    before = snapshot(shop)
    with client() as rt:
        first = _call(rt, "DELETE FROM orders WHERE id = ?", int=1)
        assert first.code == "approval_required"
        approval_id = first.error.details["approval_id"]
        assert first.error.details["kind"] == "delete"
        assert snapshot(shop) == before
        rt.approve(approval_id, principal="boss")
        # Another statement, or the same text with other parameters, is not what was approved.
        other = _call(rt, "DELETE FROM orders WHERE id = ?", int=2)
        wider = _call(rt, "DELETE FROM orders")
        assert other.code == wider.code == "approval_required"
        assert approval_id not in (other.error.details["approval_id"], wider.error.details["approval_id"])
        assert snapshot(shop) == before
        approved = _call(rt, "DELETE FROM orders WHERE id = ?", int=1)
        assert approved.ok, approved.to_dict()
        assert approved.output["rows_changed"] == 1
        assert approved.meta["sql"][0]["decision"] == "approved"
        again = _call(rt, "DELETE FROM orders WHERE id = ?", int=1)  # one use
        assert again.code == "approval_required"
    assert [row[0] for row in snapshot(shop)["rows"]["orders"]] == [2, 3]


def test_a_ddl_statement_is_refused_at_once_never_offered_for_approval(client: Callable[..., glovebox.Runtime]) -> None:
    with client() as rt:
        result = _call(rt, "DROP TABLE orders")
        assert result.code == "capability_denied"
        assert rt.pending_approvals() == []


def test_an_allowed_insert_runs_and_counts_its_rows(client: Callable[..., glovebox.Runtime], shop: Path) -> None:
    actions = {"insert": "allow"}
    with client({"database": "shop", "actions": actions}, actions=actions) as rt:
        result = _call(rt, "INSERT INTO orders (item, qty) VALUES (?, 2)", text="sprocket")
    assert result.ok and result.output["rows_changed"] == 1
    assert snapshot(shop)["rows"]["orders"][-1] == (4, "sprocket", 2)


def test_the_manifest_and_the_grant_intersect(client: Callable[..., glovebox.Runtime], shop: Path) -> None:
    # The policy allows inserts, the manifest blocks them: blocked.
    with client({"database": "shop", "actions": READ_ONLY}, actions={"insert": "allow"}) as rt:
        result = _call(rt, "INSERT INTO orders (item) VALUES ('x')")
    assert result.code == "capability_denied" and result.error.details["denials"][0]["kind"] == "insert"


def test_a_slow_query_is_cut_at_the_call_deadline(client: Callable[..., glovebox.Runtime]) -> None:
    slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    with client(limits={"timeout_ms": 400}) as rt:
        result = _call(rt, slow)
    assert result.code == "timeout", result.to_dict()


def test_the_grant_statement_timeout_answers_the_guest(client: Callable[..., glovebox.Runtime]) -> None:
    slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    with client(timeout_ms=200) as rt:
        result = _call(rt, slow, cope=True)
    assert result.ok and result.output == {"error": "timeout"}
    assert result.meta["sql"][0]["error"] == "timeout"


def test_a_huge_result_is_truncated_at_the_row_and_byte_limits(client: Callable[..., glovebox.Runtime]) -> None:
    many = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000) SELECT x FROM c"
    with client(max_rows=50) as rt:
        rows = _call(rt, many)
    with client(max_bytes=100) as rt:
        wide = _call(rt, "SELECT printf('%.50c', 'x') FROM orders")
    assert rows.ok and rows.output["row_count"] == 50 and rows.output["truncated"] is True
    assert wide.ok and wide.output["row_count"] == 1 and wide.output["truncated"] is True


def test_the_audit_keeps_fingerprints_and_params_only_when_inputs_are_stored(
    tmp_path: Path, shop: Path, build_guest: Callable[[str], Path]
) -> None:
    for store in (False, True):
        document = shop_policy(f"sqlite:///{shop}")
        document["audit"] = {"store_inputs": store}
        home = tmp_path / f"home-{store}"
        with glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(document)) as rt:
            rt.register(
                build_guest("sql_client"), manifest={"name": "client", "capabilities": {"sql": [{"database": "shop"}]}}
            )
            assert _call(rt, "SELECT item FROM orders WHERE item = ?", text="widget").ok
            row = list(rt.audit.records())[-1]
        egress = json.loads(row["egress"]) if isinstance(row["egress"], str) else row["egress"]
        entry = egress["sql"][0]
        assert entry["fingerprint"] == "SELECT item FROM orders WHERE item = ?"
        assert entry["kind"] == "select" and entry["tables"] == ["orders"] and entry["rows_returned"] == 1
        assert ("params" in entry) is store
        if store:
            assert entry["params"] == ["widget"]


# -- the engine on its own: what the classifier might miss, SQLite still refuses --------------------

ENGINE_ATTACKS = [
    "DELETE FROM orders",
    "DROP TABLE orders",
    "ATTACH DATABASE '{tmp}/attached.db' AS x",
    "VACUUM INTO '{tmp}/copy.db'",
    "PRAGMA writable_schema = 1",
    "SELECT load_extension('{tmp}/evil')",
    "SELECT * FROM users",
    "INSERT INTO orders (item) VALUES ('x')",
    "BEGIN",
]


@pytest.mark.parametrize("sql", ENGINE_ATTACKS)
def test_the_engine_refuses_what_a_select_was_not_judged_to_do(shop: Path, tmp_path: Path, sql: str) -> None:
    before = snapshot(shop)
    rule = SqlRule(database="shop", tables=["orders"], actions={"insert": "allow", "delete": "allow"})
    plan = Plan(rule, classify("SELECT item FROM orders"), time.monotonic() + 5)  # what the host believed
    with pytest.raises((EngineRefused, sqlite3.OperationalError)):
        run_sqlite(f"sqlite:///{shop}", sql.format(tmp=tmp_path), [], plan)
    assert snapshot(shop) == before
    assert not (tmp_path / "attached.db").exists() and not (tmp_path / "copy.db").exists()


# -- the Python guest helper ------------------------------------------------------------------------

PY_SQL = Path(__file__).resolve().parents[1] / "guests" / "py_sql.py"


def test_the_python_helper_queries_and_reports_refusals(
    tmp_path: Path, shop: Path, build_py: Callable[[Path], Path]
) -> None:
    before = snapshot(shop)
    policy = glovebox.Policy.model_validate(shop_policy(f"sqlite:///{shop}", tables=["orders"]))
    with glovebox.Runtime(home=tmp_path / "home", policy=policy) as rt:
        rt.register(build_py(PY_SQL), manifest={"name": "py-sql", "capabilities": {"sql": [{"database": "shop"}]}})
        rows = rt.call(
            "py-sql", {"database": "shop", "statement": "SELECT item FROM orders WHERE qty = ?", "params": [7]}
        )
        typed = rt.call(
            "py-sql", {"database": "shop", "statement": "SELECT ?, ?, ?, ?", "params": [None, 1.5, "x", True]}
        )
        dropped = rt.call("py-sql", {"database": "shop", "statement": "DROP TABLE orders"})
        deleted = rt.call("py-sql", {"database": "shop", "statement": "DELETE FROM orders"})
    assert rows.ok and rows.output["rows"] == [["gizmo"]], rows.to_dict()
    assert typed.ok and typed.output["rows"] == [[None, 1.5, "x", 1]], typed.to_dict()
    assert dropped.ok and dropped.output["error"] == "denied"
    assert deleted.ok and deleted.output["error"] == "approval-required"
    assert snapshot(shop) == before


# -- the host's own safety --------------------------------------------------------------------------


def test_concurrent_writers_all_land(client: Callable[..., glovebox.Runtime], shop: Path) -> None:
    actions = {"insert": "allow"}
    with client({"database": "shop", "actions": actions}, actions=actions) as rt:

        def insert(n: int) -> glovebox.CallResult:
            return _call(rt, "INSERT INTO orders (item, qty) VALUES (?, ?)", int=n, text=f"item-{n}")

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(insert, range(40)))
    assert all(result.ok for result in results), [r.to_dict() for r in results if not r.ok][:1]
    assert len(snapshot(shop)["rows"]["orders"]) == 3 + 40


def test_the_database_path_never_reaches_the_envelope_or_the_audit(
    client: Callable[..., glovebox.Runtime], shop: Path
) -> None:
    with client() as rt:
        missing = _call(rt, "SELECT * FROM nowhere")
        denied = _call(rt, "DROP TABLE orders")
        rows = [json.dumps(record) for record in rt.audit.records()]
    assert missing.code == "guest_error" and "no such table" in missing.error.message
    for text in [json.dumps(missing.to_dict()), json.dumps(denied.to_dict()), *rows]:
        assert str(shop.parent) not in text


def test_a_query_imported_with_other_types_traps(
    _isolated_env: Path, tmp_path: Path, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from glovebox.toolchains import _build

    guests = Path(__file__).resolve().parents[1] / "guests"
    sdk = tmp_path / "sdk"
    shutil.copytree(_build.sdk_dir() / "c", sdk / "c")
    world = (_build.sdk_dir() / "wit" / "world.wit").read_text()
    typed = "query: func(database: string, statement: string, params: list<sql-value>) -> result<string, sql-error>;"
    assert typed in world
    (sdk / "wit").mkdir()
    (sdk / "wit" / "world.wit").write_text(world.replace(typed, "query: func(n: u32) -> u32;"))
    monkeypatch.setattr(_build, "sdk_dir", lambda: sdk)
    wasm = glovebox.build(guests / "wrong_sql.c", tmp_path / "wrong_sql.wasm")
    policy = glovebox.Policy.model_validate(shop_policy(f"sqlite:///{shop}"))
    with glovebox.Runtime(home=_isolated_env, policy=policy) as rt:
        rt.register(wasm, manifest={"name": "wrong", "capabilities": {"sql": [{"database": "shop"}]}})
        result = rt.call("wrong", {})
    assert result.code == "guest_trap", result.to_dict()
    assert "other types than the glovebox world" in result.error.message


@pytest.mark.parametrize("store", [False, True])
def test_the_approver_sees_the_statement_as_the_audit_would_keep_it(
    tmp_path: Path, shop: Path, build_guest: Callable[[str], Path], store: bool
) -> None:
    from click.testing import CliRunner

    from glovebox.cli._main import cli

    document = shop_policy(f"sqlite:///{shop}")
    document["audit"] = {"store_inputs": store}
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps(document))
    home = tmp_path / "home"
    with glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(document)) as rt:
        rt.register(
            build_guest("sql_client"), manifest={"name": "client", "capabilities": {"sql": [{"database": "shop"}]}}
        )
        asked = _call(rt, "DELETE FROM orders WHERE id = ? AND item <> 'keep'", int=1)
        assert asked.code == "approval_required"
        [pending] = rt.pending_approvals()
    shown = {"database": "shop", "kind": "delete", "fingerprint": "DELETE FROM orders WHERE id = ? AND item <> ?"}
    if store:
        shown.update(statement="DELETE FROM orders WHERE id = ? AND item <> 'keep'", params=[1])
    assert pending.shown == shown and pending.to_dict()["statement"] == shown
    listed = CliRunner().invoke(cli, ["--home", str(home), "--policy", str(policy_file), "approvals", "list"])
    assert listed.exit_code == 0, listed.output
    header, row = listed.output.splitlines()[:2]
    assert header.split()[-1] == "STATEMENT"
    expected = "DELETE FROM orders WHERE id = ? AND item <> 'keep' [1]" if store else shown["fingerprint"]
    assert row.endswith(f"shop delete: {expected}")


# -- the JavaScript guest helper ----------------------------------------------------------------------

JS_SQL = Path(__file__).resolve().parents[1] / "guests" / "js_sql.js"


def test_the_javascript_helper_queries_and_reports_refusals(
    tmp_path: Path, shop: Path, build_js: Callable[[Path], Path]
) -> None:
    before = snapshot(shop)
    policy = glovebox.Policy.model_validate(shop_policy(f"sqlite:///{shop}", tables=["orders"]))
    with glovebox.Runtime(home=tmp_path / "home", policy=policy) as rt:
        rt.register(build_js(JS_SQL), manifest={"name": "js-sql", "capabilities": {"sql": [{"database": "shop"}]}})

        def call(statement: str, params: list[Any] | None = None) -> glovebox.CallResult:
            return rt.call("js-sql", {"database": "shop", "statement": statement, "params": params or []})

        rows = call("SELECT item FROM orders WHERE qty = ?", [7])
        typed = call("SELECT ?, ?, ?, ?, ?", [None, 1.5, "x", True, 2**40])
        dropped = call("DROP TABLE orders")
        deleted = call("DELETE FROM orders")
        bad = call("SELECT ?", [{"not": "a value"}])
    assert rows.ok and rows.output["rows"] == [["gizmo"]] and rows.output["columns"] == ["item"], rows.to_dict()
    assert typed.ok and typed.output["rows"] == [[None, 1.5, "x", 1, 2**40]], typed.to_dict()
    assert dropped.ok and dropped.output["error"] == "denied" and "schema changes (DDL)" in dropped.output["reason"]
    assert deleted.ok and deleted.output["error"] == "approval-required", deleted.to_dict()
    assert bad.code == "guest_error" and "param 0 is not null" in bad.error.message
    assert snapshot(shop) == before
