"""The runs of a home and their journals, in ``HOME/runs.sqlite``: :class:`RunStore`.

A run row holds the program (its source and the script the runner is given),
its input, principal, status and, once it ended, its output or error. The store
is the one door to the database; behind it, each concern is a module:

- :mod:`._schema` — the tables, and the columns an older store gains on open;
- :mod:`._records` — the rows as values (:class:`RunRecord`, :class:`JournalStep`, ...);
- :mod:`._claims` — a run's lease: claimed, renewed, released, and every journal
  write fenced by it (so two processes never both run a run's next live call);
- :mod:`._journal` — one row per host call, written before and after it runs;
- :mod:`._gc` — collecting finished runs;
- :mod:`._seal` — the program's digest and the journal's MAC chain, checked before a resume.
"""

from __future__ import annotations

import builtins
import json
import time
import uuid
from pathlib import Path
from typing import Any

from . import _claims, _compensations, _gc, _journal, _seal
from ._compensations import Compensation
from ._records import COLUMNS, FINISHED, JournalStep, Lease, RecordedStep, RunRecord, record_of
from ._schema import open_database
from ._seal import home_key, program_digest, run_seal

__all__ = ["FINISHED", "Compensation", "JournalStep", "Lease", "RecordedStep", "RunRecord", "RunStore"]


