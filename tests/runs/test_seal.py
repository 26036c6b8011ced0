"""The program is what ran: a stored run's program and journal are checked before a resume (runs/_seal.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import glovebox
from glovebox.runs._seal import KEY_FILE

from .conftest import HitCounter

TWO_STEPS = """export default async function (input, tools) {
  const a = await tools.call("hc", { url: input.base + "/one" });
  const b = await tools.call("hc-approve", { url: input.base + "/two" });
  return [a.status, b.status];
}"""


def _paused(rt: glovebox.Runtime, upstream: HitCounter) -> glovebox.RunResult:
    paused = rt.run(TWO_STEPS, input={"base": upstream.url("")}, principal="agent")
    assert paused.status == "paused", paused.to_dict()
    return paused


def _edit(rt: glovebox.Runtime, statement: str, run_id: str) -> None:
    with sqlite3.connect(rt.home / "runs.sqlite") as db:
        before = db.execute("SELECT * FROM runs, journal USING (run_id) WHERE run_id = ?", (run_id,)).fetchall()
        assert db.execute(statement, (run_id,)).rowcount == 1
        assert db.execute("SELECT * FROM runs, journal USING (run_id) WHERE run_id = ?", (run_id,)).fetchall() != before


def _audit_outcomes(home: Path, run_id: str) -> list[str]:
    audit = glovebox.AuditLog(home)
    try:
        rows = [(row, json.loads(row["egress"] or "{}")) for row in audit.records() if row["tool"] == "glovebox:run"]
        return [row["outcome"] for row, egress in rows if egress.get("run", {}).get("run_id") == run_id]
    finally:
        audit.close()


@pytest.mark.system
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE runs SET source = replace(source, '/one', '/uno') WHERE run_id = ?",
        "UPDATE runs SET script = replace(script, '/one', '/uno') WHERE run_id = ?",
        # the source and its recorded digest changed together: the run's MAC still refuses it
        "UPDATE runs SET script = script || ' ', source = source || ' ',"
        " program_digest = 'sha256:' || lower(hex(randomblob(32))) WHERE run_id = ?",
        'UPDATE runs SET input = \'{"base": "http://127.0.0.1:9"}\' WHERE run_id = ?',
        "UPDATE runs SET principal = 'admin' WHERE run_id = ?",
    ],
)
def test_a_changed_program_is_refused(rt: glovebox.Runtime, upstream: HitCounter, statement: str) -> None:
    paused = _paused(rt, upstream)
    _edit(rt, statement, paused.run_id)
    refused = rt.runs.resume(paused.run_id)
    assert refused.status == "failed" and refused.error is not None, refused.to_dict()
    assert refused.error.code == "program_changed" and refused.error.details["run_id"] == paused.run_id
    assert upstream.hits == {"/one": 1}  # nothing ran
    assert rt.runs.show(paused.run_id).status == "failed"  # and it never will
    assert rt.runs.resume(paused.run_id).error.code == "program_changed"  # type: ignore[union-attr]
    assert _audit_outcomes(rt.home, paused.run_id)[-1] == "program_changed"


@pytest.mark.system
@pytest.mark.parametrize(
    ("statement", "step"),
    [
        ("UPDATE journal SET answer = replace(answer, '200', '201') WHERE run_id = ? AND seq = 0", 0),
        ("UPDATE journal SET result = replace(result, '200', '201') WHERE run_id = ? AND seq = 0", 0),
        ("UPDATE journal SET seal = NULL WHERE run_id = ? AND seq = 0", 0),
        ("DELETE FROM journal WHERE run_id = ? AND seq = 0", 0),
    ],
)
def test_a_tampered_journal_is_refused(rt: glovebox.Runtime, upstream: HitCounter, statement: str, step: int) -> None:
    paused = _paused(rt, upstream)
    _edit(rt, statement, paused.run_id)
    refused = rt.runs.resume(paused.run_id)
    assert refused.status == "failed" and refused.error is not None, refused.to_dict()
    assert refused.error.code == "journal_tampered" and refused.error.details["step"] == step
    assert upstream.hits == {"/one": 1}


@pytest.mark.system
def test_a_step_moved_from_another_run_is_refused(rt: glovebox.Runtime, upstream: HitCounter) -> None:
    first, second = _paused(rt, upstream), _paused(rt, upstream)
    with sqlite3.connect(rt.home / "runs.sqlite") as db:  # the other run's step 0, seal and all
        db.execute("DELETE FROM journal WHERE run_id = ?", (second.run_id,))
        db.execute(
            "INSERT INTO journal SELECT ?, seq, kind, request, result, state, call_id, reran, started, finished,"
            " asked, answer, summary, seal FROM journal WHERE run_id = ?",
            (second.run_id, first.run_id),
        )
    assert rt.runs.resume(second.run_id).error.code == "journal_tampered"  # type: ignore[union-attr]
    assert rt.runs.resume(first.run_id).status == "paused"  # untouched: not approved yet, it pauses again


@pytest.mark.system
def test_a_key_from_another_home_refuses_every_run(rt: glovebox.Runtime, upstream: HitCounter) -> None:
    paused = _paused(rt, upstream)
    rt.close()
    (rt.home / KEY_FILE).write_bytes(bytes(32))  # not the key the run was sealed with
    with glovebox.Runtime(home=rt.home, policy=rt.policy) as other:
        assert other.runs.resume(paused.run_id).error.code == "program_changed"  # type: ignore[union-attr]


def test_the_run_key_is_made_once_and_kept_private(tmp_path: Path) -> None:
    from glovebox.runs._seal import home_key

    key = home_key(tmp_path)
    assert len(key) == 32 and home_key(tmp_path) == key
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert [path.name for path in tmp_path.iterdir()] == [KEY_FILE]


#: ``runs.sqlite`` as glovebox made it before the seals (no ``program_digest``, no ``seal``).
_OLD_SCHEMA = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, principal TEXT NOT NULL, status TEXT NOT NULL, lang TEXT NOT NULL,
    source TEXT NOT NULL, script TEXT NOT NULL, input TEXT NOT NULL, result TEXT, created REAL NOT NULL,
    updated REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 1, steps INTEGER NOT NULL DEFAULT 0,
    journal_bytes INTEGER NOT NULL DEFAULT 0, lease_owner TEXT, lease_expires REAL, resumed_by TEXT,
    attempt_call_id TEXT, first_call_id TEXT);
CREATE TABLE journal (run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, request TEXT NOT NULL,
    result TEXT, state TEXT NOT NULL, call_id TEXT, reran INTEGER NOT NULL DEFAULT 0, started REAL NOT NULL,
    finished REAL, asked TEXT, answer TEXT, summary TEXT, PRIMARY KEY (run_id, seq));
"""


