"""ProcessPool: calls on worker processes answer what Runtime.call answers, and survive a killed worker.

Every test runs real worker processes (spawned) on a real home, with guests built
from source; the kill test SIGKILLs a worker while its guest loops.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types
import pytest

import glovebox
from glovebox.scale import _procwire, _procworker
from glovebox.scale._procpool import _Pending

from ..capabilities.test_http import QuietHandler
from ..conftest import _free_port
from .held import Held, holding

BuildGuest = Callable[[str], Path]
#: Fields that differ between two runs of the same call.
VOLATILE = {"call_id", "duration_ms", "worker_pid"}
SCHEMA = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}


@pytest.fixture
def home(_isolated_env: Path, build_guest: BuildGuest) -> Path:
    """A home with echo (schema: {"n": integer}), trap, error-tool and burner registered."""
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("echo"), {"name": "echo", "input_schema": SCHEMA})
        rt.register(build_guest("trap_unreachable"), {"name": "trap"})
        rt.register(build_guest("guest_error"), {"name": "error-tool"})
        rt.register(build_guest("fuel_burner"), {"name": "burner", "limits": {"fuel": 100_000}})
    return _isolated_env


@pytest.fixture
def pool(home: Path) -> Iterator[glovebox.ProcessPool]:
    with glovebox.ProcessPool(processes=2, home=home) as made:
        yield made


def _stable(envelope: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in envelope["meta"].items() if k not in VOLATILE}
    return {**envelope, "meta": meta}


def _until(check: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    """Poll ``check`` until it holds (a deadline, not a timing claim: workers start at their own pace)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def _audit_rows(home: Path, call_id: str) -> list[dict[str, Any]]:
    with glovebox.Runtime(home=home) as rt:
        return [row for row in rt.audit.records() if row["call_id"] == call_id]


def test_calls_land_on_every_worker(pool: glovebox.ProcessPool) -> None:
    results = [pool.call("echo", {"n": i}) for i in range(6)]
    assert [r.output for r in results] == [{"n": i} for i in range(6)]
    pids = {r.meta["worker_pid"] for r in results}
    assert pids == set(pool.pids) and len(pids) == 2
    assert os.getpid() not in pids


CASES = [
    ("echo", {"n": 1}, None),  # ok
    ("echo", {"n": "one"}, "invalid_input"),  # the schema
    ("echo", {1, 2}, "invalid_input"),  # not JSON: crosses to the worker and is refused there
    ("echo", float("nan"), "invalid_input"),  # breaks the JSON rules
    ("no-such-tool", {}, "tool_not_found"),
    ("trap", {}, "guest_trap"),
    ("error-tool", {"k": 1}, "guest_error"),
    ("burner", {}, "fuel_exhausted"),
]


def test_envelopes_are_those_of_runtime_call(home: Path, pool: glovebox.ProcessPool) -> None:
    with glovebox.Runtime(home=home) as rt:
        for name, value, code in CASES:
            here, there = rt.call(name, value), pool.call(name, value)
            assert there.code == code, (name, there.to_dict())
            assert _stable(there.to_dict()) == _stable(here.to_dict())
            assert type(there.error) is type(here.error)
            assert there.meta["worker_pid"] in pool.pids


def test_an_input_that_cannot_be_pickled_is_invalid_input(pool: glovebox.ProcessPool) -> None:
    result = pool.call("echo", {"n": lambda: 1})
    assert result.code == "invalid_input"
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert pool.call("echo", deep).code == "invalid_input"


class Explodes:
    """An input whose unpickling raises (in whichever process unpickles it)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (operator.truediv, (1, 0))


class Sneaky(str):
    """A str whose unpickling raises: what a caller can pass as a tool name or principal."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (operator.truediv, (1, 0))


