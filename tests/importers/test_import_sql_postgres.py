"""``glovebox import sql postgresql://...``: a real PostgreSQL database as NAME-query and NAME-execute.

The server is started by the tests (tests/pgserver.py); the password comes from
an environment variable the fragment names, never from the DSN. Every bypass
class is sent through both imported tools and must leave the database unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli

from ..capabilities.pgfixtures import make_pg_shop, pg_snapshot
from .test_import_sql import _seed

PASSWORD_ENV = "GLOVEBOX_TEST_PG_PASSWORD"

ATTACKS = [
    "COMMIT; DROP TABLE orders",
    "WITH x AS (SELECT 1) DELETE FROM orders",
    "WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d",
    "SELECT * INTO stolen FROM orders",
    "SELECT nextval('tickets')",
    "SELECT query_to_xml('DELETE FROM orders RETURNING 1', true, false, '')",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT lo_export(lo_from_bytea(0, 'x'), '/tmp/glovebox-lo')",
    "SELECT * FROM dblink('dbname=postgres', 'DELETE FROM orders') AS t(x text)",
    "COPY (SELECT 1) TO PROGRAM 'touch /tmp/glovebox-pwned'",
    "SELECT set_config('default_transaction_read_only', 'off', false)",
    "DO $$ BEGIN DELETE FROM orders; END $$",
    "SELECT /*! 1; DROP TABLE orders */ 1",
    "DROP TABLE orders",
    "UPDATE orders SET qty = 0",
]
WRITES = ("WITH x AS (SELECT 1) DELETE", "WITH d AS (DELETE", "UPDATE orders")


@pytest.fixture(scope="session")
def sqlop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from glovebox.importers._guest import sql_guest

    return sql_guest(tmp_path_factory.mktemp("sqlop-home"))


@pytest.fixture
def shop(pg_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(PASSWORD_ENV, pg_server.password)
    return make_pg_shop(pg_server)


@pytest.fixture
def imported(tmp_path: Path, shop: str, sqlop: Path) -> tuple[Path, dict[str, Any]]:
    home = tmp_path / "home"
    _seed(home, sqlop)
    with glovebox.Runtime(home=home) as rt:
        result = glovebox.import_sql(rt, shop, name="shop", password={"provider": "env", "source": PASSWORD_ENV})
    assert sorted(result.added) == ["shop-execute", "shop-query"]
    return home, {**result.policy, "principals": {"boss": {"scopes": ["glovebox:approve"]}}}


def _rt(imported: tuple[Path, dict[str, Any]]) -> glovebox.Runtime:
    home, policy = imported
    return glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(policy))


def test_the_tools_describe_the_catalog_and_the_fragment_names_the_password_source(
    imported: tuple[Path, dict[str, Any]], shop: str, pg_server: Any
) -> None:
    _, policy = imported
    with _rt(imported) as rt:
        query = rt.tool("shop-query")
    assert "orders(id integer, item text, qty integer)" in query.manifest.description
    assert "PostgreSQL, $1, $2 placeholders" in query.manifest.description
    assert policy["grants"] == [
        {
            "tool": "shop-*",
            "sql": [{"database": "shop", "dsn": shop, "password": {"provider": "env", "source": PASSWORD_ENV}}],
        }
    ]
    assert "dsn" not in query.manifest.to_json() and pg_server.password not in str(policy)


def test_query_returns_columns_and_rows(imported: tuple[Path, dict[str, Any]]) -> None:
    with _rt(imported) as rt:
        result = rt.call(
            "shop-query", {"sql": "SELECT item, qty FROM orders WHERE qty >= $1 ORDER BY id", "params": [3]}
        )
    assert result.ok, result.to_dict()
    assert result.output["rows"] == [["widget", 3], ["gizmo", 7]] and result.output["columns"] == ["item", "qty"]


@pytest.mark.parametrize("tool", ["shop-query", "shop-execute"])
@pytest.mark.parametrize("sql", ATTACKS)
def test_each_bypass_through_the_imported_tools(
    imported: tuple[Path, dict[str, Any]], pg_server: Any, shop: str, tool: str, sql: str
) -> None:
    before = pg_snapshot(pg_server, shop)
    with _rt(imported) as rt:
        result = rt.call(tool, {"sql": sql})
    expected = "approval_required" if tool == "shop-execute" and sql.startswith(WRITES) else "capability_denied"
    assert result.code == expected, result.to_dict()
    assert pg_snapshot(pg_server, shop) == before
    assert not Path("/tmp/glovebox-pwned").exists() and not Path("/tmp/glovebox-lo").exists()


def test_execute_refuses_drop_and_holds_delete_for_approval(
    imported: tuple[Path, dict[str, Any]], pg_server: Any, shop: str
) -> None:
    before = pg_snapshot(pg_server, shop)
    with _rt(imported) as rt:
        dropped = rt.call("shop-execute", {"sql": "DROP TABLE orders"})
        deleted = rt.call("shop-execute", {"sql": "DELETE FROM orders WHERE qty < $1", "params": [2]})
        assert dropped.code == "capability_denied" and dropped.error.details["denials"][0]["kind"] == "ddl"
        assert deleted.code == "approval_required"
        rt.approve(deleted.error.details["approval_id"], principal="boss")
        other = rt.call("shop-execute", {"sql": "DELETE FROM orders WHERE qty < $1", "params": [100]})
        assert other.code == "approval_required"
        assert pg_snapshot(pg_server, shop) == before
        done = rt.call("shop-execute", {"sql": "DELETE FROM orders WHERE qty < $1", "params": [2]})
    assert done.ok and done.output["rows_changed"] == 1, done.to_dict()
    assert [row[1] for row in pg_snapshot(pg_server, shop)["rows"]["orders"]] == ["widget", "gizmo"]


@pytest.mark.parametrize(
    ("dsn", "problem"),
    [
        ("postgresql://postgres:hunter2@127.0.0.1:1/shop", "never carries the password"),
        ("postgresql://postgres@127.0.0.1:1/shop?password=hunter2", "never carries the password"),
        ("postgresql://127.0.0.1/shop", "names user, host and database"),
        ("postgresql://postgres@127.0.0.1:1/shop", "cannot read the database's catalog"),
    ],
)
def test_a_bad_postgres_dsn_is_refused_and_never_echoes_a_password(tmp_path: Path, dsn: str, problem: str) -> None:
    with glovebox.Runtime(home=tmp_path / "home") as rt, pytest.raises(glovebox.InvalidSpec) as raised:
        glovebox.import_sql(rt, dsn, name="shop")
    assert problem in str(raised.value) and "hunter2" not in str(raised.value)


def test_the_cli_imports_and_sql_role_prints_a_role_the_server_accepts(
    tmp_path: Path, shop: str, sqlop: Path, pg_server: Any
) -> None:
    _seed(tmp_path / "home", sqlop)
    out = tmp_path / "fragment.yaml"
    runner = CliRunner()
    env = {"GLOVEBOX_HOME": str(tmp_path / "home"), PASSWORD_ENV: pg_server.password}
    imported = runner.invoke(
        cli,
        ["import", "sql", shop, "--name", "shop", "--password-env", PASSWORD_ENV, "--policy-out", str(out)],
        env=env,
    )
    assert imported.exit_code == 0, imported.output
    fragment = yaml.safe_load(out.read_text())
    fragment["grants"][0]["sql"][0].update(tables=["orders"], actions={"insert": "allow", "delete": "block"})
    out.write_text(yaml.safe_dump(fragment))
    database = shop.rsplit("/", 1)[1]
    role = f"{database}_cli"
    printed = runner.invoke(cli, ["sql", "role", "shop", "--policy", str(out), "--role", role], env=env)
    assert printed.exit_code == 0, printed.output
    statements = [line for line in printed.output.splitlines() if line and not line.startswith("--")]
    assert f'GRANT SELECT, INSERT, UPDATE ON TABLE "orders" TO "{role}";' in statements
    with pg_server.connect(database) as connection:
        for statement in statements:
            connection.execute(statement)
        connection.execute(f"ALTER ROLE \"{role}\" PASSWORD 'cli-pw'")
    with pg_server.connect(database, role, "cli-pw") as agent:
        assert agent.execute("SELECT count(*) FROM orders").fetchone() == (3,)
        for refused in ("DROP TABLE orders", "DELETE FROM orders", "SELECT * FROM users"):
            with pytest.raises(Exception, match="permission denied|must be owner"):
                agent.execute(refused)
    missing = runner.invoke(cli, ["sql", "role", "elsewhere", "--policy", str(out)], env=env)
    assert missing.exit_code != 0 and "grants no database 'elsewhere'" in missing.output


def test_the_description_lists_foreign_keys_and_query_reads_the_catalog(
    tmp_path: Path, sqlop: Path, pg_server: Any, shop: str
) -> None:
    with pg_server.connect(shop.rsplit("/", 1)[1]) as connection:
        connection.execute(
            "CREATE TABLE lines (id serial PRIMARY KEY, order_id integer REFERENCES orders (id),"
            " user_id integer REFERENCES users, note text)"
        )
    home = tmp_path / "home"
    _seed(home, sqlop)
    with glovebox.Runtime(home=home) as rt:
        policy = glovebox.import_sql(rt, shop, name="shop", password={"provider": "env", "source": PASSWORD_ENV}).policy
    with glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(policy)) as rt:
        description = rt.tool("shop-query").manifest.description
        keys = rt.call(
            "shop-query",
            {
                "sql": "SELECT kcu.column_name, ccu.table_name FROM information_schema.referential_constraints rc"
                " JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = rc.constraint_name"
                " JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = rc.constraint_name"
                " WHERE kcu.table_name = $1 ORDER BY 1",
                "params": ["lines"],
            },
        )
        plan = rt.call("shop-query", {"sql": "EXPLAIN SELECT note FROM lines WHERE order_id = $1", "params": [1]})
        analyzed = rt.call("shop-query", {"sql": "EXPLAIN ANALYZE SELECT note FROM lines"})
    assert "Foreign keys: lines.order_id -> orders.id, lines.user_id -> users.id" in description
    assert "information_schema" in description
    assert keys.ok and keys.output["rows"] == [["order_id", "orders"], ["user_id", "users"]], keys.to_dict()
    assert plan.ok and "lines" in plan.output["rows"][0][0], plan.to_dict()
    assert analyzed.code == "capability_denied" and analyzed.error.details["denials"][0]["kind"] == "other"


def test_the_cli_imports_with_a_password_from_the_encrypted_store(
    tmp_path: Path, shop: str, sqlop: Path, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from glovebox.capabilities._vault import SecretStore

    home = tmp_path / "home"
    _seed(home, sqlop)
    monkeypatch.delenv(PASSWORD_ENV)  # only the store holds it
    monkeypatch.setenv("GLOVEBOX_HOME", str(home))  # encrypted:// reads the store of GLOVEBOX_HOME
    SecretStore(home).set("shop-pg", pg_server.password.encode())
    out = tmp_path / "fragment.yaml"
    argv = ["import", "sql", shop, "--name", "shop", "--password-ref", "encrypted://shop-pg", "--policy-out", str(out)]
    imported = CliRunner().invoke(cli, argv)
    assert imported.exit_code == 0, imported.output
    fragment = yaml.safe_load(out.read_text())
    assert fragment["grants"][0]["sql"][0]["password"] == {"provider": "encrypted", "source": "encrypted://shop-pg"}
    assert pg_server.password not in out.read_text() + imported.output
    with glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(fragment)) as rt:
        answered = rt.call("shop-query", {"sql": "SELECT count(*) AS n FROM orders"})
    assert answered.ok, answered.to_dict()
    both = CliRunner().invoke(cli, [*argv, "--password-env", PASSWORD_ENV])
    assert both.exit_code == 2 and "give one of" in both.output
