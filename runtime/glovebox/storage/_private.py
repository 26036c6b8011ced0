"""Small JSON documents only the home's owner may read, replaced whole, under an exclusive lock.

The secret stores of a home (the encrypted secret store, the OAuth connections'
index) keep one JSON document each: written to a ``0600`` temporary file and
renamed over the old one, so a reader sees the old document or the new one, never
half of one; every read-modify-write holds an ``flock`` on a lock file beside it,
so two processes never lose each other's change.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["exclusive", "write_private_json"]


def write_private_json(path: Path, document: Any) -> None:
    """Replace ``path`` with ``document`` (indented, sorted keys), readable by the owner only."""
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1, sort_keys=True)
    os.replace(temporary, path)


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock`` (made, with its ``0700`` folder, when missing)."""
    lock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