@pytest.mark.system
def test_a_store_made_before_the_seals_is_sealed_on_open(rt: glovebox.Runtime, upstream: HitCounter) -> None:
    paused = _paused(rt, upstream)
    rt.close()
    path = rt.home / "runs.sqlite"
    with sqlite3.connect(path) as db:  # the same run, in a store as an earlier glovebox wrote it
        runs = db.execute("SELECT * FROM runs").fetchall()
        steps = db.execute("SELECT * FROM journal").fetchall()
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.executescript(_OLD_SCHEMA)
        db.executemany(f"INSERT INTO runs VALUES ({', '.join('?' * 18)})", [row[:18] for row in runs])
        db.executemany(f"INSERT INTO journal VALUES ({', '.join('?' * 13)})", [row[:13] for row in steps])
    with glovebox.Runtime(home=rt.home, policy=rt.policy) as upgraded:
        digest = upgraded.runs.store.program_digest(paused.run_id)
        assert digest is not None and digest.startswith("sha256:")
        assert upgraded.runs.resume(paused.run_id).status == "paused"  # sealed as it stood: it resumes
        _edit(upgraded, "UPDATE journal SET seal = NULL WHERE run_id = ? AND seq = 0", paused.run_id)
    with glovebox.Runtime(home=rt.home, policy=rt.policy) as reopened:  # a dropped seal is never sealed again
        assert reopened.runs.resume(paused.run_id).error.code == "journal_tampered"  # type: ignore[union-attr]