class RunStore:
    """Runs and journals of one home (see the module docstring)."""

    def __init__(self, home: Path) -> None:
        self.path = home / "runs.sqlite"
        home.mkdir(parents=True, exist_ok=True)
        self._key = home_key(home)
        self._db = open_database(self.path, self._key)

    def close(self) -> None:
        """Close the database's connections."""
        self._db.close()

    # -- runs --------------------------------------------------------------

    def create(
        self,
        principal: str,
        lang: str,
        source: str,
        script: str,
        input: Any,
        *,
        lease: Lease | None = None,
        call_id: str | None = None,
    ) -> str:
        """A new ``running`` run (held by ``lease``, its first attempt's audit call id ``call_id``); its id."""
        run_id = uuid.uuid4().hex
        now = time.time()
        owner, expires = (None, None) if lease is None else (lease.owner, now + lease.seconds)
        input_text = json.dumps(input)
        digest = program_digest(source)
        seal = run_seal(self._key, run_id, principal, lang, digest, script, input_text)
        with self._db.write() as db:
            db.execute(
                "INSERT INTO runs (run_id, principal, status, lang, source, script, input, created, updated,"
                " lease_owner, lease_expires, attempt_call_id, first_call_id, program_digest, seal)"
                " VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, principal, lang, source, script, input_text, now, now)
                + (owner, expires, call_id, call_id, digest, seal),
            )
            _seal.seal_head(db, self._key, run_id)
        return run_id

    def check(self, run_id: str) -> None:
        """Refuse a run whose stored program or journal is not what it wrote (:mod:`._seal`).

        Raises:
            ProgramChanged: the program (or its input or owner) changed since the run started.
            JournalTampered: a journal step is not what the run wrote (``details.step``).
        """
        with self._db.connection() as db:
            _seal.check(db, self._key, run_id)

    def reseal(self, run_id: str) -> None:
        """Seal the run and its journal as they stand now (what an upgrade does to a store made before
        the seals; a test that edits a journal on purpose seals it again)."""
        with self._db.write() as db:
            _seal.seal_run(db, self._key, run_id)

    def program_digest(self, run_id: str) -> str | None:
        """The ``sha256:`` of the program run ``run_id`` started with, as recorded then."""
        with self._db.connection() as db:
            row = db.execute("SELECT program_digest FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else row[0]

    def get(self, run_id: str) -> RunRecord | None:
        """The run ``run_id``, or None."""
        with self._db.connection() as db:
            row = db.execute(f"SELECT {COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else record_of(row)

    def list(
        self, *, principal: str | None = None, status: str | None = None, limit: int = 100, offset: int = 0
    ) -> builtins.list[RunRecord]:
        """Runs, newest first (``offset`` skips the newest ones: a page)."""
        where, args = [], []
        if principal is not None:
            where.append("principal = ?")
            args.append(principal)
        if status is not None:
            where.append("status = ?")
            args.append(status)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._db.connection() as db:
            rows = db.execute(
                f"SELECT {COLUMNS} FROM runs {clause} ORDER BY created DESC, run_id LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()
        return [record_of(row) for row in rows]

    def starts_since(self, principal: str, since: float, limit: int) -> builtins.list[float]:
        """When ``principal`` started runs since ``since`` (epoch seconds): newest first, at most ``limit``."""
        with self._db.connection() as db:
            rows = db.execute(
                "SELECT created FROM runs WHERE principal = ? AND created >= ? ORDER BY created DESC LIMIT ?",
                (principal, since, limit),
            ).fetchall()
        return [float(row[0]) for row in rows]

    def collect(self, older_than: float) -> builtins.list[str]:
        """Delete finished runs last updated before ``older_than`` and their journals; their ids (:mod:`._gc`)."""
        return _gc.collect(self._db, older_than)

    # -- claims (:mod:`._claims`) -------------------------------------------

    def set_status(
        self,
        run_id: str,
        status: str,
        result: dict[str, Any] | None = None,
        *,
        only_from: str | None = None,
        owner: str | None = None,
    ) -> bool:
        """Record how the run stands now (and, once it ended, its result), releasing its lease; with
        ``only_from``, only when it still stands there (a run cancelled meanwhile stays cancelled);
        with ``owner``, only while that attempt still holds the lease. Whether it changed."""
        return _claims.settle(self._db, run_id, status, result, only_from=only_from, owner=owner)

    def claim(
        self,
        run_id: str,
        statuses: tuple[str, ...],
        *,
        lease: Lease | None = None,
        by: str | None = None,
        call_id: str | None = None,
        dead: str | None = None,
    ) -> RunRecord | None:
        """Mark the run ``running`` again (one more attempt, made by ``by``, audited as ``call_id``) if it
        is in one of ``statuses`` and no live lease is held on it, taking ``lease``: one atomic
        ``UPDATE ... WHERE``, so of two processes claiming at once one wins. Else None.

        ``dead``: a lease owner known to have died (its process is gone); its lease counts as expired."""
        claimed = _claims.claim(self._db, run_id, statuses, lease=lease, by=by, call_id=call_id, dead=dead)
        return self.get(run_id) if claimed else None

    def renew(self, run_id: str, lease: Lease) -> bool:
        """Push the lease's expiry on while ``lease`` still holds the run; whether it does."""
        return _claims.renew(self._db, run_id, lease)

    # -- the journal (:mod:`._journal`; with ``owner``, each write is fenced by the lease) --

    def journal(self, run_id: str) -> builtins.list[JournalStep]:
        """The run's steps in order."""
        return _journal.read(self._db, run_id)

    def recorded_steps(self, run_id: str) -> builtins.list[RecordedStep]:
        """The run's steps in order, as a replay reads them: one query, the texts as stored, nothing parsed."""
        return _journal.read_recorded(self._db, run_id)

    def begin_step(
        self,
        run_id: str,
        seq: int,
        kind: str,
        request_text: str,
        call_id: str | None,
        *,
        asked: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Write step ``seq`` as ``started`` (a step left ``started`` by a crash runs again, ``reran``)."""
        _journal.begin_step(self._db, self._key, run_id, seq, kind, request_text, call_id, asked=asked, owner=owner)

    def record_step(
        self,
        run_id: str,
        seq: int,
        kind: str,
        request_text: str,
        result_text: str,
        *,
        asked: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Write step ``seq`` ``done`` at once (the clock, the random seed, a search: nothing to run twice)."""
        _journal.record_step(
            self._db, self._key, run_id, seq, kind, request_text, result_text, asked=asked, owner=owner
        )

    def finish_step(
        self,
        run_id: str,
        seq: int,
        result_text: str,
        *,
        answer: str | None = None,
        summary: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Write step ``seq``'s result (committed before the program sees it)."""
        _journal.finish_step(self._db, self._key, run_id, seq, result_text, answer=answer, summary=summary, owner=owner)

    def forget_step(self, run_id: str, seq: int, *, owner: str | None = None) -> None:
        """Drop step ``seq`` (a call that paused the run: after the approval it is made again)."""
        _journal.forget_step(self._db, self._key, run_id, seq, owner=owner)

    # -- rollbacks (:mod:`._compensations`; each write fenced by the rollback's lease) --

    def claim_rollback(self, run_id: str, lease: Lease, *, dead: str | None = None) -> bool:
        """Take the finished run's lease for a rollback; whether it did (else another holds it)."""
        return _compensations.claim(self._db, run_id, lease, dead)

    def release_rollback(self, run_id: str, owner: str, status: str) -> None:
        """End the rollback holding ``owner``'s lease, recording how it stands (``rolled_back``, ``incomplete``)."""
        _compensations.release(self._db, run_id, owner, status)

    def compensations(self, run_id: str) -> dict[int, Compensation]:
        """The run's compensations so far, by the journal step each undoes."""
        return _compensations.read(self._db, run_id)

    def seals(self, run_ids: builtins.list[str]) -> dict[str, tuple[str | None, str | None]]:
        """Each run's program digest and rollback status (as :meth:`program_digest` and :meth:`rollback_status`)."""
        found: dict[str, tuple[str | None, str | None]] = {}
        with self._db.connection() as db:
            for start in range(0, len(run_ids), 500):  # within SQLite's bound on parameters
                chunk = run_ids[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                query = f"SELECT run_id, program_digest, rollback FROM runs WHERE run_id IN ({marks})"
                found.update((run_id, (digest, rollback)) for run_id, digest, rollback in db.execute(query, chunk))
        return found

    def rollback_status(self, run_id: str) -> str | None:
        """How the run's rollback stands: None (never rolled back), ``rolling_back``, ``rolled_back``
        or ``incomplete``."""
        with self._db.connection() as db:
            row = db.execute("SELECT rollback FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else row[0]

    def begin_compensation(self, run_id: str, seq: int, tool: str, input: Any, call_id: str, *, owner: str) -> None:
        """Write the compensation of step ``seq`` ``started`` before it is called."""
        _compensations.begin(self._db, self._key, run_id, seq, tool, input, call_id, owner)

    def finish_compensation(self, run_id: str, seq: int, envelope: dict[str, Any], *, owner: str) -> None:
        """Write the compensation's envelope once it answered."""
        _compensations.finish(self._db, self._key, run_id, seq, envelope, owner)

    def forget_compensation(self, run_id: str, seq: int, *, owner: str) -> None:
        """Drop the compensation of step ``seq`` (it waits for an approval)."""
        _compensations.forget(self._db, self._key, run_id, seq, owner)
