"""The audit journal's writer: one line per record, written before the call returns.

:class:`JournalWriter` checks a record, writes its line (``_rowform.line``) to
this log's own journal file (``_journal``, one ``write`` per call) and nudges
the home's fold process (``_foldproc``), which it starts on the first append.
It never touches the database: the chain (``_fold``) folds the lines in.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from ._foldproc import FoldSupervisor
from ._journal import Journal
from ._rowform import REQUIRED, line, required_values

__all__ = ["JournalWriter"]


class JournalWriter:
    """Appends records to one journal file of the home (safe across threads)."""

    def __init__(self, home: Path, journal_dir: Path) -> None:
        self.home = home
        self.journal = Journal(journal_dir)
        self.folder: FoldSupervisor | None = None
        self._start = threading.Lock()
        self.closed = False

    def append(self, record: dict[str, Any]) -> None:
        """Write one record to the journal; it joins the chain at the next fold.

        Raises:
            ValueError: the record lacks a field the table requires (``REQUIRED``), or the writer is closed.
            OSError: the journal could not be written (a full disk).
        """
        if self.closed:
            raise ValueError("this audit log is closed")
        try:
            complete = None not in required_values(record)  # one C call for the common, complete record
        except KeyError:
            complete = False
        if not complete:
            missing = [name for name in REQUIRED if record.get(name) is None]
            raise ValueError(f"an audit record needs {', '.join(missing)}")
        written = line(time.time_ns(), record)
        folder = self.folder or self._start_folder()
        self.journal.write(written)
        folder.nudge()

    def _start_folder(self) -> FoldSupervisor:
        with self._start:
            if self.closed:
                raise ValueError("this audit log is closed")
            if self.folder is None:
                self.folder = FoldSupervisor(self.home)
            return self.folder

    def close(self) -> bool | None:
        """Stop writing; whether this writer ever wrote (its lines may wait for a fold), None when already closed.

        The home's fold process, if any, goes on for the home's other writers.
        """
        with self._start:
            if self.closed:
                return None
            self.closed = True
            folder = self.folder
        if folder is None:
            return False
        folder.close()
        self.journal.close()
        return True