def test_an_input_whose_unpickling_raises_is_invalid_input_and_the_worker_lives(home: Path) -> None:
    with glovebox.Runtime(home=home) as rt:
        here = rt.call("echo", Explodes())
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        [pid] = [pool.call("echo", {"n": 0}).meta["worker_pid"]]

        async def burst() -> list[glovebox.CallResult]:  # sent in this order, to the one worker
            calls = [pool.acall("echo", {"n": 1}), pool.acall("echo", Explodes()), pool.acall("echo", {"n": 2})]
            return await asyncio.gather(*calls, pool.acall("echo", {"n": 3}))

        before, bad, after, last = asyncio.run(burst())
        assert here.code == bad.code == "invalid_input"
        assert _stable(bad.to_dict()) == _stable(here.to_dict())
        assert [r.output for r in (before, after, last)] == [{"n": 1}, {"n": 2}, {"n": 3}]
        assert {r.meta["worker_pid"] for r in (before, bad, after, last)} == {pid} and pool.pids == [pid]
    [row] = _audit_rows(home, bad.meta["call_id"])
    assert row["outcome"] == "invalid_input"


def test_names_and_principals_cross_as_plain_strings(home: Path) -> None:
    with glovebox.Runtime(home=home) as rt:
        here = rt.call(Sneaky("echo"), {"n": Sneaky("x")}, principal=Sneaky("ann"))
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        there = pool.call(Sneaky("echo"), {"n": Sneaky("x")}, principal=Sneaky("ann"))
        assert there.code == here.code == "invalid_input"  # "x" is not an integer
        assert _stable(there.to_dict()) == _stable(here.to_dict())
        assert pool.call("echo", {"n": 1}, principal=Sneaky("ann")).meta["worker_pid"] == there.meta["worker_pid"]


@pytest.mark.parametrize(
    "value",
    [
        {"n": 1, "tags": (1, 2)},  # JSON, though not as the caller wrote it
        [float("nan"), Explodes()],  # the encoder refuses the NaN first
        {(1, 2): 1},  # a key JSON cannot have
        {"n": [Explodes(), {1, 2}]},  # not JSON, deep inside
        {"n": 10**5000, "x": Explodes()},  # breaks the JSON rules before anything else
    ],
)
def test_every_input_that_crosses_is_answered_as_runtime_call_answers_it(home: Path, value: Any) -> None:
    with glovebox.Runtime(home=home) as rt:
        here = [rt.call(name, value, principal=who) for name in ("echo", "no-such-tool") for who in (None, "ann")]
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        there = [pool.call(name, value, principal=who) for name in ("echo", "no-such-tool") for who in (None, "ann")]
        assert len({r.meta["worker_pid"] for r in there}) == 1
    assert [_stable(r.to_dict()) for r in there] == [_stable(r.to_dict()) for r in here]


def test_a_name_that_is_not_unicode_is_refused_before_an_input_that_breaks_the_rules(home: Path) -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with glovebox.Runtime(home=home) as rt:
        here = rt.call("ech\ud800", deep)
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        there = pool.call("ech\ud800", deep)
    assert "lone surrogate" in here.to_dict()["error"]["message"]
    assert _stable(there.to_dict()) == _stable(here.to_dict())


def test_a_principal_that_is_not_a_str_is_misuse_in_both(home: Path) -> None:
    with glovebox.Runtime(home=home) as rt, pytest.raises(TypeError, match="principal must be a str"):
        rt.call("echo", {"n": 1}, principal=Explodes())  # type: ignore[arg-type]
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        with pytest.raises(TypeError, match="principal must be a str"):
            pool.call("echo", {"n": 1}, principal=Explodes())  # type: ignore[arg-type]
        assert pool.call("echo", {"n": 1}).ok


def test_a_worker_survives_a_message_it_cannot_read(home: Path) -> None:
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        [worker] = pool._workers._workers
        first = pool.call("echo", {"n": 1})
        for garbage in (b"", b"\x80\x04garbage", b"[1, 2]", b'{"call_id": 7}', b"\xff" * 100):
            pool._workers._send(worker, garbage)
        second = pool.call("echo", {"n": 2})
        assert second.output == {"n": 2} and second.meta["worker_pid"] == first.meta["worker_pid"]
        assert pool.pids == [first.meta["worker_pid"]]


