"""RayRuntime: calls on Ray actors answer what Runtime.call answers, artifacts travel by digest,
a killed replica is replaced, the router refuses beyond its bound, and the audit verifies.

One local Ray instance (2 CPUs, no dashboard) and one deployment of two replicas serve the
module; each replica is a separate process on a node home of its own, so every artifact it
runs is fetched from the object store by digest. Guests are built from source; the slow
upstream is a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ray = pytest.importorskip("ray")

import glovebox  # noqa: E402
from glovebox.ray import RayRuntime  # noqa: E402
from glovebox.scale import _procwire, _raylane  # noqa: E402
from glovebox.scale._raycluster import keep_trap_handlers  # noqa: E402
from glovebox.scale._rayreplica import Artifact  # noqa: E402

from ..capabilities.test_http import QuietHandler  # noqa: E402
from ..conftest import _free_port  # noqa: E402
from .held import Held, holding  # noqa: E402

# A Ray cluster starts for these (seconds), and one at a time on the machine: the Ray tests
# share one pytest-xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

BuildGuest = Callable[[str], Path]
VOLATILE = {"call_id", "duration_ms", "worker_pid", "replica"}
SCHEMA = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
POLICY = """
version: 1
principals:
  ann:
    scopes: [text:read]
defaults:
  action: allow
rules:
  - tool: secret
    action: block
grants:
  - tool: hc
    http:
      - host: 127.0.0.1
        schemes: [http]
        ports: [{port}]
        methods: [GET]
        paths: ["/**"]
        allow_private: true
"""


class _Handler(QuietHandler):
    server: Held

    def do_GET(self) -> None:
        if self.path == "/hold":
            self.server.arrived.release()
            self.server.gate.wait(60)
        self._reply(200, b'{"ok": true}')


@pytest.fixture(scope="module")
def upstream() -> Iterator[Held]:
    with holding(_Handler) as httpd:
        yield httpd


@pytest.fixture(scope="module")
def references(homes: dict[str, Path]) -> list[dict[str, Any]]:
    """What Runtime.call answers for CASES, made before Ray starts in this process (a process that
    joined Ray leaves guest traps to its replicas; see README, Running on Ray)."""
    with glovebox.Runtime(home=homes["driver"], policy=homes["policy"]) as rt:
        return [rt.call(name, value, principal=principal).to_dict() for name, value, principal, _ in CASES]


@pytest.fixture(scope="module")
def cluster(references: list[dict[str, Any]]) -> Iterator[str]:
    with keep_trap_handlers():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        with keep_trap_handlers():
            ray.shutdown()


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory, build_guest: BuildGuest, upstream: Held) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ray")
    policy = root / "policy.yaml"
    policy.write_text(POLICY.format(port=upstream.server_address[1]))
    with glovebox.Runtime(home=root / "driver", policy=policy) as rt:
        rt.register(build_guest("echo"), {"name": "echo", "input_schema": SCHEMA})
        rt.register(build_guest("trap_unreachable"), {"name": "trap"})
        rt.register(build_guest("echo"), {"name": "scoped", "required_scopes": ["files:read"]})
        rt.register(build_guest("echo"), {"name": "secret"})
        port = upstream.server_address[1]
        declared = [
            {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "methods": ["GET"], "allow_private": True}
        ]
        manifest = {"name": "hc", "capabilities": {"http": declared}, "limits": {"timeout_ms": 60_000}}
        rt.register(build_guest("http_client"), manifest)
    return {"driver": root / "driver", "node": root / "node", "policy": policy}


@pytest.fixture(scope="module")
def deployment(cluster: str, homes: dict[str, Path]) -> Iterator[RayRuntime]:
    with RayRuntime(
        2,
        home=homes["driver"],
        policy=homes["policy"],
        node_home=homes["node"],
        threads=2,
        max_pending=2,
        replica_options={"num_cpus": 0.5},
    ) as made:
        yield made


def _stable(envelope: dict[str, Any]) -> dict[str, Any]:
    return {**envelope, "meta": {k: v for k, v in envelope["meta"].items() if k not in VOLATILE}}


def _until(check: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    """Poll ``check`` until it holds (a deadline, not a timing claim)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def _rows(homes: dict[str, Path], call_id: str) -> list[dict[str, Any]]:
    found = []
    for home in (homes["driver"], homes["node"]):
        with glovebox.Runtime(home=home) as rt:
            found += [row for row in rt.audit.records() if row["call_id"] == call_id]
    return found


