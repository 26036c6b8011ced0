"""The host's PostgreSQL classifier against the server's own verdict, on statements hypothesis writes.

Each statement is classified (``classify(text, "postgresql")``) and judged
against a select-only grant. A statement that grant allows is a read: it runs
on a real server (started once, see ``tests/pgserver.py``) as the superuser,
with no read-only transaction and no restricted role (the engine's own
verdict), inside ``BEGIN ... ROLLBACK``, and must not have written:

- ``pg_current_xact_id_if_assigned()`` stays null (the server assigns a
  transaction id at the first write of any kind: rows, catalogs, large
  objects, roles; a failed statement that wrote first leaves it assigned too);
- the rows of every table (count and hash), ``pg_class``, every sequence,
  large objects, roles, every setting, advisory locks, listened channels,
  prepared statements and cursors are the same inside the transaction and
  after the rollback (sequences and session locks survive a rollback);
- the surrounding transaction is still open (a read never ends it).

The converse, where cheap: a statement a grant of writes on ``orders`` alone
allows changes nothing but ``orders``. A second test breaks the classifier
(every kind judged a select) and shows this check then finds the writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from glovebox.capabilities import _pgcheck
from glovebox.capabilities._postgres import run_postgres
from glovebox.capabilities._sqlcheck import SqlRefused, classify, judge
from glovebox.capabilities._sqlite import EngineRefused, Plan
from glovebox.model._grants import SqlActions, SqlGrant, SqlRule

from .pgfixtures import make_pg_shop, pg_snapshot

pytest.importorskip("pglast")
pytest.importorskip("psycopg")

READS_ONLY = SqlRule(database="shop", actions=SqlActions(insert="block", update="block", delete="block"))
WRITES_TO_ORDERS = SqlRule(
    database="shop", actions=SqlActions(insert="allow", update="allow", delete="allow"), tables=["orders"]
)
SAVEPOINT = "glovebox_probe"

STATE = {
    "orders": "SELECT count(*), coalesce(sum(hashtext(t::text)), 0) FROM orders t",
    "users": "SELECT count(*), coalesce(sum(hashtext(t::text)), 0) FROM users t",
    "relations": "SELECT count(*), sum(hashtext(concat_ws(':', oid, relname, relkind, relfilenode, relnatts,"
    " relacl, reloptions, relhasindex, reltuples))) FROM pg_class",
    "attributes": "SELECT count(*), sum(hashtext(concat_ws(':', attrelid, attname, atttypid, attnotnull)))"
    " FROM pg_attribute",
    "sequences": "SELECT string_agg(concat_ws('=', schemaname, sequencename, last_value), ',' ORDER BY 1, 2)"
    " FROM pg_sequences",
    "tickets": "SELECT last_value, is_called FROM tickets",
    "large_objects": "SELECT count(*) FROM pg_largeobject_metadata",
    "roles": "SELECT string_agg(concat_ws(':', rolname, rolsuper, rolcanlogin), ',' ORDER BY 1) FROM pg_roles",
    "settings": "SELECT string_agg(name || '=' || coalesce(setting, ''), ',' ORDER BY name) FROM pg_settings",
    "probe_setting": "SELECT current_setting('glovebox.probe', true), current_setting('search_path'),"
    " current_user, session_user",
    "advisory_locks": "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
    "channels": "SELECT count(*) FROM pg_listening_channels()",
    "prepared": "SELECT count(*) FROM pg_prepared_statements",
    "cursors": "SELECT count(*) FROM pg_cursors",
    "comments": "SELECT count(*), sum(hashtext(description)) FROM pg_description",
}

# -- the statements ---------------------------------------------------------------------------------

TABLES = st.sampled_from(["orders", "users", "public.orders", '"orders"', "tickets", "pg_class", "nope"])
COLUMNS = st.sampled_from(["*", "id", "item", "qty", "count(*)", "max(qty)", "1", "lower(item)", "id + 1"])
VALUES = st.sampled_from(["1", "'a'", "NULL", "(SELECT 1)", "-1", "1e3", "$$x$$", "now()::text"])
GAPS = st.sampled_from([" ", "\n", "\t", " /* c */ ", " -- c\n", "/**/"])
LOCKS = st.sampled_from(["FOR UPDATE", "FOR SHARE", "FOR NO KEY UPDATE", "FOR KEY SHARE", "FOR UPDATE SKIP LOCKED"])
FUNCTIONS = st.sampled_from(
    [
        "nextval('tickets')", "setval('tickets', 50)", "currval('tickets')", "lastval()",
        "set_config('glovebox.probe', 'x', false)", "set_config('glovebox.probe', 'x', true)",
        "set_config('search_path', 'pg_catalog', false)", "current_setting('search_path')",
        "pg_advisory_lock(7)", "pg_advisory_xact_lock(7)", "pg_try_advisory_lock(7)",
        "lo_create(0)", "lo_from_bytea(0, 'x')", "txid_current()", "pg_current_xact_id()",
        "query_to_xml('DELETE FROM orders RETURNING 1', true, false, '')", "pg_notify('c', 'x')",
        "now()", "random()", "lower('A')", "abs(-1)", "md5('a')", "gen_random_uuid()",
        "count(*)", "length('abc')", "generate_series(1, 3)", "json_build_object('a', 1)",
        "bump()", "public.bump()", "pg_catalog.nextval('tickets')",
    ]
)  # fmt: skip


@st.composite
def statements(draw: st.DrawFn) -> str:
    table, column, value, gap = draw(TABLES), draw(COLUMNS), draw(VALUES), draw(GAPS)
    function, lock = draw(FUNCTIONS), draw(LOCKS)
    core = draw(
        st.sampled_from(
            [
                # reads, and reads that hide a write
                f"SELECT{gap}{column} FROM {table}",
                f"SELECT {column} FROM {table} WHERE id = {value}",
                f"SELECT {column} FROM {table} ORDER BY 1 LIMIT 2",
                f"SELECT {function}",
                f"SELECT {function} FROM {table}",
                f"SELECT * FROM orders WHERE qty < (SELECT {function})",
                f"SELECT (SELECT {function}) AS x, {column} FROM {table}",
                f"SELECT * FROM {table} {lock}",
                f"SELECT id FROM orders WHERE id IN (SELECT id FROM {table} {lock})",
                "SELECT * FROM orders o JOIN users u ON u.id = o.id",
                f"SELECT id FROM orders UNION SELECT id FROM {table}",
                f"TABLE {table}",
                "VALUES (1), (2)",
                f"SELECT '{gap}; DELETE FROM orders'",
                f"SELECT $$; DROP TABLE {table}$$",
                f"SELECT 1 -- ; DELETE FROM {table}\n",
                # writes and DDL
                f"INSERT INTO {table} (item) VALUES ({value})",
                f"INSERT INTO {table} (item) SELECT item FROM orders RETURNING *",
                f"UPDATE {table} SET qty = {value}",
                f"DELETE FROM {table} WHERE id = {value}",
                "MERGE INTO orders o USING users u ON o.id = u.id WHEN MATCHED THEN DELETE",
                f"SELECT * INTO stolen FROM {table}",
                f"SELECT * INTO TEMP stolen FROM {table}",
                f"CREATE TABLE stolen AS SELECT * FROM {table}",
                "CREATE TEMP TABLE t (a int)",
                f"DROP TABLE {table}",
                f"TRUNCATE {table}",
                f"ALTER TABLE {table} ADD COLUMN z int",
                "CREATE VIEW v AS SELECT 1",
                f"CREATE INDEX ON {table} (id)",
                "CREATE ROLE intruder",
                "CREATE SEQUENCE s2",
                f"COMMENT ON TABLE {table} IS 'x'",
                f"GRANT SELECT ON {table} TO PUBLIC",
                # data-modifying CTEs
                f"WITH d AS (DELETE FROM {table} RETURNING *) SELECT * FROM d",
                f"WITH i AS (INSERT INTO {table} (item) VALUES ({value}) RETURNING id) SELECT count(*) FROM i",
                f"WITH u AS (UPDATE {table} SET qty = 0 RETURNING 1) SELECT 1",
                f"WITH x AS (SELECT 1) DELETE FROM {table}",
                f"WITH x AS (SELECT {function}) SELECT * FROM x",
                # COPY, transaction control, session state, other commands
                f"COPY {table} TO STDOUT",
                f"COPY (DELETE FROM {table} RETURNING *) TO STDOUT",
                f"COPY {table} FROM STDIN",
                "BEGIN", "COMMIT", "ROLLBACK", "COMMIT AND CHAIN", "SAVEPOINT s", f"RELEASE {SAVEPOINT}",
                f"ROLLBACK TO {SAVEPOINT}", "SET TRANSACTION READ WRITE", "START TRANSACTION",
                "SET search_path = pg_catalog", "SET glovebox.probe = 'x'", "RESET ALL", "SET ROLE NONE",
                "DISCARD ALL", "LISTEN c", "NOTIFY c", f"LOCK TABLE {table}", f"ANALYZE {table}",
                "DO $$ BEGIN DELETE FROM orders; END $$", f"EXPLAIN ANALYZE DELETE FROM {table}",
                f"EXPLAIN SELECT * FROM {table}", f"PREPARE p AS SELECT * FROM {table}",
                f"DECLARE c CURSOR FOR SELECT * FROM {table}", "CALL nothing()", "VACUUM orders",
            ]
        )
    )  # fmt: skip
    prefix = draw(st.sampled_from(["", "", "WITH c AS (SELECT 1) ", "WITH c AS MATERIALIZED (SELECT 1) ", "EXPLAIN "]))
    case = draw(st.sampled_from([str, str, str.lower, str.upper]))
    return case(prefix + core)


# -- the server's verdict ---------------------------------------------------------------------------


def _state(connection: Any) -> dict[str, Any]:
    """Everything a write could change, each read in a savepoint (a dropped table makes its entry an error)."""
    from psycopg.pq import TransactionStatus

    if connection.info.transaction_status == TransactionStatus.IDLE:
        connection.execute("BEGIN")
        try:
            return _state(connection)
        finally:
            connection.execute("ROLLBACK")
    state: dict[str, Any] = {}
    for name, query in STATE.items():
        connection.execute(f"SAVEPOINT {SAVEPOINT}_state")
        try:
            state[name] = connection.execute(query).fetchall()
        except Exception as exc:  # noqa: BLE001 - the entry records what failed
            state[name] = f"unreadable: {type(exc).__name__}"
            connection.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}_state")
        else:
            connection.execute(f"RELEASE SAVEPOINT {SAVEPOINT}_state")
    return state


def _changes(connection: Any, text: str, spared: frozenset[str] = frozenset()) -> list[str]:
    """What running ``text`` in a rolled-back transaction changed (state entries in ``spared`` may change)."""
    import psycopg

    found: list[str] = []
    outside = _state(connection)
    connection.execute("BEGIN")
    try:
        before = _state(connection)
        connection.execute(f"SAVEPOINT {SAVEPOINT}")
        try:
            _run(connection, text)
        except psycopg.Error:
            try:
                connection.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            except psycopg.Error:
                found.append("it ended the surrounding transaction")
        else:
            try:
                connection.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
            except psycopg.Error:
                found.append("it ended the surrounding transaction")
        if not found:
            (xid,) = connection.execute("SELECT pg_current_xact_id_if_assigned()").fetchone()
            if xid is not None and not spared:  # a statement granted writes may write (what it wrote: below)
                found.append(f"the server assigned it a transaction id ({xid}): it wrote")
            during = _state(connection)
            found += [f"{name} changed in the transaction" for name in _watched(spared) if during[name] != before[name]]
    finally:
        connection.execute("ROLLBACK")  # also ends a transaction the statement opened
    after = _state(connection)
    found += [f"{name} changed after the rollback" for name in _watched(spared) if after[name] != outside[name]]
    return found


def _run(connection: Any, text: str) -> None:
    """Run ``text`` as the server would take it from a client: a ``COPY`` through the copy protocol
    (nothing sent in, everything sent out read), anything else executed."""
    from pglast import parser

    try:
        copy = '"CopyStmt"' in parser.parse_sql_json(text)
    except parser.ParseError:
        copy = False
    if not copy:
        connection.execute(text)
        return
    with connection.cursor() as cursor, cursor.copy(text) as stream:
        for _ in stream:
            pass


def _watched(spared: frozenset[str]) -> list[str]:
    return [name for name in STATE if name not in spared]


def _is_read(text: str) -> bool:
    """Whether the host lets ``text`` run under a select-only grant."""
    try:
        return judge(classify(text, "postgresql"), READS_ONLY) == "allow"
    except SqlRefused:
        return False


def _throwaway(server: Any) -> Any:
    """A connection to a new shop database (plus a function that writes and a large object)."""
    name = make_pg_shop(server).rsplit("/", 1)[1]
    connection = server.connect(name)
    connection.prepare_threshold = None  # the driver's own prepared statements would change the state
    connection.execute(
        "CREATE FUNCTION bump() RETURNS int LANGUAGE sql AS 'UPDATE orders SET qty = qty + 1 RETURNING 1'"
    )
    connection.execute("SELECT lo_create(0)")
    connection.execute("SET statement_timeout = '5s'")
    connection.execute("SET lock_timeout = '2s'")
    return connection


@pytest.fixture(scope="module")
def probe(pg_server: Any) -> Iterator[Any]:
    """One throwaway database for the module's examples (the server is started once per session)."""
    connection = _throwaway(pg_server)
    try:
        yield connection
    finally:
        connection.close()


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=statements())
def test_a_statement_judged_a_read_never_writes_on_postgres(probe: Any, text: str) -> None:
    connection = probe
    if _is_read(text):
        event("judged a read: run")
        changes = _changes(connection, text)
        assert not changes, f"{text!r} was judged a read but: {'; '.join(changes)}"
        return
    try:
        statement = classify(text, "postgresql")
        assert judge(statement, WRITES_TO_ORDERS) in ("allow", "require_approval")
    except SqlRefused:
        event("refused")
        return  # refused under a grant of writes on orders alone: the server never sees it
    event("a write on orders alone: run")
    changes = _changes(connection, text, spared=frozenset({"orders", "sequences"}))
    assert not changes, f"{text!r} was allowed on orders alone but: {'; '.join(changes)}"