def test_permission_denied_matches_too(home: Path, build_guest: BuildGuest) -> None:
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_guest("echo"), {"name": "scoped", "required_scopes": ["files:read"]})
        here = rt.call("scoped", {}, principal="ann")
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        there = pool.call("scoped", {}, principal="ann")
    assert there.code == "permission_denied"
    assert _stable(there.to_dict()) == _stable(here.to_dict())


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see which worker loops")
def test_a_killed_worker_is_replaced_and_its_call_answers_internal_error_once(
    home: Path, pool: glovebox.ProcessPool, build_guest: BuildGuest
) -> None:
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_guest("loop_forever"), {"name": "loop", "limits": {"timeout_ms": 60_000, "fuel": 10**10}})
    seen = {pool.call("echo", {"n": i}).meta["worker_pid"] for i in range(4)}  # both workers warm
    assert seen == set(pool.pids)
    before = {pid: _cpu_ticks(pid) for pid in seen}
    answers: list[glovebox.CallResult] = []
    caller = threading.Thread(target=lambda: answers.append(pool.call("loop", {}, principal="ann")))
    caller.start()
    looping: list[int] = []

    def one_loops() -> bool:  # the guest burns a core: its worker's CPU time climbs by half a second
        looping[:] = [pid for pid in seen if _cpu_ticks(pid) - before[pid] > os.sysconf("SC_CLK_TCK") // 2]
        return bool(looping)

    _until(one_loops, "the guest to loop")
    victim = looping[0]
    os.kill(victim, signal.SIGKILL)
    caller.join(60)
    [result] = answers
    assert result.code == "internal_error"
    assert result.error is not None and result.error.retryable
    assert result.error.details == {"call_id": result.meta["call_id"], "worker_pid": victim}
    assert result.meta["worker_pid"] == victim and result.meta["principal"] == "ann"
    assert "Traceback" not in result.error.message
    [row] = _audit_rows(home, result.meta["call_id"])
    assert row["outcome"] == "internal_error" and row["principal"] == "ann" and row["tool"] == "loop"
    # The other worker kept serving; a replacement joins it.
    _until(lambda: len(pool.pids) == 2 and victim not in pool.pids, "a replacement worker")
    after = {pool.call("echo", {"n": i}).meta["worker_pid"] for i in range(4)}
    assert after == set(pool.pids) and victim not in after
    with glovebox.Runtime(home=home) as rt:
        assert rt.audit.verify().ok


def test_a_call_the_worker_audited_is_not_audited_again(home: Path, pool: glovebox.ProcessPool) -> None:
    done = pool.call("echo", {"n": 1})
    call_id = done.meta["call_id"]
    worker = next(w for w in pool._workers._workers if w.pid == done.meta["worker_pid"])
    lost = pool._workers._lost(worker, call_id, _Pending(Future(), "echo", {"n": 1}, None))
    assert lost.code == "internal_error"
    [row] = _audit_rows(home, call_id)
    assert row["outcome"] == "ok"


def test_the_audit_chain_verifies_after_concurrent_writers(home: Path, pool: glovebox.ProcessPool) -> None:
    with glovebox.Runtime(home=home) as rt:
        start = rt.audit.verify().rows
    results: list[glovebox.CallResult] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        for i in range(10):
            result = pool.call("echo", {"n": k * 100 + i})
            with lock:
                results.append(result)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.ok for r in results) and len({r.meta["worker_pid"] for r in results}) == 2
    with glovebox.Runtime(home=home) as rt:
        verification = rt.audit.verify()
        ids = [row["call_id"] for row in rt.audit.records(after=start)]
    assert verification.ok and verification.rows == start + 60
    assert sorted(ids) == sorted(r.meta["call_id"] for r in results)


def test_a_registration_after_start_is_seen_by_every_worker(
    home: Path, pool: glovebox.ProcessPool, build_guest: BuildGuest
) -> None:
    assert {pool.call("late", {}).code for _ in range(4)} == {"tool_not_found"}
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_guest("echo"), {"name": "late"})
    results = [pool.call("late", {"x": i}) for i in range(4)]
    assert [r.output for r in results] == [{"x": i} for i in range(4)]
    assert {r.meta["worker_pid"] for r in results} == set(pool.pids)


