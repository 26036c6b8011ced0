"""Call ids: random version-4 UUIDs in hex, as ``uuid.uuid4().hex`` writes them, on every door."""

from __future__ import annotations

import os
import threading
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import glovebox
from glovebox.runtime._envelope import new_call_id, new_meta


def test_a_call_id_is_a_random_uuid4_in_hex() -> None:
    ids = {new_call_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    for made in ids:
        parsed = uuid.UUID(hex=made)
        assert parsed.hex == made and len(made) == 32
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    # the 122 random bits do vary: every hex digit outside the version and variant takes many values
    for position in (0, 11, 13, 17, 31):
        assert len({made[position] for made in ids}) == 16


def test_a_call_and_its_audit_row_carry_such_an_id(_isolated_env: Path, build_guest: Callable[[str], Path]) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("echo"), {"name": "echo"})
        result = rt.call("echo", {"x": 1})
        missing = rt.call("no-such-tool", {})
        for made in (result, missing):
            call_id = made.meta["call_id"]
            assert uuid.UUID(hex=call_id).version == 4
            row = rt.audit.find(call_id)
            assert row is not None and row["call_id"] == call_id
    assert new_meta("t", None, "given")["call_id"] == "given"


def test_call_ids_are_never_given_twice_across_threads_or_a_fork() -> None:
    """Ids are drawn from ``os.urandom`` in batches per thread: no two threads, and no forked
    child and its parent, ever hand out the same id."""
    seen: list[list[str]] = []

    def draw() -> None:
        seen.append([new_call_id() for _ in range(500)])

    workers = [threading.Thread(target=draw) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    new_call_id()  # this thread's batch is drawn before the fork: the child must not reuse it
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns of forking a threaded process: this child only draws ids
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.write(write, ",".join(new_call_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read().split(",")
    parent = [new_call_id() for _ in range(100)]
    every = [made for batch in seen for made in batch] + child + parent
    assert len(every) == 2200 and len(set(every)) == len(every)
    assert all(uuid.UUID(hex=made).version == 4 for made in every)