DETECTED = [
    "SELECT nextval('tickets')",
    "SELECT set_config('glovebox.probe', 'x', false)",
    "SELECT pg_advisory_lock(7)",
    "SELECT lo_create(0)",
    "SELECT bump()",
    "COPY (DELETE FROM orders RETURNING *) TO STDOUT",
    "CREATE TEMP TABLE t (a int)",
    "PREPARE p AS SELECT 1",
    "COMMIT AND CHAIN",
    "CREATE ROLE intruder",
    "SELECT * FROM orders FOR UPDATE",
]


def test_the_check_catches_a_classifier_that_calls_writes_reads(
    pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Break the kind judgement (every statement a select): the differential check must find the writes.

    First, each trace the check looks for is left once by a statement run directly (the detector is
    not blind); then the broken classifier lets writes through, and the property must fail.

    On its own database: what the broken classifier lets through may leave a trace (a sequence a failed
    insert advanced, a prepared statement)."""
    connection = _throwaway(pg_server)
    writes = [
        "DELETE FROM orders",
        "WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d",
        "SELECT * INTO stolen FROM orders",
        "SELECT * FROM orders FOR UPDATE",
        "CREATE ROLE intruder",
        "COMMIT",
    ]
    for text in DETECTED:  # every trace the check looks for, left by a statement the host refuses
        assert _changes(connection, text), f"the check missed what {text!r} did"
    classify.cache_clear()
    monkeypatch.setattr(_pgcheck, "_statement_kinds", lambda node_type: {"select"})
    monkeypatch.setattr(_pgcheck._Walk, "kind_of", lambda self, key: None)
    try:
        for text in writes:
            assert _is_read(text), f"the broken classifier should call {text!r} a read"
            assert _changes(connection, text), f"the check missed the write in {text!r}"

        @settings(max_examples=150, deadline=None, database=None, phases=[Phase.generate])
        @given(text=statements())
        def property_under_the_broken_classifier(text: str) -> None:
            if _is_read(text):
                changes = _changes(connection, text)
                assert not changes, f"{text!r}: {changes}"

        with pytest.raises(AssertionError, match="it wrote|changed|ended"):
            property_under_the_broken_classifier()
    finally:
        classify.cache_clear()
        connection.close()
    monkeypatch.undo()
    assert not _is_read("DELETE FROM orders")


def test_a_view_over_a_writing_function_is_a_read_to_the_host_and_refused_by_the_server(pg_server: Any) -> None:
    """What the host cannot see: a view's body. The differential check finds the write; the read-only
    transaction the capability runs a read in refuses it, and the database is unchanged."""
    connection = _throwaway(pg_server)
    try:
        connection.execute("CREATE VIEW bumped AS SELECT bump() AS n")
        text = "SELECT * FROM bumped"
        assert _is_read(text)
        assert "the server assigned it a transaction id" in " ".join(_changes(connection, text))
        dsn = pg_server.dsn(connection.info.dbname)
        before = pg_snapshot(pg_server, dsn)
        grant = SqlGrant(database="shop", dsn=dsn, actions=READS_ONLY.actions)
        plan = Plan(grant, classify(text, "postgresql"), time.monotonic() + 10)
        with pytest.raises(EngineRefused, match="read-only"):
            run_postgres(dsn, pg_server.password, text, [], plan)
        assert pg_snapshot(pg_server, dsn) == before
    finally:
        connection.close()
