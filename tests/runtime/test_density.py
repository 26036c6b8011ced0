"""Density: thousands of calls in flight at once in one process, file descriptors bounded.

A child process lowers its own ``RLIMIT_NOFILE`` to the calls it holds plus a
small margin, then holds them all at once in a real upstream on 127.0.0.1
(the ``http_client`` guest fetching a barrier upstream in its own process,
which answers only once every request is waiting). Each call in flight owns
exactly one file descriptor, its socket; the SQLite databases must not add
one per thread (three per connection: the file, ``-wal`` and ``-shm``), or
the calls fail with EMFILE. (The limit is above 1,024 because 2,000 sockets
are the point: a call in flight holds its connection.) Concurrency is proven on the server side (how
many requests it saw waiting at once), never by timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from glovebox.storage._sqlite import MAX_CONNECTIONS, Database

#: Calls held in flight at once.
HELD = 2000
#: File descriptors the child may open besides one socket per call.
MARGIN = 256
#: The upstream, its own process (its sockets are not the child's): ``GET /hold`` answers
#: ``{"peak": N}`` once ``sys.argv[1]`` requests wait together, N being how many did. With
#: ``sys.argv[2]`` ``one-by-one`` it answers one request at a time, the next once its caller
#: hung up; with ``all-at-once`` it answers every one together (a herd of threads woken at once).
BARRIER = textwrap.dedent(
    """
    import asyncio, contextlib, json, sys

    async def main():
        expect, one_by_one = int(sys.argv[1]), sys.argv[2] == "one-by-one"
        state, everyone, turn = {"waiting": 0, "peak": 0}, asyncio.Event(), asyncio.Lock()

        async def handle(reader, writer):
            try:
                await reader.readuntil(b"\\r\\n\\r\\n")
                state["waiting"] += 1
                state["peak"] = max(state["peak"], state["waiting"])
                if state["peak"] >= expect:
                    everyone.set()
                await everyone.wait()
                state["waiting"] -= 1
                body = json.dumps({"peak": state["peak"]}).encode()
                head = f"HTTP/1.1 200 OK\\r\\nContent-Length: {len(body)}\\r\\nConnection: close\\r\\n\\r\\n"
                async with turn if one_by_one else contextlib.nullcontext():
                    writer.write(head.encode() + body)
                    await writer.drain()
                    if one_by_one:  # the next answer once this caller hung up
                        await asyncio.wait_for(reader.read(), 30)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, TimeoutError):
                pass
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=expect)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())
    """
)


@contextmanager
def upstream_process(script: str, *args: str) -> Iterator[int]:
    """Run an upstream ``script`` (``python -c``) in its own process; yield the port it prints; kill it after."""
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def barrier() -> Iterator[int]:
    """The port of a barrier upstream holding every request until :data:`HELD` wait at once."""
    with upstream_process(BARRIER, str(HELD), "one-by-one") as port:
        yield port


CHILD = textwrap.dedent(
    """
    import json, resource, sys
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    held, limit, wasm, home, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    import glovebox

    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "methods": ["GET"],
            "paths": ["/**"], "allow_private": True}
    grants = {"http": [rule], "http_limits": {"request_timeout_ms": 60_000}}
    with glovebox.Runtime(home=Path(home), grants=grants) as rt:
        manifest = {"name": "hc", "capabilities": {"http": [rule]}, "limits": {"timeout_ms": 60_000}}
        rt.register(Path(wasm), manifest=manifest)
        url = f"http://127.0.0.1:{port}/hold"
        with ThreadPoolExecutor(max_workers=held) as pool:
            results = list(pool.map(lambda _: rt.call("hc", {"url": url}), range(held)))
            connections = {  # read while every calling thread is still alive
                "registry": rt._registry._database.open_connections,
                "audit": rt.audit._database.open_connections,
            }
        codes = sorted({"ok" if r.ok else r.code for r in results})
        answered = [r.output for r in results if r.ok and r.output["status"] == "ok"]
        peaks = sorted({json.loads(output["body"])["peak"] for output in answered})
        failed = [r.to_dict()["error"] or r.output for r in results if not r.ok or r.output["status"] != "ok"]
        first = failed[0] if failed else None
        rows = sum(1 for _ in rt.audit.records())
        verified = rt.audit.verify().ok
    print(json.dumps({"codes": codes, "first": first, "connections": connections, "rows": rows,
                      "verified": verified, "peaks": peaks}))
    """
)


@pytest.mark.slow  # 2000 calls in flight
def test_2000_calls_in_flight_under_a_low_file_limit(
    _isolated_env: Path, build_guest: Callable[[str], Path], barrier: int
) -> None:
    wasm = build_guest("http_client")
    port = barrier
    argv = [str(HELD), str(HELD + MARGIN), str(wasm), str(_isolated_env / "dense"), str(port)]
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["codes"] == ["ok"], report["first"]
    assert report["peaks"] == [HELD]  # every call was answered once all of them were in flight at once
    assert report["connections"]["registry"] <= MAX_CONNECTIONS
    assert report["connections"]["audit"] <= MAX_CONNECTIONS
    assert (report["rows"], report["verified"]) == (HELD, True)


def test_a_borrowing_thread_nested_in_itself_gets_its_own_connection_back(tmp_path: Path) -> None:
    database = Database(tmp_path / "n.sqlite", "CREATE TABLE IF NOT EXISTS t (n INTEGER);", 1)
    with database.write() as outer, database.connection() as inner:  # one connection: no wait for a second
        assert inner is outer and inner.in_transaction
        inner.execute("INSERT INTO t VALUES (1)")
    with database.connection() as db:
        assert db.execute("SELECT count(*) FROM t").fetchone() == (1,)
        assert not db.in_transaction
    assert database.open_connections == 1
    database.close()
    assert database.open_connections == 0
