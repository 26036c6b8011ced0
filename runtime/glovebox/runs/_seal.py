"""Runs bound to what ran: the program's digest and a MAC chain over the journal, keyed from the home.

A run row keeps its program's digest (``program_digest``: the ``sha256:`` of
its source, the same digest its attempts' audit rows carry) and a MAC
(``seal``) over what makes the run: its id, principal, language, that digest,
the digest of the script the runner is given, and its input. Each journal step
keeps a MAC over its texts and the MAC before it (the run's seal for step 0),
so the steps form a chain bound to the run: a step edited, swapped, moved to
another run, or dropped from the middle breaks it; the run's journal head
(``journal_head``: a MAC over the number of steps and the last step's MAC)
sees steps dropped from the end. A rollback's compensation rows
(:mod:`._compensations`) are sealed the same way: each keeps a MAC over its
texts, bound to the run and the step it undoes, and the run keeps a head over
them all (``compensations_head``: each row's step and MAC), so a row edited,
moved, or dropped (a ``done`` compensation would be called again) is seen.
The MACs are HMAC-SHA256
with the home's run key (``HOME/runs.key``, 32 random bytes, mode 0600, made
on first use); a step's timestamps and ``reran`` mark are not covered.

A resume (and a rollback, a save, an export) checks them all before anything runs (:func:`check`): a program that is
not what the run started with is :class:`~glovebox.ProgramChanged`, a journal
that is not what the runs wrote is :class:`~glovebox.JournalTampered`.

A store made before the seals gets them on open (:func:`seal_all`): what it
held when this glovebox first opened it is taken as it stood.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sqlite3
from pathlib import Path
from typing import Any

from ..core._canonical import canonical_json, sha256_digest
from ..core._errors import JournalTampered, ProgramChanged

__all__ = [
    "COMPENSATION_COLUMNS",
    "KEY_FILE",
    "STEP_COLUMNS",
    "check",
    "compensation_seal",
    "home_key",
    "program_digest",
    "run_seal",
    "seal_all",
    "seal_compensation",
    "seal_compensations",
    "seal_head",
    "seal_run",
    "seal_step",
    "step_seal",
]

#: The file in the home that holds the key of the runs' MACs.
KEY_FILE = "runs.key"
_KEY_BYTES = 32


def home_key(home: Path) -> bytes:
    """The home's run key, made (mode 0600, never overwritten: of two processes making it, one wins) if missing."""
    path = home / KEY_FILE
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    staged = path.with_name(f".{KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, os.urandom(_KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(staged, path)  # fails when another process made it first: theirs is the key
    except FileExistsError:
        pass
    finally:
        staged.unlink()
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    key = path.read_bytes()
    if len(key) != _KEY_BYTES:
        raise ValueError(f"{path} is not a run key ({_KEY_BYTES} bytes)")
    return key


def program_digest(source: str) -> str:
    """``sha256:`` of a program's source (as the attempts' audit rows name it)."""
    return sha256_digest(source.encode("utf-8", "surrogatepass"))


def _mac(key: bytes, parts: list[Any]) -> str:
    return hmac.new(key, canonical_json(parts).encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def run_seal(key: bytes, run_id: str, principal: str, lang: str, digest: str, script: str, input_text: str) -> str:
    """The MAC of a run: its id, principal, language, program digest, script and input (as stored)."""
    script_digest = sha256_digest(script.encode("utf-8", "surrogatepass"))
    return _mac(key, ["glovebox-run-v1", run_id, principal, lang, digest, script_digest, input_text])


#: The journal columns a step's MAC covers, in order (after the run id, seq and the MAC before it).
STEP_COLUMNS = "kind, request, result, state, call_id, asked, answer, summary"


def step_seal(key: bytes, run_id: str, seq: int, previous: str, texts: tuple[Any, ...]) -> str:
    """The MAC of step ``seq`` (``texts``: its :data:`STEP_COLUMNS`), chained to ``previous``."""
    return _mac(key, ["glovebox-step-v1", run_id, seq, previous, *texts])


def previous_seal(db: sqlite3.Connection, run_id: str, seq: int) -> str:
    """The MAC step ``seq`` is chained to: step ``seq - 1``'s, or the run's own for step 0."""
    if seq == 0:
        row = db.execute("SELECT seal FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    else:
        row = db.execute("SELECT seal FROM journal WHERE run_id = ? AND seq = ?", (run_id, seq - 1)).fetchone()
    return "" if row is None or row[0] is None else str(row[0])


def seal_step(db: sqlite3.Connection, key: bytes, run_id: str, seq: int) -> None:
    """(Re)write the MAC of step ``seq`` as it stands now, in ``db``'s transaction."""
    row = db.execute(f"SELECT {STEP_COLUMNS} FROM journal WHERE run_id = ? AND seq = ?", (run_id, seq)).fetchone()
    if row is None:
        return
    seal = step_seal(key, run_id, seq, previous_seal(db, run_id, seq), tuple(row))
    db.execute("UPDATE journal SET seal = ? WHERE run_id = ? AND seq = ?", (seal, run_id, seq))
    seal_head(db, key, run_id)


def _head(key: bytes, run_id: str, steps: int, last: str) -> str:
    return _mac(key, ["glovebox-head-v1", run_id, steps, last])


def seal_head(db: sqlite3.Connection, key: bytes, run_id: str) -> None:
    """Write the run's journal head: a MAC over how many steps its journal holds and the last one's
    MAC (so a step dropped from the journal's end is seen too), in ``db``'s transaction."""
    steps, last = db.execute(
        "SELECT COUNT(*), (SELECT seal FROM journal WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1)"
        " FROM journal WHERE run_id = ?1",
        (run_id,),
    ).fetchone()
    db.execute("UPDATE runs SET journal_head = ? WHERE run_id = ?", (_head(key, run_id, steps, last or ""), run_id))


#: The compensation columns a compensation's MAC covers, in order (after the run id and the step it undoes).
COMPENSATION_COLUMNS = "tool, input, state, call_id, result"


def compensation_seal(key: bytes, run_id: str, seq: int, texts: tuple[Any, ...]) -> str:
    """The MAC of the compensation of step ``seq`` (``texts``: its :data:`COMPENSATION_COLUMNS`)."""
    return _mac(key, ["glovebox-compensation-v1", run_id, seq, *texts])


def _compensations_head(key: bytes, run_id: str, seals: list[tuple[int, str | None]]) -> str:
    return _mac(key, ["glovebox-compensations-v1", run_id, [[seq, seal or ""] for seq, seal in seals]])


def seal_compensation(db: sqlite3.Connection, key: bytes, run_id: str, seq: int) -> None:
    """(Re)write the MAC of step ``seq``'s compensation as it stands now (if any) and the run's head
    over its compensations, in ``db``'s transaction (after a row is written or dropped)."""
    row = db.execute(
        f"SELECT {COMPENSATION_COLUMNS} FROM compensations WHERE run_id = ? AND seq = ?", (run_id, seq)
    ).fetchone()
    if row is not None:
        seal = compensation_seal(key, run_id, seq, tuple(row))
        db.execute("UPDATE compensations SET seal = ? WHERE run_id = ? AND seq = ?", (seal, run_id, seq))
    seals = db.execute("SELECT seq, seal FROM compensations WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
    head = _compensations_head(key, run_id, [(s, m) for s, m in seals])
    db.execute("UPDATE runs SET compensations_head = ? WHERE run_id = ?", (head, run_id))


def seal_compensations(db: sqlite3.Connection, key: bytes) -> None:
    """Seal every compensation row (a store made before their seals: taken as it stands)."""
    rows = db.execute("SELECT run_id, seq FROM compensations WHERE seal IS NULL ORDER BY run_id, seq").fetchall()
    for run_id, seq in rows:
        seal_compensation(db, key, run_id, seq)


def _check_compensations(db: sqlite3.Connection, key: bytes, run_id: str, head: str | None) -> None:
    rows = db.execute(
        f"SELECT seq, {COMPENSATION_COLUMNS}, seal FROM compensations WHERE run_id = ? ORDER BY seq", (run_id,)
    ).fetchall()
    if head is None and not rows:
        return  # never rolled back
    for seq, *texts, stored in rows:
        if stored is None or not hmac.compare_digest(stored, compensation_seal(key, run_id, seq, tuple(texts))):
            raise _tampered_compensation(run_id, seq)
    expected = _compensations_head(key, run_id, [(row[0], row[-1]) for row in rows])
    if head is None or not hmac.compare_digest(head, expected):
        raise _tampered_compensation(run_id, None)  # a row dropped or added (or the head forged)


def _tampered_compensation(run_id: str, seq: int | None) -> JournalTampered:
    which = "a compensation was dropped" if seq is None else f"the compensation of step {seq} was changed"
    return JournalTampered(
        f"run {run_id!r}: its rollback's record is not what the rollback wrote ({which}); it will not roll back",
        details={"run_id": run_id, "compensation": seq},
    )


def seal_run(db: sqlite3.Connection, key: bytes, run_id: str) -> None:
    """Seal run ``run_id`` and its whole journal as they stand now (an upgraded store's runs)."""
    row = db.execute("SELECT principal, lang, source, script, input FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return
    principal, lang, source, script, input_text = row
    digest = program_digest(source)
    seal = run_seal(key, run_id, principal, lang, digest, script, input_text)
    db.execute("UPDATE runs SET program_digest = ?, seal = ? WHERE run_id = ?", (digest, seal, run_id))
    for (seq,) in db.execute("SELECT seq FROM journal WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall():
        seal_step(db, key, run_id, seq)
    seal_head(db, key, run_id)


def seal_all(db: sqlite3.Connection, key: bytes) -> None:
    """Seal every run not sealed yet (a store made before the seals: taken as it stands)."""
    for (run_id,) in db.execute("SELECT run_id FROM runs WHERE seal IS NULL").fetchall():
        seal_run(db, key, run_id)


def check(db: sqlite3.Connection, key: bytes, run_id: str) -> None:
    """Refuse a run whose program or journal is not what its attempts wrote.

    Raises:
        ProgramChanged: the source is not the digest recorded at the run's start, or the run's
            seal does not cover its program, principal, language and input as stored.
        JournalTampered: a step's MAC does not match its texts and the step before it, or a
            compensation's (or the head over them) does not match what the rollback wrote
            (``details.compensation``: the step it undoes; None when one was dropped).
    """
    row = db.execute(
        "SELECT principal, lang, source, script, input, program_digest, seal, journal_head, compensations_head"
        " FROM runs WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    if row is None:
        return
    principal, lang, source, script, input_text, digest, seal, head, compensations = row
    details: dict[str, Any] = {"run_id": run_id, "program_digest": digest}
    if digest is None or program_digest(source) != digest:
        raise ProgramChanged(
            f"run {run_id!r}: its stored program is not the one it started with ({digest}); it will not resume",
            details={**details, "stored_digest": program_digest(source)},
        )
    if seal is None or not hmac.compare_digest(
        seal, run_seal(key, run_id, principal, lang, digest, script, input_text)
    ):
        raise ProgramChanged(
            f"run {run_id!r}: its stored program, input or owner is not what it started with; it will not resume",
            details=details,
        )
    previous, steps = seal, 0
    rows = db.execute(f"SELECT seq, {STEP_COLUMNS}, seal FROM journal WHERE run_id = ? ORDER BY seq", (run_id,))
    for expected, (seq, *texts, stored) in enumerate(rows.fetchall()):
        mac = step_seal(key, run_id, seq, previous, tuple(texts))
        if seq != expected or stored is None or not hmac.compare_digest(stored, mac):
            raise _tampered(run_id, min(seq, expected))
        previous, steps = stored, steps + 1
    if head is None or not hmac.compare_digest(head, _head(key, run_id, steps, previous if steps else "")):
        raise _tampered(run_id, steps)  # its end: steps dropped (or the head forged)
    _check_compensations(db, key, run_id, compensations)


def _tampered(run_id: str, step: int) -> JournalTampered:
    return JournalTampered(
        f"run {run_id!r}: its journal at step {step} is not what the run wrote; it will not resume",
        details={"run_id": run_id, "step": step},
    )