class _Explodes:
    """An input whose unpickling raises, in whichever process unpickles it."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (operator.truediv, (1, 0))


CASES = [
    ("echo", {"n": 1}, None, None),
    ("echo", {"n": "one"}, None, "invalid_input"),
    ("echo", {1, 2}, None, "invalid_input"),  # not JSON: crosses to the replica, refused there
    ("echo", _Explodes(), None, "invalid_input"),  # crosses as JSON text: nothing of it is unpickled there
    ("echo", {"n": float("nan")}, None, "invalid_input"),
    ("echo", {"n": 2}, None, None),  # the replica that refused them goes on
    ("no-such-tool", {}, None, "tool_not_found"),
    ("trap", {}, None, "guest_trap"),
    ("scoped", {}, "ann", "permission_denied"),  # lacks files:read
    ("secret", {}, "ann", "permission_denied"),  # the policy blocks it
]


def test_envelopes_are_those_of_runtime_call(
    deployment: RayRuntime, references: list[dict[str, Any]], homes: dict[str, Path]
) -> None:
    pids = {about["pid"] for about in deployment.replicas()}
    for (name, value, principal, code), here in zip(CASES, references, strict=True):
        there = deployment.call(name, value, principal=principal)
        if code == "tool_not_found":  # its message lists the tools registered now (other tests add some)
            with glovebox.Runtime(home=homes["driver"], policy=homes["policy"]) as rt:  # runs no guest
                here = rt.call(name, value, principal=principal).to_dict()
        assert there.code == code, (name, there.to_dict())
        assert _stable(there.to_dict()) == _stable(here)
        if code != "tool_not_found":  # the driver answers a tool its registry lacks
            assert there.meta["worker_pid"] in pids and there.meta["worker_pid"] != os.getpid()


def test_acall_answers_the_same(deployment: RayRuntime) -> None:
    async def both() -> tuple[glovebox.CallResult, glovebox.CallResult]:
        return await deployment.acall("echo", {"n": 3}), await deployment.acall("no-such-tool", {})

    ran, missing = asyncio.run(both())
    assert ran.output == {"n": 3} and "replica" in ran.meta
    assert missing.code == "tool_not_found"


def test_one_tool_stays_on_one_replica_while_idle(deployment: RayRuntime) -> None:
    replicas = {deployment.call("echo", {"n": i}).meta["replica"] for i in range(6)}
    assert len(replicas) == 1


def test_a_tool_registered_after_start_is_fetched_by_digest(
    deployment: RayRuntime, homes: dict[str, Path], build_guest: BuildGuest
) -> None:
    info = deployment.register(build_guest("unquote"), {"name": "late"})
    hexdigest = info.digest.removeprefix("sha256:")
    assert not (homes["node"] / "blobs" / "sha256" / f"{hexdigest}.wasm").exists()
    result = deployment.call("late", '{"a": 1}')  # unquote: a JSON string in, its text out
    assert result.ok and result.output == {"a": 1}, result.to_dict()
    assert result.meta["digest"] == info.digest
    assert (homes["node"] / "blobs" / "sha256" / f"{hexdigest}.wasm").is_file()
    assert list((homes["node"] / "cache" / "compiled").glob(f"{info.digest}-*.cwasm"))


def test_bytes_that_do_not_match_the_digest_never_run(
    deployment: RayRuntime, homes: dict[str, Path], build_guest: BuildGuest
) -> None:
    info = deployment.register(build_guest("logger"), {"name": "fresh"})
    forged = ray.put(build_guest("echo").read_bytes())  # a valid component, but not this one
    artifact = Artifact(info.name, info.version, info.digest, info.manifest, [forged])
    call_id = uuid.uuid4().hex
    actor = deployment.actor(deployment.replicas()[0]["replica"])
    envelope = ray.get(actor.call.remote(_procwire.encode(call_id, "fresh", {}, None, None), artifact))
    assert envelope["ok"] is False and envelope["error"]["code"] == "internal_error"
    assert "verification" in envelope["error"]["message"]
    with glovebox.Runtime(home=homes["node"]) as node:
        assert [tool.name for tool in node.tools("fresh")] == []
    assert not list((homes["node"] / "blobs" / "sha256").glob(f"{info.digest.removeprefix('sha256:')}*"))
    assert not list((homes["node"] / "cache" / "compiled").glob(f"{info.digest}-*"))
    [row] = _rows(homes, call_id)
    assert row["outcome"] == "internal_error" and row["digest"] == info.digest
    assert deployment.call("fresh", {}).ok  # the true bytes, from the driver, run


def test_one_policy_everywhere(deployment: RayRuntime) -> None:
    assert deployment.reload_policy() is True  # (a bool, as Runtime.reload_policy answers)
    assert deployment.policy_digest.startswith("sha256:")
    expected = deployment.explain("secret", principal="ann").to_dict()
    answers = deployment.explain_everywhere("secret", principal="ann")
    assert len(answers) == 2 and all(answer == expected for answer in answers.values())
    assert expected["action"] == "block"


def test_explain_everywhere_answers_for_a_tool_no_replica_holds_yet(
    deployment: RayRuntime, homes: dict[str, Path], build_guest: BuildGuest
) -> None:
    deployment.register(build_guest("echo"), {"name": "unheld", "required_scopes": ["text:read"]})
    with glovebox.Runtime(home=homes["node"]) as node:
        assert node.tools("unheld") == []  # no replica has been sent it: the decision needs no artifact
    for principal in ("ann", None):
        expected = deployment.explain("unheld", principal=principal).to_dict()
        answers = deployment.explain_everywhere("unheld", principal=principal)
        assert len(answers) == 2 and all(answer == expected for answer in answers.values()), answers
    assert expected["action"] == "block" and expected["missing_scopes"] == ["text:read"]
    with pytest.raises(glovebox.ToolNotFound):
        deployment.explain_everywhere("never-registered")


def test_a_policy_change_reaches_every_replica(deployment: RayRuntime, homes: dict[str, Path]) -> None:
    before = homes["policy"].read_text()
    homes["policy"].write_text(before.replace("tool: secret", "tool: trap"))
    try:
        assert deployment.reload_policy() is True
        changed = deployment.policy_digest
        answers = deployment.explain_everywhere("trap", principal="ann")
        assert {answer["action"] for answer in answers.values()} == {"block"}
        refused = deployment.call("trap", {}, principal="ann")
        assert refused.code == "permission_denied" and "replica" in refused.meta
    finally:
        homes["policy"].write_text(before)
    assert deployment.reload_policy() is True and deployment.policy_digest != changed
    assert deployment.call("trap", {}, principal="ann").code == "guest_trap"


def test_overloaded_at_the_bound(deployment: RayRuntime, upstream: Held, homes: dict[str, Path]) -> None:
    url = f"http://127.0.0.1:{upstream.server_address[1]}/hold"
    upstream.gate.clear()
    answers: list[glovebox.CallResult] = []
    callers = [threading.Thread(target=lambda: answers.append(deployment.call("hc", {"url": url}))) for _ in range(4)]
    for caller in callers:
        caller.start()
    for _ in range(4):  # two replicas, two threads each: every slot holds a call at the upstream
        assert upstream.arrived.acquire(timeout=60), [a.to_dict() for a in answers]
    refused = deployment.call("echo", {"n": 1}, principal="ann")
    upstream.gate.set()
    for caller in callers:
        caller.join(60)
    assert refused.code == "overloaded"
    assert refused.error is not None and refused.error.retryable
    assert refused.error.details["retry_after_ms"] >= 1
    assert [row["outcome"] for row in _rows(homes, refused.meta["call_id"])] == ["overloaded"]
    assert [a.ok for a in answers] == [True] * 4, [a.to_dict() for a in answers]
    assert deployment.call("echo", {"n": 2}).ok


def test_a_killed_replica_answers_internal_error_once_and_is_replaced(
    deployment: RayRuntime, upstream: Held, homes: dict[str, Path]
) -> None:
    base = f"http://127.0.0.1:{upstream.server_address[1]}"
    victim = deployment.call("hc", {"url": base + "/fast"}).meta["replica"]  # where hc runs while idle
    upstream.gate.clear()
    answers: list[glovebox.CallResult] = []
    caller = threading.Thread(
        target=lambda: answers.append(deployment.call("hc", {"url": base + "/hold"}, principal="ann"))
    )
    caller.start()
    assert upstream.arrived.acquire(timeout=60)
    ray.kill(deployment.actor(victim))
    caller.join(60)
    upstream.gate.set()
    [result] = answers
    assert result.code == "internal_error"
    assert result.error is not None and result.error.retryable
    assert result.error.details == {"call_id": result.meta["call_id"], "replica": victim}
    assert result.meta["principal"] == "ann" and "Traceback" not in result.error.message
    [row] = _rows(homes, result.meta["call_id"])
    assert row["outcome"] == "internal_error" and row["tool"] == "hc"
    assert len(deployment.replicas()) == 2  # the replacement, under the same id
    after = deployment.call("hc", {"url": base + "/fast"})
    assert after.ok and after.meta["replica"] == victim


def test_the_audit_verifies_after_concurrent_calls(
    deployment: RayRuntime, homes: dict[str, Path], build_guest: BuildGuest
) -> None:
    deployment.register(build_guest("echo"), {"name": "audited"})  # fetched by the replicas during the calls
    results: list[glovebox.CallResult] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        for i in range(8):
            value = {"n": k * 100 + i}
            result = deployment.call("echo" if i % 2 else "audited", value)
            with lock:
                results.append(result)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.ok for r in results if r.code != "overloaded")
    chains = deployment.verify_audit()
    assert len(chains) == 2 and all(chain["ok"] for chain in chains), chains
    for result in results[:8]:
        assert len(_rows(homes, result.meta["call_id"])) == 1


def test_gc_collects_the_signatures_no_registered_tool_refers_to(
    deployment: RayRuntime, tmp_path: Path, build_guest: BuildGuest
) -> None:
    private, public = glovebox.generate_keypair("ray-publisher", tmp_path / "keys")
    glovebox.Keyring(deployment.home).trust(public)
    wasm = tmp_path / "signed.wasm"
    wasm.write_bytes(build_guest("guest_error").read_bytes())  # a digest no other test registers
    kept = [
        deployment.register(wasm, {"name": name}, signature=glovebox.sign(wasm, private, manifest={"name": name}))
        for name in ("signed-a", "signed-b")
    ]
    assert kept[0].signer is not None and kept[0].digest == kept[1].digest
    signature = deployment.home / "signatures" / f"{kept[0].digest.removeprefix('sha256:')}.sig"
    assert signature.is_file()
    deployment.remove("signed-a@0.0.0")
    assert signature not in deployment.gc() and signature.is_file()  # signed-b still refers to it
    deployment.remove("signed-b@0.0.0")
    assert signature in deployment.gc() and not signature.exists()
    assert deployment.call("echo", {"n": 1}).ok


def test_serve_backend_ray_answers_http(cluster: str, homes: dict[str, Path]) -> None:
    port = _free_port()
    command = [sys.executable, "-m", "glovebox", "--home", str(homes["driver"])]
    command += ["serve", "--backend", "ray", "--address", cluster, "--replicas", "1", "--port", str(port)]
    command += ["--insecure-anonymous"]
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as server:
        try:
            answer = None
            deadline = time.monotonic() + 120
            while answer is None and time.monotonic() < deadline:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                try:
                    url = f"http://127.0.0.1:{port}/v1/tools/echo/call"
                    answer = httpx.post(url, json={"input": {"n": 7}}, timeout=60)
                except httpx.TransportError:
                    time.sleep(0.2)
        finally:
            server.terminate()
            server.wait(60)
    assert answer is not None and answer.status_code == 200, answer
    envelope = json.loads(answer.text)
    assert envelope["ok"] is True and envelope["output"] == {"n": 7}
    assert envelope["meta"]["replica"] == "replica-0" and envelope["meta"]["worker_pid"] != server.pid


def test_a_remote_mcp_tool_is_proxied_by_the_driver(
    deployment: RayRuntime, homes: dict[str, Path], serve_app: Callable[[object], str]
) -> None:
    """A ``mcp-remote`` tool has no wasm to ship to a replica: the driver calls it and audits it."""
    from mcp.server.mcpserver import MCPServer

    from glovebox.importers import import_mcp

    server = MCPServer("Far")

    def add(a: int, b: int) -> int:
        return a + b

    server.add_tool(add)
    url = serve_app(server.streamable_http_app()) + "/mcp"
    with glovebox.Runtime(home=homes["driver"], policy=homes["policy"]) as rt:
        import_mcp(rt, url, scopes=[])
    result = deployment.call("far-add", {"a": 2, "b": 3})
    assert result.ok and result.output == {"result": 5}, result.to_dict()
    assert "replica" not in result.meta and result.meta["remote"]["tool"] == "add"
    assert [row["tool"] for row in _rows(homes, result.meta["call_id"])] == ["far-add@1.0.0"]


def test_a_name_or_principal_that_is_not_a_str_is_misuse(deployment: RayRuntime) -> None:
    with pytest.raises(TypeError, match="principal must be a str or None, not int"):
        deployment.call("echo", {"n": 1}, principal=7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tool name must be a str, not bytes"):
        deployment.call(b"echo", {"n": 1})  # type: ignore[arg-type]


def test_calls_from_the_driver_node_go_by_the_lane(deployment: RayRuntime) -> None:
    replica = deployment.call("echo", {"n": 0}).meta["replica"]
    before = ray.get(deployment.actor(replica).open_lane.remote())["answered"]
    answers = [deployment.call("echo", {"n": n}) for n in range(3)]
    assert [(a.ok, a.meta["replica"]) for a in answers] == [(True, replica)] * 3
    assert ray.get(deployment.actor(replica).open_lane.remote())["answered"] == before + 3


def _closed_unanswered(conn: socket.socket) -> bool:
    """Whether the peer closed the connection without a byte of answer (a reset counts: it left data unread)."""
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True


def test_the_lane_answers_only_a_connection_that_offers_its_token(
    deployment: RayRuntime, homes: dict[str, Path]
) -> None:
    replica = deployment.call("echo", {"n": 0}).meta["replica"]  # its home holds echo now
    about = ray.get(deployment.actor(replica).open_lane.remote())
    assert os.stat(os.path.dirname(about["path"])).st_mode & 0o777 == 0o700
    info = deployment.tool("echo")
    call_id = uuid.uuid4().hex
    request = _raylane._frames(
        _procwire.encode(call_id, "echo", {"n": 7}, None, None), f"echo@{info.version}".encode(), info.digest.encode()
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(60)
        conn.connect(about["path"])
        conn.sendall(bytes(32) + request)  # a wrong token
        assert _closed_unanswered(conn)
    assert _rows(homes, call_id) == []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(60)
        conn.connect(about["path"])
        conn.sendall(about["token"] + request)
        answer = _raylane._read_frame(conn)
    assert answer is not None and answer[:1] == b"a"
    envelope = pickle.loads(answer[1:])
    assert envelope["ok"] and envelope["meta"]["call_id"] == call_id and envelope["meta"]["replica"] == replica
    [row] = _rows(homes, call_id)
    assert row["outcome"] == "ok"


def test_a_lane_request_the_replica_cannot_read_answers_internal_error(deployment: RayRuntime) -> None:
    replica = deployment.call("echo", {"n": 0}).meta["replica"]
    about = ray.get(deployment.actor(replica).open_lane.remote())
    info = deployment.tool("echo")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(60)
        conn.connect(about["path"])
        conn.sendall(about["token"] + _raylane._frames(b"[1, 2]", b"echo@" + info.version.encode(), b"sha256:x"))
        assert _raylane._read_frame(conn) == b"a" + pickle.dumps(None)  # that digest is not held: nothing ran
        held = info.digest.encode()
        conn.sendall(_raylane._frames(b"[1, 2]", b"echo@" + info.version.encode(), held))
        answer = _raylane._read_frame(conn)
    assert answer is not None and answer.startswith(b"b") and b"not a JSON object" in answer
    assert deployment.call("echo", {"n": 1}).ok  # the replica goes on


def test_a_lane_that_cannot_be_reached_sends_the_call_through_ray_once(deployment: RayRuntime) -> None:
    replica = deployment.call("echo", {"n": 0}).meta["replica"]
    about = ray.get(deployment.actor(replica).open_lane.remote())
    before = about["answered"]
    # The socket is gone (a temp cleaner removed it): no connection can be made, nothing is sent.
    slot = next(slot for slot in deployment._ray._slots if slot.replica_id == replica)  # noqa: SLF001
    lane = slot.lane
    assert lane is not None
    lane.close()
    slot.lane = _raylane.Lane(about["path"] + ".gone", about["token"])
    answer = deployment.call("echo", {"n": 7})
    assert answer.ok and answer.output == {"n": 7} and answer.meta["replica"] == replica, answer.to_dict()
    assert ray.get(deployment.actor(replica).open_lane.remote())["answered"] == before  # Ray's path, not the lane
    assert slot.lane is None  # and Ray's path from then on
    assert deployment.call("echo", {"n": 8}).ok