def test_a_policy_reload_is_seen_by_every_worker(home: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\ndefaults:\n  action: allow\n")
    with glovebox.ProcessPool(processes=2, home=home, policy=policy) as pool:
        assert {pool.call("echo", {"n": i}).code for i in range(4)} == {None}
        policy.write_text("version: 1\ndefaults:\n  action: block\nrules: []\n")
        refused: set[int] = set()

        def every_worker_refuses() -> bool:
            result = pool.call("echo", {"n": 1})
            if result.code == "permission_denied":
                refused.add(result.meta["worker_pid"])
            return refused == set(pool.pids)

        _until(every_worker_refuses, "both workers to reload the policy")


def test_acall(pool: glovebox.ProcessPool) -> None:
    async def many() -> list[glovebox.CallResult]:
        return await asyncio.gather(*(pool.acall("echo", {"n": i}, principal="ann") for i in range(8)))

    results = asyncio.run(many())
    assert [r.output for r in results] == [{"n": i} for i in range(8)]
    assert {r.meta["principal"] for r in results} == {"ann"}


def test_calls_and_acalls_at_once_are_all_answered(home: Path) -> None:
    """Callers of ``call`` read the pipe for each other and for ``acall``'s calls, which have no thread."""
    with glovebox.ProcessPool(processes=1, home=home, threads=2) as pool:
        got: dict[int, Any] = {}

        def client(k: int) -> None:
            for i in range(15):
                got[k * 100 + i] = pool.call("echo", {"n": k * 100 + i}).output

        async def many() -> list[glovebox.CallResult]:
            return await asyncio.gather(*(pool.acall("echo", {"n": 1000 + i}) for i in range(40)))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        answered = asyncio.run(many())
        for thread in threads:
            thread.join(120)
        assert got == {n: {"n": n} for n in got} and len(got) == 60
        assert [r.output for r in answered] == [{"n": 1000 + i} for i in range(40)]
        assert (pool.in_flight, pool.queued) == (0, 0)


def test_a_burst_past_the_workers_threads_is_answered_in_full(home: Path) -> None:
    """Requests beyond ``threads`` wait in the worker (which still drains its pipe) and run in turn."""
    with glovebox.ProcessPool(processes=1, home=home, threads=1) as pool:

        async def burst() -> list[glovebox.CallResult]:
            return await asyncio.gather(*(pool.acall("echo", {"n": i, "pad": "x" * 500}) for i in range(600)))

        results = asyncio.run(burst())
        assert [r.output for r in results] == [{"n": i, "pad": "x" * 500} for i in range(600)]
        assert len({r.meta["worker_pid"] for r in results}) == 1 and pool.in_flight == 0


class Interrupted(Exception):
    """Raised by a signal handler in the middle of ``call`` (as Ctrl-C raises KeyboardInterrupt)."""


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_a_caller_interrupted_while_it_reads_leaves_the_pool_working(home: Path, build_guest: BuildGuest) -> None:
    with glovebox.Runtime(home=home) as rt:
        # (10**10 fuel, the most a manifest may ask, lasts this loop ~0.7 s on the native core and ~1.4 s on the
        # Python path: the deadline must come well before either)
        rt.register(build_guest("loop_forever"), {"name": "loop", "limits": {"timeout_ms": 400, "fuel": 10**10}})
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        assert pool.call("echo", {"n": 1}).ok  # warm: the interrupted call is waiting on the pipe, not the start
        previous = signal.signal(signal.SIGALRM, _interrupt)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            with pytest.raises(Interrupted):
                pool.call("loop", {})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert pool.call("echo", {"n": 2}).output == {"n": 2}
        _until(lambda: pool.in_flight == 0, "the abandoned call's answer to be read")
        assert [pool.call("echo", {"n": i}).output for i in range(3)] == [{"n": i} for i in range(3)]
    with glovebox.Runtime(home=home) as rt:
        rows = list(rt.audit.records())
    assert [row["outcome"] for row in rows if row["outcome"] != "ok"] == ["timeout"], rows


# -- the shared page, the bell and the framing ------------------------------------------------------------


class _HoldHandler(QuietHandler):
    server: Held

    def do_GET(self) -> None:
        self.server.arrived.release()
        self.server.gate.wait(60)  # a call waiting here holds one worker thread until the test lets it go
        self._reply(200, b'{"ok": true}')


@pytest.fixture
def held() -> Iterator[Held]:
    with holding(_HoldHandler) as httpd:
        yield httpd


#: Small requests queued on a full worker: more than its pipe holds, so only rings to drain it let them all in.
QUEUED = 3000

HOLD_POLICY = """
version: 1
defaults:
  action: allow
grants:
  - tool: hold
    http:
      - host: 127.0.0.1
        schemes: [http]
        ports: [{port}]
        methods: [GET]
        paths: ["/**"]
        allow_private: true
    http_limits:
      request_timeout_ms: 50000
"""


def _only_the_bell_wakes() -> None:
    """A worker initializer: its idle thread never takes the pipe unrung (no standby timeout)."""
    _procworker.STANDBY_MS = _procworker.IDLE_MS = 3_600_000


def _in_thread(call: Callable[[], glovebox.CallResult]) -> tuple[threading.Thread, list[glovebox.CallResult]]:
    answers: list[glovebox.CallResult] = []
    thread = threading.Thread(target=lambda: answers.append(call()))
    thread.start()
    return thread, answers


def _hold_tool(home: Path, port: int, build_guest: BuildGuest, tmp_path: Path) -> Path:
    """Register ``hold`` (an HTTP client granted the held server); answer the policy's path.

    Its deadline (50 s) outlasts every wait of these tests: the held call still runs when they look.
    """
    policy = tmp_path / "policy.yaml"
    policy.write_text(HOLD_POLICY.format(port=port))
    declared = [{"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "methods": ["GET"], "allow_private": True}]
    with glovebox.Runtime(home=home, policy=policy) as rt:
        manifest = {"name": "hold", "capabilities": {"http": declared}, "limits": {"timeout_ms": 50_000}}
        rt.register(build_guest("http_client"), manifest)
    return policy


@contextmanager
def _holding_pool(
    home: Path, held: Held, build_guest: BuildGuest, tmp_path: Path, *, threads: int
) -> Iterator[tuple[glovebox.ProcessPool, Any, threading.Thread, list[glovebox.CallResult]]]:
    """A one-worker pool of ``threads`` threads (woken by the bell only) whose reader runs a held call.

    Yields the pool, its worker's shared page, the thread making the held call and its answers (empty
    until the held server's gate opens).
    """
    port = held.server_address[1]
    policy = _hold_tool(home, port, build_guest, tmp_path)
    with glovebox.ProcessPool(
        processes=1, home=home, policy=policy, threads=threads, initializer=_only_the_bell_wakes
    ) as pool:
        [worker] = pool._workers._workers
        assert pool.call("echo", {"n": 0}).ok
        page = worker.page
        assert page is not None
        _until(lambda: (page[0], page[1]) == (1, threads), f"one thread at the pipe and {threads} idle")
        holding, held_answer = _in_thread(lambda: pool.call("hold", {"url": f"http://127.0.0.1:{port}/hold"}))
        assert held.arrived.acquire(timeout=60)
        yield pool, page, holding, held_answer


def test_a_request_sent_while_the_workers_reader_runs_a_call_rings_another_thread_in(
    home: Path, held: Held, build_guest: BuildGuest, tmp_path: Path
) -> None:
    """The thread that read the held call runs it and leaves the pipe; only the bell brings the idle one."""
    with _holding_pool(home, held, build_guest, tmp_path, threads=2) as (pool, _, holding, held_answer):
        # The worker's reader now runs the held call, and its idle threads sleep with no standby timer:
        # only a ring brings one to the pipe, either the echo's own or one the pool sent with the held
        # call because the reader had already let go of the pipe when it looked (so which thread takes
        # the echo, and when, is not asserted). Without the bell the echo waits for the held call.
        echoing, echoed = _in_thread(lambda: pool.call("echo", {"n": 1}))
        echoing.join(30)  # the held call waits up to 50 s: an echo that needed it to end would still be waiting
        assert not echoing.is_alive(), "the echo waited for the held call: the bell did not ring"
        assert echoed[0].output == {"n": 1}
        assert holding.is_alive() and not held_answer, "the held call ended before the echo was answered"
        held.gate.set()
        holding.join(60)
        assert held_answer[0].ok and held_answer[0].output["http_status"] == 200
        assert [pool.call("echo", {"n": i}).output for i in range(3)] == [{"n": i} for i in range(3)]


def test_a_request_sent_while_every_worker_thread_runs_a_call_waits_for_the_first_to_finish(
    home: Path, held: Held, build_guest: BuildGuest, tmp_path: Path
) -> None:
    """A full worker leaves new requests in the pipe, rings nobody, and the thread that finishes reads them."""
    with _holding_pool(home, held, build_guest, tmp_path, threads=1) as (pool, page, holding, held_answer):
        # Its one thread runs the held call: nobody reads the pipe, and the page says so (no bell wanted).
        assert page[0] == 1
        echoes = [_in_thread(lambda i=i: pool.call("echo", {"n": i})) for i in (1, 2)]
        _until(lambda: pool._workers.in_flight == 3, "three calls in flight")
        assert all(not answers for _, answers in echoes), "an echo ran beside the held call on a one-thread worker"
        held.gate.set()
        # The idle thread never wakes unrung here (no standby timer): the finishing thread must read the echoes.
        holding.join(60)
        for thread, _ in echoes:
            thread.join(60)
        assert held_answer[0].ok and held_answer[0].output["http_status"] == 200
        assert [answers[0].output for _, answers in echoes] == [{"n": 1}, {"n": 2}]
        assert pool._workers.in_flight == 0


def test_a_full_worker_is_rung_to_drain_its_pipe_so_sending_never_waits_for_a_call_to_end(
    home: Path, held: Held, build_guest: BuildGuest, tmp_path: Path
) -> None:
    """A request larger than the pipe holds, or one call too many queued, rings a full worker, which drains."""
    port = held.server_address[1]
    policy = _hold_tool(home, port, build_guest, tmp_path)
    with glovebox.ProcessPool(
        processes=1, home=home, policy=policy, threads=1, initializer=_only_the_bell_wakes
    ) as pool:
        workers = pool._workers
        assert pool.call("echo", {"n": 0}).ok
        holding, held_answer = _in_thread(lambda: pool.call("hold", {"url": f"http://127.0.0.1:{port}/hold"}))
        assert held.arrived.acquire(timeout=60)
        big = {"n": -1, "pad": "x" * 300_000}  # more than the pipe holds: its write ends once the worker reads it
        queued = [big] + [{"n": i} for i in range(QUEUED)]
        sent: list[Future[glovebox.CallResult]] = []
        sending = threading.Thread(
            target=lambda: sent.extend(
                workers._submit("echo", v, None, f"q{i}")[1].future for i, v in enumerate(queued)
            )
        )
        sending.start()
        sending.join(30)
        assert not sending.is_alive(), "a send waited for the held call: the full worker was not rung to drain"
        assert all(not future.done() for future in sent)  # queued behind the held call
        held.gate.set()
        holding.join(60)
        assert held_answer[0].ok
        assert [future.result(60).output for future in sent] == queued


@pytest.mark.parametrize(
    "header",
    [(-5).to_bytes(4, "big", signed=True), b"\xff\xff\xff\xff" + (_procwire.MAX_FRAME + 1).to_bytes(8, "big")],
    ids=["negative", "oversized"],
)
def test_a_request_frame_that_cannot_be_one_ends_the_worker_and_it_is_replaced(home: Path, header: bytes) -> None:
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        [worker] = pool._workers._workers
        [victim] = [pool.call("echo", {"n": 1}).meta["worker_pid"]]
        with worker.send_lock:
            os.write(worker.conn.fileno(), header + b"{}")  # what follows cannot be found: the worker stops
        _until(lambda: len(pool.pids) == 1 and victim not in pool.pids, "a replacement worker")
        assert worker.process.exitcode == 0  # it stopped, it did not crash
        result = pool.call("echo", {"n": 2})
        assert result.output == {"n": 2} and result.meta["worker_pid"] != victim


def test_an_answer_frame_that_cannot_be_one_stops_its_worker_and_its_call_is_lost_once(home: Path) -> None:
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        [worker] = pool._workers._workers
        victim = pool.call("echo", {"n": 1}).meta["worker_pid"]
        worker.frames._buffer += (-7).to_bytes(4, "big", signed=True)  # as if the worker had written it
        result = pool.call("echo", {"n": 2}, principal="ann")
        assert result.code == "internal_error" and result.error is not None and result.error.retryable
        assert result.error.details == {"call_id": result.meta["call_id"], "worker_pid": victim}
        assert len(_audit_rows(home, result.meta["call_id"])) == 1  # the worker's own row, or the pool's
        _until(lambda: len(pool.pids) == 1 and victim not in pool.pids, "a replacement worker")
        assert worker.process.exitcode == -signal.SIGKILL  # killed: its stream could not be read on
        assert pool.call("echo", {"n": 3}).output == {"n": 3}


def test_an_idle_worker_that_dies_is_replaced_before_the_next_call(home: Path) -> None:
    with glovebox.ProcessPool(processes=1, home=home) as pool:
        [victim] = [pool.call("echo", {"n": 1}).meta["worker_pid"]]
        os.kill(victim, signal.SIGKILL)
        _until(lambda: len(pool.pids) == 1 and victim not in pool.pids, "a replacement worker")
        result = pool.call("echo", {"n": 2})
        assert result.output == {"n": 2} and result.meta["worker_pid"] not in (victim, os.getpid())


def test_the_pool_is_a_call_backend_with_its_counters_and_the_homes_audit(pool: glovebox.ProcessPool) -> None:
    assert isinstance(pool, glovebox.CallBackend)
    assert (pool.in_flight, pool.queued) == (0, 0)

    async def many() -> list[glovebox.CallResult]:
        return await asyncio.gather(*(pool.acall("echo", {"n": i}) for i in range(4)))

    results = asyncio.run(many())
    assert (pool.in_flight, pool.queued) == (0, 0), "every answered call left the count"
    assert {row["call_id"] for row in pool.audit.records()} >= {r.meta["call_id"] for r in results}


def test_close_is_idempotent_and_a_call_after_it_raises(home: Path) -> None:
    pool = glovebox.ProcessPool(processes=1, home=home)
    pids = pool.pids
    assert pool.call("echo", {"n": 1}).ok
    pool.close()
    pool.close()
    with pytest.raises(ValueError, match="closed"):
        pool.call("echo", {"n": 1})
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_misuse_raises(home: Path) -> None:
    with pytest.raises(ValueError):
        glovebox.ProcessPool(processes=0, home=home)
    with pytest.raises(TypeError, match="picklable"):
        glovebox.ProcessPool(processes=1, home=home, grants=lambda: None)
    with pytest.raises(TypeError, match="picklable"):
        glovebox.ProcessPool(processes=1, home=home, initializer=lambda: None)
    with pytest.raises(glovebox.InvalidPolicy):
        glovebox.ProcessPool(processes=1, home=home, policy=home / "missing.yaml")


def _refuse_to_start() -> None:
    """A worker ``initializer`` that fails."""
    raise RuntimeError("this worker cannot be configured")


def test_a_worker_whose_initializer_raises_answers_internal_error_and_is_replaced(home: Path) -> None:
    with glovebox.ProcessPool(processes=1, home=home, initializer=_refuse_to_start) as pool:
        first = pool.call("echo", {"n": 1}, principal="ann")
        assert first.code == "internal_error" and first.error is not None and first.error.retryable
        assert first.error.details == {"call_id": first.meta["call_id"], "worker_pid": first.meta["worker_pid"]}
        _until(lambda: pool.pids not in ([], [first.meta["worker_pid"]]), "a replacement worker")
        second = pool.call("echo", {"n": 2})
        assert second.code == "internal_error" and second.meta["worker_pid"] != first.meta["worker_pid"]
    [row] = _audit_rows(home, first.meta["call_id"])
    assert row["outcome"] == "internal_error" and row["principal"] == "ann"


def _turns_fail() -> None:
    """A worker ``initializer`` that breaks the worker's turn-taking (not a call): the question a
    reader asks as it lets go of the pipe raises, as a shared ``select.poll`` once did."""

    def readable(self: _procwire.Frames) -> bool:
        raise RuntimeError("concurrent poll() invocation")

    _procwire.Frames.readable = readable  # type: ignore[method-assign]


def test_a_worker_whose_turns_fail_ends_and_its_call_answers_internal_error_instead_of_waiting(home: Path) -> None:
    """The thread that read the call dies holding it: the worker ends rather than leave its caller waiting."""
    with glovebox.ProcessPool(processes=1, home=home, initializer=_turns_fail) as pool:
        [worker] = pool._workers._workers
        result = pool.call("echo", {"n": 1}, principal="ann")
        assert result.code == "internal_error" and result.error is not None and result.error.retryable
        victim = result.meta["worker_pid"]
        assert result.error.details == {"call_id": result.meta["call_id"], "worker_pid": victim}
        _until(lambda: len(pool.pids) == 1 and victim not in pool.pids, "a replacement worker")
        assert worker.process.exitcode == _procworker.EXIT_TURN_FAILED
    [row] = _audit_rows(home, result.meta["call_id"])
    assert row["outcome"] == "internal_error" and row["principal"] == "ann"


def test_misuse_of_a_running_pool_raises(pool: glovebox.ProcessPool) -> None:
    with pytest.raises(TypeError):
        pool.call(3, {})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "envelope",
    [
        {"ok": True, "output": [1, "a"], "meta": {"call_id": "c"}},
        {
            "ok": False,
            "error": {"code": "upstream_error", "message": "m", "retryable": True, "details": {"a": 1}},
            "meta": {"call_id": "c"},
        },
        {
            "ok": False,
            "error": {"code": "internal_error", "message": "m", "retryable": True, "details": {}},
            "meta": {},
        },
    ],
)
def test_from_dict_inverts_to_dict(envelope: dict[str, Any]) -> None:
    result = glovebox.CallResult.from_dict(envelope)
    assert result.to_dict() == envelope
    if not envelope["ok"]:
        assert isinstance(result.error, glovebox.CallError)
        assert result.code == envelope["error"]["code"]


UNKNOWN_CODE = {"code": "nope", "message": "m", "retryable": False, "details": {}}


@pytest.mark.parametrize("envelope", [{}, {"ok": False, "meta": {}}, {"ok": False, "meta": {}, "error": UNKNOWN_CODE}])
def test_from_dict_refuses_what_is_not_an_envelope(envelope: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        glovebox.CallResult.from_dict(envelope)


# -- the servers: one port, calls answered by several worker processes ---------------------------


@contextmanager
def _server(home: Path, policy: Path, *command: str) -> Iterator[str]:
    """``python -m glovebox --home H --policy P COMMAND --port N`` running; yields its base URL."""
    port = _free_port()
    argv = [sys.executable, "-m", "glovebox", "--home", str(home), "--policy", str(policy), *command]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([*argv, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:

        def listening() -> bool:
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(log.read().decode(errors="replace"))
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        _until(listening, "the server to listen")
        yield url
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()


@pytest.mark.slow
def test_serve_with_two_processes_answers_from_two_pids(server_home: tuple[Path, Path]) -> None:
    home, policy = server_home
    with _server(home, policy, "serve", "--processes", "2") as url, httpx.Client(base_url=url, timeout=60) as http:
        headers = {"Authorization": "Bearer agent-key"}
        answers = [
            http.post("/v1/tools/calc/call", json={"input": {"expression": f"{i}+1"}}, headers=headers)
            for i in range(6)
        ]
        assert [a.status_code for a in answers] == [200] * 6
        assert [a.json()["output"] for a in answers] == [{"value": i + 1} for i in range(6)]
        pids = {a.json()["meta"]["worker_pid"] for a in answers}
        assert len(pids) == 2
        assert http.post("/v1/tools/calc/call", json={"input": {}}).status_code == 401  # the server still checks keys
    with glovebox.Runtime(home=home) as rt:
        assert rt.audit.verify().ok


@pytest.mark.slow
def test_mcp_over_http_with_two_processes_answers_from_two_pids(server_home: tuple[Path, Path]) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    home, policy = server_home

    async def calls(url: str) -> set[int]:
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer agent-key"}, timeout=60) as http:
            transport = streamable_http_client(url + "/mcp", http_client=http)
            async with Client(transport, cache=None) as client:  # type: ignore[arg-type]
                pids = set()
                for i in range(6):
                    result = await client.call_tool("calc", {"expression": f"{i}*2"})
                    assert result.is_error is False and result.structured_content == {"value": i * 2}
                    [block] = result.content
                    assert isinstance(block, mcp_types.TextContent)
                    pids.add(json.loads(block.text)["meta"]["worker_pid"])
                return pids

    with _server(home, policy, "mcp", "--transport", "http", "--processes", "2") as url:
        assert len(anyio.run(calls, url)) == 2
