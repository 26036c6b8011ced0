"""The host's classifier against SQLite's own verdict, on statements hypothesis writes.

Each statement is classified; then it runs on a throwaway copy of a database with
plain ``sqlite3`` (no authorizer, no read-only connection: the engine's own
verdict). A statement the classifier calls a pure read (every kind ``select``,
not refused) must not have written anything: the changes counter, the schema
and every row stay as they were, run as one statement and as a script.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glovebox.capabilities._sqlcheck import SqlRefused, classify

from .sqlfixtures import make_shop, snapshot

TABLES = st.sampled_from(["orders", "users", "main.orders", '"orders"', "[orders]", "sqlite_master", "x"])
VALUES = st.sampled_from(["1", "'a'", "NULL", "?", "(SELECT 1)", "x'00'", "1e3", "-1"])
COLUMNS = st.sampled_from(["*", "id", "item", "qty", "count(*)", "max(qty)", "1", "item || 'x'"])
GAPS = st.sampled_from([" ", "  ", "\n", "\t", " /* c */ ", " -- c\n", "/**/"])


@st.composite
def statements(draw: st.DrawFn) -> str:
    table, value, column, gap = draw(TABLES), draw(VALUES), draw(COLUMNS), draw(GAPS)
    core = draw(
        st.sampled_from(
            [
                f"SELECT{gap}{column} FROM {table}",
                f"SELECT {column} FROM {table} WHERE id = {value}",
                f"INSERT INTO {table} (item) VALUES ({value})",
                f"INSERT OR REPLACE INTO {table} (id, item) VALUES (1, {value})",
                f"REPLACE INTO {table} (id, item) VALUES (1, {value})",
                f"UPDATE {table} SET qty = {value}",
                f"DELETE FROM {table} WHERE id = {value}",
                f"DELETE FROM {table} RETURNING *",
                f"CREATE TABLE t2 AS SELECT * FROM {table}",
                "CREATE TEMP TABLE t3 (a)",
                f"DROP TABLE {table}",
                f"ALTER TABLE {table} ADD COLUMN z",
                "PRAGMA user_version = 7",
                "PRAGMA journal_mode = DELETE",
                "VACUUM",
                "ANALYZE",
                "REINDEX",
                "BEGIN",
                f"SAVEPOINT s{gap}",
                f"SELECT 1;{gap}DELETE FROM {table}",
                f"SELECT 1;{gap}",
                f"SELECT 1 /* ; DELETE FROM {table} */",
                f"SELECT 1 -- ; DELETE FROM {table}\n",
                f"SELECT '{gap}; DELETE FROM orders'",
                "CREATE TRIGGER tr AFTER INSERT ON orders BEGIN DELETE FROM users; END",
                "CREATE VIEW v AS SELECT 1",
                "CREATE INDEX i ON orders (item)",
            ]
        )
    )
    prefix = draw(st.sampled_from(["", "WITH c AS (SELECT 1) ", "WITH RECURSIVE c(n) AS (SELECT 1) ", "EXPLAIN "]))
    case = draw(st.sampled_from([str, str.lower, str.upper]))
    return case(prefix + core)


def _changed(db: Path, text: str, script: bool) -> bool:
    before = snapshot(db)
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        try:
            if script:
                connection.executescript(text)
            else:
                connection.execute(text, [1] * text.count("?")).fetchall()
        except (sqlite3.Error, sqlite3.Warning, ValueError):
            pass
        changes = connection.total_changes
    finally:
        connection.close()
    return changes > 0 or snapshot(db) != before


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=statements())
def test_a_statement_judged_a_read_never_writes(tmp_path_factory: object, text: str) -> None:
    try:
        statement = classify(text)
    except SqlRefused:
        return  # refused: the database never sees it
    if statement.kinds != {"select"}:
        return  # judged a write: it must be granted (and approved) to run
    work = Path(str(tmp_path_factory.mktemp("diff")))  # type: ignore[attr-defined]
    original = make_shop(work / "original.db")
    for script in (False, True):
        copy = work / f"copy-{script}.db"
        shutil.copyfile(original, copy)
        assert not _changed(copy, text, script), f"{text!r} was judged a read but wrote (script={script})"
