"""How long the console's busiest pages take with a large home, next to an empty one.

Run ``python bench/bench_console.py [--quick]``. A temporary home gets N pending
approval requests (10,000; 1,000 with ``--quick``) and M audit rows (1,000,000;
50,000 with ``--quick``), written straight into their SQLite tables (the rows
carry stored inputs; their hashes are not a valid chain, which no page here
checks). A real uvicorn on 127.0.0.1 serves ``create_app``; httpx asks each
page with an API key and the p50/p99 of the answers is printed beside the same
page of an empty home, as a ratio. The last page filters on a principal with no row:
the worst case without an index on principal (a walk of the whole log), one
look-up with it. Last, the cost of those indexes on writing: the same records
appended through ``AuditLog`` (journal, then folded into the chain) with the
filter indexes and with them dropped. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
import socket
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn

import glovebox
from glovebox import AuditLog
from glovebox.policy import ApprovalStore, parse_policy
from glovebox.servers import create_app

KEY = "bench-admin-key"
POLICY = f"""
version: 1
principals:
  admin:
    scopes: [glovebox:approve, glovebox:audit]
    api_key_sha256: [{hashlib.sha256(KEY.encode()).hexdigest()}]
audit: {{store_inputs: true}}
"""
PAGES = [
    "/ui/approvals",
    "/ui/approvals?offset={last_offset}",
    "/ui/audit",
    "/ui/audit?before={middle}",
    "/ui/audit?outcome=approval_required",
    "/ui/audit?principal=agent-7",
    "/ui/audit?principal=nobody",
    "/ui/audit?since=1h",
    "/ui/tools",
    "/ui/health",
]
#: The indexes the console's filters and its tools page read through (their cost is paid on every append).
FILTER_INDEXES = ("audit_principal", "audit_tool", "audit_outcome")


def _digest(n: int) -> str:
    return "sha256:" + hashlib.sha256(str(n).encode()).hexdigest()


def fill(home: Path, approvals: int, rows: int) -> None:
    """``approvals`` pending requests and ``rows`` audit rows (one per request among them)."""
    ApprovalStore(home).close()
    AuditLog(home).close()
    now = time.time()
    with sqlite3.connect(home / "approvals.sqlite") as db:
        db.executemany(
            "INSERT INTO approvals (id, principal, tool, input_digest, status, created_at, expires_at)"
            " VALUES (?, ?, 'sensitive@1.0.0', ?, 'pending', ?, ?)",
            [
                (secrets.token_hex(8), f"agent-{n % 50}", _digest(n), now + n / 1e4, now + 3600)
                for n in range(approvals)
            ],
        )

    def audit_rows() -> Iterator[tuple[object, ...]]:
        for seq in range(1, rows + 1):
            asked = seq % (rows // approvals or 1) == 0 and seq // (rows // approvals or 1) <= approvals
            n = seq // (rows // approvals or 1) - 1 if asked else -seq
            outcome = "approval_required" if asked else "ok"
            value = json.dumps({"q": n, "note": "x" * 40})
            yield (seq, f"c{seq}", "2026-12-01T00:00:00+00:00", f"agent-{n % 50}" if asked else f"agent-{seq % 9}",
                   "sensitive@1.0.0", "sha256:00", _digest(n), "require_approval", outcome, 0, 1.0,
                   '{"denials":[]}', value, None, "0" * 64, "0" * 64)  # fmt: skip

    with sqlite3.connect(home / "audit.sqlite") as db:
        db.executemany(
            "INSERT INTO audit (seq, call_id, time, principal, tool, digest, input_digest, decision, outcome,"
            " fuel_used, duration_ms, egress, input, output, prev_hash, hash) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            audit_rows(),
        )


FILTER_QUERIES = {
    "principal matching nothing (a page of 50)": (
        "SELECT * FROM audit WHERE seq < ? AND seq >= 0 AND principal = 'nobody' ORDER BY seq DESC LIMIT 50",
        (2**63 - 1,),
    ),
    "principal matching 1 row in 9 (a page of 50)": (
        "SELECT * FROM audit WHERE seq < ? AND seq >= 0 AND principal = 'agent-7' ORDER BY seq DESC LIMIT 50",
        (2**63 - 1,),
    ),
    "a tool never called (tools page, last 10)": (
        "SELECT time, outcome FROM audit WHERE tool = ? ORDER BY seq DESC LIMIT 10",
        ("never@1.0.0",),
    ),
}


def filter_queries(home: Path, repeat: int) -> dict[str, tuple[float, float]]:
    """p50 ms of each FILTER_QUERIES query with the filter indexes, then with them dropped."""
    found: dict[str, list[float]] = {}
    with sqlite3.connect(home / "audit.sqlite") as db:
        for dropped in (False, True):
            if dropped:
                for name in FILTER_INDEXES:
                    db.execute(f"DROP INDEX {name}")
            for label, (query, args) in FILTER_QUERIES.items():
                samples = []
                for _ in range(max(3, repeat // 4)):
                    started = time.perf_counter()
                    db.execute(query, args).fetchall()
                    samples.append((time.perf_counter() - started) * 1000)
                found.setdefault(label, []).append(statistics.median(samples))
    return {label: (both[0], both[1]) for label, both in found.items()}


def append_cost(rows: int) -> dict[str, float]:
    """Seconds to append and fold ``rows`` records through AuditLog, with and without FILTER_INDEXES."""
    record = {
        "call_id": "", "principal": "agent-1", "tool": "sensitive@1.0.0", "digest": "sha256:00",
        "input_digest": _digest(1), "decision": "allow", "outcome": "ok", "fuel_used": 1, "duration_ms": 1.0,
        "egress": {"denials": []}, "input": None, "output": None,
    }  # fmt: skip
    took = {}
    for label in ("with filter indexes", "without them"):
        with tempfile.TemporaryDirectory() as home:
            log = AuditLog(Path(home))
            if label == "without them":
                with sqlite3.connect(Path(home) / "audit.sqlite") as db:
                    for name in FILTER_INDEXES:
                        db.execute(f"DROP INDEX {name}")
            started = time.perf_counter()
            for n in range(rows):
                log.append({**record, "call_id": f"c{n}", "principal": f"agent-{n % 50}"})
            log.close()
            took[label] = time.perf_counter() - started
    return took


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def measure(home: Path, repeat: int, fmt: dict[str, int], pages: list[str] = PAGES) -> dict[str, list[float]]:
    """Milliseconds per answer of each page in ``pages``."""
    with glovebox.Runtime(home=home, policy=parse_policy(POLICY)) as rt:
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(create_app(rt), host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        times: dict[str, list[float]] = {}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {KEY}"}) as http:
            for page in pages:
                url = page.format(**fmt)
                assert http.get(url, timeout=120).status_code == 200, url  # warm
                samples = []
                for _ in range(repeat):
                    started = time.perf_counter()
                    answer = http.get(url, timeout=120)
                    samples.append((time.perf_counter() - started) * 1000)
                    assert answer.status_code == 200, url
                times[page] = samples
        server.should_exit = True
        thread.join(10)
    return times


def _p(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(q * len(samples)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 approvals and 50,000 audit rows")
    args = parser.parse_args()
    approvals, rows, repeat = (1_000, 50_000, 10) if args.quick else (10_000, 1_000_000, 20)
    with tempfile.TemporaryDirectory() as big, tempfile.TemporaryDirectory() as empty:
        started = time.perf_counter()
        fill(Path(big), approvals, rows)
        took = time.perf_counter() - started
        print(f"filled {approvals:,} pending approvals and {rows:,} audit rows in {took:.1f} s")
        fmt = {"last_offset": max(0, approvals - 50), "middle": rows // 2}
        loaded = measure(Path(big), repeat, fmt)
        bare = measure(Path(empty), repeat, {"last_offset": 0, "middle": 1})
        queries = filter_queries(Path(big), repeat)
    print(f"{'page':44} {'large p50':>10} {'p99':>8} {'empty p50':>10} {'ratio':>7}")
    for page in PAGES:
        big_p50, empty_p50 = statistics.median(loaded[page]), statistics.median(bare[page])
        print(
            f"{page.format(**fmt):44} {big_p50:8.1f}ms {_p(loaded[page], 0.99):6.1f}ms "
            f"{empty_p50:8.1f}ms {big_p50 / empty_p50:6.1f}x"
        )
    print("the audit queries behind those filters, on the same log, with the filter indexes and without them:")
    for label, (indexed, walked) in queries.items():
        print(f"  {label:42} {indexed:8.2f}ms indexed {walked:9.2f}ms without: {walked / indexed:7.0f}x")
    appended = 20_000 if args.quick else 100_000
    cost = append_cost(appended)
    with_index, without = cost["with filter indexes"], cost["without them"]
    print(
        f"append and fold {appended:,} records: {with_index * 1e6 / appended:.1f} us/record with the filter "
        f"indexes, {without * 1e6 / appended:.1f} us/record without: {with_index / without:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
