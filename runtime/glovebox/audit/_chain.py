"""Chaining audit rows: each prepared row hashed at its place after the chain's head.

Rows are chained only by a fold (``_audit``), inside a transaction that holds
the database's write lock, so the head is read from the database itself and
two folders (threads, processes) can never fork the chain.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["GENESIS", "Pending", "append_rows"]

GENESIS = "0" * 64


class Pending:
    """One prepared row waiting for its place in the chain.

    ``head`` and ``tail`` are the UTF-8 canonical JSON of the row's hashed
    fields before and after its ``seq``, so that hashing at fold time needs
    no serialisation.
    """

    __slots__ = ("head", "row", "tail")

    def __init__(self, row: dict[str, Any], head: bytes, tail: bytes) -> None:
        self.row = row
        self.head = head
        self.tail = tail

    def chain(self, seq: int, prev: str) -> str:
        """Take place ``seq`` after the row hashed ``prev``; return this row's hash."""
        digest = hashlib.sha256(prev.encode("utf-8"))  # ASCII hex, unless the head was changed underneath
        digest.update(self.head)
        digest.update(str(seq).encode("ascii"))
        digest.update(self.tail)
        self.row["seq"], self.row["prev_hash"], self.row["hash"] = seq, prev, digest.hexdigest()
        return self.row["hash"]  # type: ignore[no-any-return]


def append_rows(db: sqlite3.Connection, columns: Sequence[str], rows: Iterable[Pending]) -> int:
    """Chain ``rows`` onto the head and insert them; return how many.

    ``db`` must be in a transaction holding the write lock (``BEGIN IMMEDIATE``).
    """
    last = db.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
    # A head whose hash was changed underneath into bytes is chained onto as its repr: verify names it.
    seq, prev = (int(last[0]), last[1] if isinstance(last[1], str) else repr(last[1])) if last else (0, GENESIS)
    values = []
    for pending in rows:
        seq += 1
        prev = pending.chain(seq, prev)
        values.append([pending.row[name] for name in columns])
    names, marks = ", ".join(columns), ", ".join("?" * len(columns))
    db.executemany(f"INSERT INTO audit ({names}) VALUES ({marks})", values)
    return len(values)
