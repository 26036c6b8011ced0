"""The sql capability on a real PostgreSQL server (started by the tests), attacked through a real C guest.

Every bypass class that defeated read-only guards elsewhere — ``COMMIT;
DROP``, data-modifying CTEs, ``SELECT INTO``, ``nextval``, ``query_to_xml``,
``pg_read_file``, ``lo_export``, ``dblink``, ``COPY ... TO PROGRAM``,
``set_config``, ``DO`` blocks … — is sent by a guest that names the database by
alias; each must end with the exact error code and leave the database
unchanged (rows, relations, the sequence, roles, large objects). The server's
own enforcement is attacked apart, with the host's check bypassed: the
extended protocol, the read-only transaction, and a role made from
``role_statements``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.capabilities._postgres import role_statements, run_postgres
from glovebox.capabilities._sqlcheck import classify
from glovebox.capabilities._sqlite import EngineFailed, EngineRefused, Plan
from glovebox.model._grants import SqlGrant

from .pgfixtures import make_pg_shop, pg_policy, pg_snapshot
from .test_sql import _call  # the sql_client guest's call: the same on both engines

READ_ONLY = {"select": "allow", "insert": "block", "update": "block", "delete": "block", "ddl": "block"}
PASSWORD_ENV = "GLOVEBOX_TEST_PG_PASSWORD"


@pytest.fixture
def shop(pg_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(PASSWORD_ENV, pg_server.password)
    return make_pg_shop(pg_server)


@pytest.fixture
def client(tmp_path: Path, shop: str, build_guest: Callable[[str], Path]) -> Callable[..., glovebox.Runtime]:
    """A Runtime with the sql_client guest registered, declaring the shop database as given."""

    def make(
        declared: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **grant: Any
    ) -> glovebox.Runtime:
        declared = declared if declared is not None else {"database": "shop"}
        policy = glovebox.Policy.model_validate(pg_policy(shop, PASSWORD_ENV, **grant))
        rt = glovebox.Runtime(home=tmp_path / "home", policy=policy)
        manifest: dict[str, Any] = {"name": "client", "capabilities": {"sql": [declared]}}
        if limits:
            manifest["limits"] = limits
        rt.register(build_guest("sql_client"), manifest=manifest)
        return rt

    return make


PG_ATTACKS = [
    ("COMMIT; DROP TABLE orders", "unknown"),
    ("SELECT 1; DROP TABLE orders", "unknown"),
    ("DROP TABLE orders", "ddl"),
    ("TRUNCATE orders", "ddl"),
    ("WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d", "delete"),
    ("WITH x AS (SELECT 1) DELETE FROM orders", "delete"),
    ("SELECT * INTO stolen FROM orders", "ddl"),
    ("CREATE TABLE stolen AS SELECT * FROM orders", "ddl"),
    ("SELECT nextval('tickets')", "select"),
    ("SELECT setval('tickets', 100)", "select"),
    ("SELECT query_to_xml('DELETE FROM orders RETURNING 1', true, false, '')", "select"),
    ("SELECT pg_read_file('/etc/passwd')", "select"),
    ("SELECT pg_ls_dir('.')", "select"),
    ("SELECT lo_export(lo_from_bytea(0, 'x'), '/tmp/glovebox-lo')", "select"),
    ("SELECT * FROM dblink('dbname=postgres', 'DELETE FROM orders') AS t(x text)", "select"),
    ("COPY (SELECT 1) TO PROGRAM 'touch /tmp/glovebox-pwned'", "other"),
    ("COPY orders TO '/tmp/glovebox-orders'", "other"),
    ("SELECT set_config('default_transaction_read_only', 'off', false)", "select"),
    ("SELECT current_setting('data_directory')", "select"),
    ("SET ROLE postgres", "other"),
    ("RESET ROLE", "other"),
    ("DO $$ BEGIN DELETE FROM orders; END $$", "other"),
    ("CALL some_procedure()", "other"),
    ("EXPLAIN ANALYZE DELETE FROM orders", "other"),
    ("EXPLAIN (ANALYZE) SELECT item FROM orders", "other"),
    ("EXPLAIN (ANALYZE false, VERBOSE) DELETE FROM orders", "other"),
    ("EXPLAIN (analyze off) UPDATE orders SET qty = 0", "other"),
    ("EXPLAIN DELETE FROM orders", "delete"),
    ("EXPLAIN SELECT name, password FROM users", "select"),
    ("EXPLAIN SELECT nextval('tickets')", "select"),
    ("SELECT table_name, column_name FROM information_schema.columns", "select"),  # not every table granted
    ("SELECT relname FROM pg_class", "select"),
    ("SELECT * FROM pg_settings", "select"),
    ("SELECT * FROM pg_stat_activity", "select"),
    ("SELECT * FROM information_schema.role_table_grants", "unknown"),
    ("SELECT * FROM pg_catalog.pg_authid", "unknown"),
    ("PREPARE p AS DELETE FROM orders", "other"),
    ("LOCK TABLE orders", "other"),
    ("SELECT * FROM orders FOR UPDATE", "update"),
    ("SELECT pg_sleep(30)", "select"),
    ("SELECT pg_terminate_backend(1)", "select"),
    ("SELECT /*! 1; DROP TABLE orders */ 1", "unknown"),
    ("SELECT name, password FROM users", "select"),
    ("SELECT * FROM pg_authid", "select"),
    ("SELECT * FROM pg_catalog.pg_shadow", "unknown"),
    ("SELECT * FROM information_schema.tables", "select"),
    ("INSERT INTO orders (item, qty) SELECT name, 1 FROM users", "insert"),
    ("MERGE INTO orders o USING (SELECT 1 AS id) s ON o.id = s.id WHEN MATCHED THEN DELETE", "delete"),
    ("DELETE FROM orders", "delete"),
    ("UPDATE orders SET qty = 0", "update"),
    ("BEGIN", "other"),
    ("SELEC 1", "unknown"),
]


@pytest.mark.parametrize(("sql", "kind"), PG_ATTACKS)
def test_each_bypass_is_refused_and_changes_nothing(
    client: Callable[..., glovebox.Runtime], pg_server: Any, shop: str, sql: str, kind: str
) -> None:
    before = pg_snapshot(pg_server, shop)
    with client({"database": "shop", "actions": READ_ONLY}, tables=["orders"]) as rt:
        result = _call(rt, sql)
    assert result.code == "capability_denied", result.to_dict()
    denial = result.error.details["denials"][0]
    assert denial["capability"] == "sql" and denial["database"] == "shop"
    assert denial["kind"] == kind
    assert pg_snapshot(pg_server, shop) == before
    assert not Path("/tmp/glovebox-pwned").exists() and not Path("/tmp/glovebox-lo").exists()


def test_denial_names_the_table_and_the_function(client: Callable[..., glovebox.Runtime]) -> None:
    with client(tables=["orders"]) as rt:
        table = _call(rt, "SELECT name FROM users").error.details["denials"][0]
        function = _call(rt, "SELECT pg_read_file('/etc/passwd')").error.details["denials"][0]
    assert (table["kind"], table["table"]) == ("select", "users")
    assert (function["kind"], function["function"]) == ("select", "pg_read_file")


def test_a_granted_select_returns_rows_with_column_names(client: Callable[..., glovebox.Runtime]) -> None:
    with client() as rt:
        result = _call(rt, "SELECT item, qty FROM orders WHERE qty > $1 ORDER BY id", int=2)
        typed = _call(rt, "SELECT $1::text AS t, 1.5::numeric AS n, now()::date IS NOT NULL AS b", text="x")
    assert result.ok, result.to_dict()
    assert result.output == {
        "columns": ["item", "qty"],
        "rows": [["widget", 3], ["gizmo", 7]],
        "row_count": 2,
        "truncated": False,
        "rows_changed": 0,
    }
    assert typed.ok and typed.output["rows"] == [["x", "1.5", True]], typed.to_dict()
    entry = result.meta["sql"][0]
    assert entry["kind"] == "select" and entry["tables"] == ["orders"] and entry["rows_returned"] == 2
    assert entry["fingerprint"] == "SELECT item, qty FROM orders WHERE qty > $1 ORDER BY id"


def test_a_delete_waits_for_approval_bound_to_that_exact_statement(
    client: Callable[..., glovebox.Runtime], pg_server: Any, shop: str
) -> None:
    before = pg_snapshot(pg_server, shop)
    with client() as rt:
        first = _call(rt, "DELETE FROM orders WHERE id = $1", int=1)
        assert first.code == "approval_required", first.to_dict()
        approval_id = first.error.details["approval_id"]
        assert first.error.details["kind"] == "delete"
        rt.approve(approval_id, principal="boss")
        other = _call(rt, "DELETE FROM orders WHERE id = $1", int=2)
        wider = _call(rt, "DELETE FROM orders")
        assert other.code == wider.code == "approval_required"
        assert approval_id not in (other.error.details["approval_id"], wider.error.details["approval_id"])
        assert pg_snapshot(pg_server, shop) == before
        approved = _call(rt, "DELETE FROM orders WHERE id = $1", int=1)
        assert approved.ok, approved.to_dict()
        assert approved.output["rows_changed"] == 1
        assert approved.meta["sql"][0]["decision"] == "approved"
        assert _call(rt, "DELETE FROM orders WHERE id = $1", int=1).code == "approval_required"  # one use
    assert [row[0] for row in pg_snapshot(pg_server, shop)["rows"]["orders"]] == [2, 3]


def test_an_allowed_insert_runs_and_counts_its_rows(
    client: Callable[..., glovebox.Runtime], pg_server: Any, shop: str
) -> None:
    actions = {"insert": "allow"}
    with client({"database": "shop", "actions": actions}, actions=actions) as rt:
        result = _call(rt, "INSERT INTO orders (item, qty) VALUES ($2, $1)", int=2, text="sprocket")
    assert result.ok and result.output["rows_changed"] == 1, result.to_dict()
    assert pg_snapshot(pg_server, shop)["rows"]["orders"][-1] == (4, "sprocket", 2)


def test_a_slow_query_is_cut_at_the_call_deadline(client: Callable[..., glovebox.Runtime]) -> None:
    with client(limits={"timeout_ms": 400}) as rt:
        result = _call(rt, "SELECT count(*) FROM generate_series(1, 100000000000)")
    assert result.code == "timeout", result.to_dict()


def test_the_grant_statement_timeout_answers_the_guest(client: Callable[..., glovebox.Runtime]) -> None:
    with client(timeout_ms=200) as rt:
        result = _call(rt, "SELECT count(*) FROM generate_series(1, 100000000000)", cope=True)
        after = _call(rt, "SELECT count(*) FROM orders")  # the connection it used is usable again
    assert result.ok and result.output == {"error": "timeout"}, result.to_dict()
    assert result.meta["sql"][0]["error"] == "timeout"
    assert after.ok and after.output["rows"] == [[3]]


def test_a_huge_result_is_truncated_at_the_row_and_byte_limits(client: Callable[..., glovebox.Runtime]) -> None:
    with client(max_rows=50) as rt:
        rows = _call(rt, "SELECT x FROM generate_series(1, 100000) AS x")
    with client(max_bytes=100) as rt:
        wide = _call(rt, "SELECT repeat('x', 60) FROM orders")
    assert rows.ok and rows.output["row_count"] == 50 and rows.output["truncated"] is True
    assert wide.ok and wide.output["row_count"] == 1 and wide.output["truncated"] is True


def test_credentials_never_reach_the_envelope_the_logs_or_the_audit(
    client: Callable[..., glovebox.Runtime],
    pg_server: Any,
    shop: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with client() as rt:
        ok = _call(rt, "SELECT count(*) FROM orders")
        missing = _call(rt, "SELECT * FROM nowhere")
        monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
        from glovebox.capabilities._postgres import close_idle

        close_idle()
        refused = _call(rt, "SELECT count(*) FROM orders")
        monkeypatch.delenv(PASSWORD_ENV)
        unset = _call(rt, "SELECT count(*) FROM orders")
        rows = [json.dumps(record) for record in rt.audit.records()]
    assert ok.ok, ok.to_dict()
    assert missing.code == "guest_error" and "does not exist" in missing.error.message
    assert refused.code == "guest_error" and "cannot connect" in refused.error.message
    assert unset.code == "guest_error" and "password secret has no usable value" in unset.error.message
    texts = [json.dumps(r.to_dict()) for r in (ok, missing, refused, unset)] + rows + [caplog.text]
    for text in texts:
        assert pg_server.password not in text and "not-the-password" not in text
        assert f":{pg_server.port}" not in text


def test_concurrent_writers_all_land(client: Callable[..., glovebox.Runtime], pg_server: Any, shop: str) -> None:
    actions = {"insert": "allow"}
    with client({"database": "shop", "actions": actions}, actions=actions) as rt:

        def insert(n: int) -> glovebox.CallResult:
            return _call(rt, "INSERT INTO orders (item, qty) VALUES ($2, $1)", int=n, text=f"item-{n}")

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(insert, range(40)))
    assert all(result.ok for result in results), [r.to_dict() for r in results if not r.ok][:1]
    assert len(pg_snapshot(pg_server, shop)["rows"]["orders"]) == 3 + 40


# -- the server on its own: what the host's check might miss, PostgreSQL still refuses --------------

SERVER_ATTACKS = [
    "COMMIT; DROP TABLE orders",
    "SELECT 1; DELETE FROM orders",
    "DELETE FROM orders",
    "DROP TABLE orders",
    "WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d",
    "SELECT * INTO stolen FROM orders",
    "SELECT nextval('tickets')",
    "SELECT query_to_xml('DELETE FROM orders RETURNING 1', true, false, '')",
    "SELECT lo_from_bytea(0, 'x')",
    "INSERT INTO orders (item) VALUES ('x')",
    "SELECT set_config('transaction_read_only', 'off', true)",
]


def _read_plan(grant: SqlGrant) -> Plan:
    return Plan(grant, classify("SELECT item FROM orders", "postgresql"), time.monotonic() + 10)


@pytest.mark.parametrize("sql", SERVER_ATTACKS)
def test_the_server_refuses_what_a_select_was_not_judged_to_do(pg_server: Any, shop: str, sql: str) -> None:
    before = pg_snapshot(pg_server, shop)
    grant = SqlGrant(database="shop", dsn=shop, actions=READ_ONLY)
    with pytest.raises((EngineRefused, EngineFailed)):
        run_postgres(shop, pg_server.password, sql, [], _read_plan(grant))  # the host believed a SELECT
    assert pg_snapshot(pg_server, shop) == before


ROLE_ATTACKS = [
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT pg_ls_dir('.')",
    "SELECT lo_export(1, '/tmp/glovebox-lo')",
    "COPY (SELECT 1) TO PROGRAM 'touch /tmp/glovebox-pwned'",
    "COPY orders TO '/tmp/glovebox-orders'",
    "SELECT * FROM dblink('dbname=postgres user=postgres', 'DELETE FROM orders') AS t(x text)",
    "SELECT set_config('role', 'postgres', false)",
    "SET ROLE postgres",
    "DROP TABLE orders",
    "DELETE FROM orders",
    "UPDATE orders SET qty = 0",
    "SELECT password FROM users",
    "CREATE TABLE stolen (x int)",
    "ALTER ROLE {role} SUPERUSER",
    "CREATE EXTENSION IF NOT EXISTS adminpack",
]


@pytest.fixture
def agent_role(pg_server: Any, shop: str) -> tuple[str, SqlGrant, str]:
    """The role `glovebox sql role` prints for a grant of SELECT and INSERT on orders, made on the server."""
    database = shop.rsplit("/", 1)[1]
    role = f"{database}_agent"  # roles are the cluster's: one per test database
    grant = SqlGrant(
        database="shop", dsn=shop, tables=["orders"], actions={"insert": "allow", "update": "block", "delete": "block"}
    )
    with pg_server.connect(database) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS dblink")
        for statement in role_statements(grant, role):
            connection.execute(statement)
        connection.execute(f"ALTER ROLE {role} PASSWORD 'agent-pw'")
    return pg_server.dsn(database, role), grant, role


@pytest.mark.parametrize("sql", ROLE_ATTACKS)
def test_the_least_privilege_role_refuses_what_the_grant_does_not_hold(
    pg_server: Any, shop: str, agent_role: tuple[str, SqlGrant, str], sql: str
) -> None:
    dsn, grant, role = agent_role
    before = pg_snapshot(pg_server, shop)
    plan = Plan(grant, classify("INSERT INTO orders (item) VALUES ($1)", "postgresql"), time.monotonic() + 10)
    with pytest.raises((EngineRefused, EngineFailed)) as raised:
        run_postgres(dsn, "agent-pw", sql.format(role=role), [], plan)  # the host believed an allowed INSERT
    assert "cannot connect" not in str(raised.value)
    assert pg_snapshot(pg_server, shop) == before
    assert not Path("/tmp/glovebox-pwned").exists() and not Path("/tmp/glovebox-lo").exists()
    # What the grant does hold still works through the same role.
    inserted = run_postgres(dsn, "agent-pw", "INSERT INTO orders (item, qty) VALUES ($1, 1)", ["ok"], plan)
    assert inserted.rows_changed == 1


def test_role_statements_grant_only_the_kinds_not_blocked(shop: str) -> None:
    grant = SqlGrant(
        database="shop", dsn=shop, tables=["orders", "users"], columns={"users": ["id", "name"]}, actions=READ_ONLY
    )
    lines = role_statements(grant, "reader")
    database = shop.rsplit("/", 1)[1]
    assert lines[:3] == [
        'CREATE ROLE "reader" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS;',
        f'REVOKE ALL ON DATABASE "{database}" FROM "reader";',
        f'GRANT CONNECT ON DATABASE "{database}" TO "reader";',
    ]
    assert 'GRANT SELECT ON TABLE "orders" TO "reader";' in lines
    assert 'GRANT SELECT ("id", "name") ON "users" TO "reader";' in lines
    assert not [line for line in lines if "INSERT" in line or "DELETE" in line or "SEQUENCES" in line]


# -- reading the schema ------------------------------------------------------------------------------


def test_a_read_grant_explains_its_reads_without_running_them(client: Callable[..., glovebox.Runtime]) -> None:
    with client({"database": "shop", "actions": READ_ONLY}, tables=["orders"]) as rt:
        plan = _call(rt, "EXPLAIN SELECT item FROM orders WHERE qty > $1", int=2)
        costs = _call(rt, "EXPLAIN (COSTS false, FORMAT TEXT) SELECT count(*) FROM orders")
    assert plan.ok, plan.to_dict()
    assert plan.output["columns"] == ["QUERY PLAN"] and "Seq Scan on orders" in plan.output["rows"][0][0]
    assert costs.ok and costs.output["rows"][1][0].strip() == "->  Seq Scan on orders", costs.to_dict()
    entry = plan.meta["sql"][0]
    assert (entry["kind"], entry["tables"], entry["decision"]) == ("select", ["orders"], "allow")


def test_a_grant_of_every_table_reads_the_catalog(
    client: Callable[..., glovebox.Runtime], pg_server: Any, shop: str
) -> None:
    before = pg_snapshot(pg_server, shop)
    with client({"database": "shop", "actions": READ_ONLY}) as rt:
        columns = _call(
            rt,
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name = 'orders' ORDER BY ordinal_position",
        )
        keys = _call(
            rt,
            "SELECT tc.constraint_type, kcu.column_name FROM information_schema.table_constraints tc"
            " JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name"
            " WHERE tc.table_name = 'orders'",
        )
        indexes = _call(
            rt,
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_catalog.pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname = 'orders'",
        )
        types = _call(
            rt,
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
            " WHERE a.attrelid = 'orders'::regclass AND a.attnum > 0 ORDER BY a.attnum",
        )
    assert columns.ok, columns.to_dict()
    assert columns.output["rows"] == [
        ["orders", "id", "integer"],
        ["orders", "item", "text"],
        ["orders", "qty", "integer"],
    ]
    assert keys.ok and keys.output["rows"] == [["PRIMARY KEY", "id"]], keys.to_dict()
    assert indexes.ok and indexes.output["rows"][0][0] == "orders_pkey", indexes.to_dict()
    assert "USING btree (id)" in indexes.output["rows"][0][1]
    assert types.ok and types.output["rows"][1] == ["item", "text"], types.to_dict()
    assert pg_snapshot(pg_server, shop) == before


def test_the_catalog_is_refused_where_columns_are_restricted(client: Callable[..., glovebox.Runtime]) -> None:
    with client({"database": "shop", "actions": READ_ONLY}, columns={"users": ["id", "name"]}) as rt:
        result = _call(rt, "SELECT column_name FROM information_schema.columns WHERE table_name = 'users'")
        function = _call(rt, "SELECT pg_get_viewdef('orders'::regclass)")
    assert result.code == "capability_denied", result.to_dict()
    denial = result.error.details["denials"][0]
    assert (denial["kind"], denial["table"]) == ("select", "information_schema.columns")
    assert function.code == "capability_denied", function.to_dict()  # a catalog function outside a catalog read
    assert function.error.details["denials"][0]["function"] == "pg_get_viewdef"


def test_the_server_runs_an_explained_statement_read_only(pg_server: Any, shop: str) -> None:
    """The host judged EXPLAIN of a read; an EXPLAIN ANALYZE slipped in its place is refused by the server."""
    before = pg_snapshot(pg_server, shop)
    grant = SqlGrant(database="shop", dsn=shop, tables=["orders"], actions=READ_ONLY)
    plan = Plan(grant, classify("EXPLAIN SELECT item FROM orders", "postgresql"), time.monotonic() + 5)
    with pytest.raises(EngineRefused, match="read-only transaction"):
        run_postgres(shop, pg_server.password, "EXPLAIN ANALYZE DELETE FROM orders", [], plan)
    assert pg_snapshot(pg_server, shop) == before
