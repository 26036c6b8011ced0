"""Local (stdio) MCP servers as tools: imported with ``--command``, supervised, one session per principal.

The servers are real: ``mcp-server-time`` (PyPI), ``@modelcontextprotocol/server-memory``
(npm, pinned in tests/mcp_servers) and ``servers/stdio_lab.py`` (a small server on
the official SDK that reports what its process sees).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli
from glovebox.importers import import_mcp
from glovebox.policy import parse_policy
from glovebox.remote import _bwrap, relay_progress
from glovebox.remote._sessions import SessionPool

pytestmark = [pytest.mark.system, pytest.mark.slow]

LAB = Path(__file__).parent / "servers" / "stdio_lab.py"
PYTHON = str(Path(sys.executable).parent / "python")
NODE_SERVERS = Path(__file__).parents[1] / "mcp_servers" / "node_modules" / ".bin"

POLICY = """
version: 1
principals:
  agent: {scopes: ["lab:call", "time:call", "memory:call"]}
  other: {scopes: ["lab:call", "memory:call"]}
rules:
  - {tool: "*", action: allow}
"""


def invoke(home: Path, *args: str, policy: Path | None = None) -> Any:
    where = ["--home", str(home)] + (["--policy", str(policy)] if policy else [])
    return CliRunner().invoke(cli, [*where, *args], catch_exceptions=False)


def pool_of(rt: glovebox.Runtime) -> SessionPool:
    executor = rt._executors.for_kind("mcp-remote")
    return executor.pool  # type: ignore[attr-defined, no-any-return]


@pytest.fixture
def lab(runtime: glovebox.Runtime, monkeypatch: pytest.MonkeyPatch) -> Iterator[glovebox.Runtime]:
    monkeypatch.setenv("LAB_SECRET", "hunter2-lab-secret")
    monkeypatch.setenv("HOST_ONLY_CANARY", "never-seen")
    import_mcp(
        runtime,
        command=[PYTHON, str(LAB)],
        name="lab",
        env=["GREETING=hello"],
        env_secrets=["LAB_TOKEN=LAB_SECRET"],
        sandbox="none",
        timeout_ms=20_000,
    )
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        yield rt


def test_cli_imports_mcp_server_time_over_stdio_and_calls_it(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    server = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")
    done = invoke(
        runtime.home, "import", "mcp", "--command", f"{server} --local-timezone UTC", "--name", "time",
        "--timeout-ms", "20000",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "imported time (mcp-remote):" in done.output and "  + time-get_current_time@1.0.0" in done.output
    info = runtime.tool("time-get_current_time")
    stored = json.loads(runtime._registry.descriptor_path(info.digest).read_bytes())
    assert stored["command"] == [server, "--local-timezone", "UTC"] and stored["url"] == "stdio:mcp-server-time"
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    called = invoke(
        runtime.home, "call", "time-get_current_time", "--input", '{"timezone": "UTC"}', "--principal", "agent",
        policy=policy,
    )  # fmt: skip
    envelope = json.loads(called.output)
    assert called.exit_code == 0, called.output
    assert envelope["output"]["timezone"] == "UTC" and envelope["output"]["datetime"].startswith("20")
    assert envelope["meta"]["remote"] == {"url": "stdio:mcp-server-time", "tool": "get_current_time"}
    again = invoke(
        runtime.home, "import", "mcp", "--command", f"{server} --local-timezone UTC", "--name", "time",
        "--timeout-ms", "20000",
    )  # fmt: skip
    assert "0 added, 0 changed, 0 removed" in again.output  # a refresh of the same server changes nothing


@pytest.mark.skipif(not (NODE_SERVERS / "mcp-server-memory").exists(), reason="npm packages not installed")
def test_server_memory_remembers_across_calls_and_keeps_principals_apart(runtime: glovebox.Runtime) -> None:
    command = [str(NODE_SERVERS / "mcp-server-memory")]
    env = ["MEMORY_FILE_PATH={workdir}/memory.jsonl"]
    import_mcp(runtime, command=command, name="memory", env=env, timeout_ms=20_000)
    entity = {"name": "glovebox", "entityType": "project", "observations": ["runs tools in wasm"]}
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        made = rt.call("memory-create_entities", {"entities": [entity]}, principal="agent")
        assert made.ok, made.error
        seen = rt.call("memory-read_graph", {}, principal="agent")
        assert seen.ok and [e["name"] for e in seen.output["entities"]] == ["glovebox"]
        assert pool_of(rt).open_sessions("agent") == 1
        elsewhere = rt.call("memory-read_graph", {}, principal="other")
        assert elsewhere.ok and elsewhere.output["entities"] == []  # another principal: another process and file
        assert pool_of(rt).open_sessions() == 2


def test_one_process_per_principal_reused_across_calls(lab: glovebox.Runtime) -> None:
    first = lab.call("lab-whoami", {}, principal="agent")
    assert first.ok, first.error
    assert lab.call("lab-remember", {"note": "a"}, principal="agent").output == {"result": 1}
    assert lab.call("lab-remember", {"note": "b"}, principal="agent").output == {"result": 2}  # the same session
    assert lab.call("lab-whoami", {}, principal="agent").output["pid"] == first.output["pid"]
    other = lab.call("lab-whoami", {}, principal="other")
    assert other.output["pid"] != first.output["pid"] and other.output["cwd"] != first.output["cwd"]
    assert lab.call("lab-remember", {"note": "c"}, principal="other").output == {"result": 1}
    cwd = Path(first.output["cwd"])
    assert cwd.is_relative_to(lab.home / "mcp-stdio")


def test_the_environment_is_clean_and_the_secret_never_reaches_the_agent(lab: glovebox.Runtime) -> None:
    seen = lab.call("lab-whoami", {}, principal="agent")
    assert seen.ok, seen.error
    assert set(seen.output["env"]) == {"PATH", "HOME", "TMPDIR", "LANG", "GREETING", "LAB_TOKEN"}
    assert seen.output["token"] == "[REDACTED]"  # the server got it; the output is scrubbed of it
    assert "hunter2-lab-secret" not in json.dumps(seen.to_dict())


def test_a_server_that_dies_is_restarted_with_backoff(lab: glovebox.Runtime) -> None:
    pool_of(lab).backoff_s = 2.0  # wide enough for a loaded machine to call again inside it
    before = lab.call("lab-whoami", {}, principal="agent").output["pid"]
    crashed = lab.call("lab-crash", {}, principal="agent")
    assert crashed.code == "upstream_error"
    backoff = lab.call("lab-whoami", {}, principal="agent")  # at once: inside the backoff
    assert backoff.code == "upstream_error" and backoff.error is not None
    assert backoff.error.retryable and 0 < backoff.error.details["retry_after_ms"] <= 2001
    time.sleep(backoff.error.details["retry_after_ms"] / 1000 + 0.1)
    after = lab.call("lab-whoami", {}, principal="agent")
    assert after.ok and after.output["pid"] != before


def test_an_idle_session_is_stopped_and_started_again_on_the_next_call(lab: glovebox.Runtime) -> None:
    pool = pool_of(lab)
    pool.idle_s = 0.3
    first = lab.call("lab-whoami", {}, principal="agent").output["pid"]
    deadline = time.monotonic() + 10
    while pool.open_sessions() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pool.open_sessions() == 0
    while Path(f"/proc/{first}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{first}").exists()  # its process is gone (stopped and reaped)
    assert lab.call("lab-whoami", {}, principal="agent").output["pid"] != first


def test_a_line_over_the_cap_is_output_too_large_and_the_next_call_recovers(runtime: glovebox.Runtime) -> None:
    import_mcp(runtime, command=[PYTHON, str(LAB)], name="lab", sandbox="none", timeout_ms=20_000, output_bytes=1024)
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        flood = rt.call("lab-huge", {"size": 2_000_000}, principal="agent")
        assert flood.code == "output_too_large", flood.error
        time.sleep(0.7)  # past the restart backoff
        assert rt.call("lab-huge", {"size": 10}, principal="agent").output == {"result": "x" * 10}


def test_progress_extends_the_deadline_up_to_the_policy_ceiling_and_is_relayed(runtime: glovebox.Runtime) -> None:
    import_mcp(runtime, command=[PYTHON, str(LAB)], name="lab", sandbox="none", timeout_ms=1000)
    ceiling = POLICY + "limits:\n  - {tool: 'lab-*', limits: {max_timeout_ms: 4000}}\n"
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        rt.call("lab-whoami", {}, principal="agent")  # the server is up: the calls below time only the work
        assert rt.call("lab-work", {"seconds": 2}, principal="agent").code == "timeout"  # no ceiling: no extension
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(ceiling)) as rt:
        rt.call("lab-whoami", {}, principal="agent")
        heard: list[tuple[float, float | None]] = []
        with relay_progress(lambda progress, total, message: heard.append((progress, total))):
            done = rt.call("lab-work", {"seconds": 2}, principal="agent")
        assert done.ok and done.output == {"result": "done"}, done.error
        assert heard[-1] == (8, 8) and len(heard) == 8
        silent = rt.call("lab-silent", {"seconds": 2}, principal="agent")  # no progress: the base deadline holds
        assert silent.code == "timeout"
        capped = rt.call("lab-work", {"seconds": 12}, principal="agent")  # progress, but past the ceiling
        assert capped.code == "timeout" and 3_900 <= capped.meta["duration_ms"] < 6_000


def test_a_timed_out_call_is_cancelled_upstream(runtime: glovebox.Runtime) -> None:
    import_mcp(runtime, command=[PYTHON, str(LAB)], name="lab", sandbox="none", timeout_ms=1500)
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        rt.call("lab-whoami", {}, principal="agent")
        assert rt.call("lab-silent", {"seconds": 5}, principal="agent").code == "timeout"
        assert rt.call("lab-work", {"seconds": 0.1}, principal="agent").ok
        assert rt.call("lab-was_cancelled", {}, principal="agent").output == {"result": False}
        assert rt.call("lab-work", {"seconds": 30}, principal="agent").code == "timeout"
        deadline = time.monotonic() + 5
        while rt.call("lab-was_cancelled", {}, principal="agent").output != {"result": True}:
            assert time.monotonic() < deadline, "the server never heard notifications/cancelled"
            time.sleep(0.1)


def test_bad_commands_are_refused_before_anything_starts(runtime: glovebox.Runtime) -> None:
    with pytest.raises(ValueError, match="not an executable"):
        import_mcp(runtime, command="no-such-mcp-server-anywhere --flag")
    with pytest.raises(ValueError, match="not both"):
        import_mcp(runtime, "http://127.0.0.1:1/mcp", command=[PYTHON, str(LAB)])
    with pytest.raises(ValueError, match="not a variable"):
        import_mcp(runtime, command=[PYTHON, str(LAB)], env=["PATH=/evil"])
    with pytest.raises(ValueError, match="--sandbox"):
        import_mcp(runtime, command=[PYTHON, str(LAB)], sandbox="chroot")
    usage = invoke(runtime.home, "import", "mcp")
    assert usage.exit_code == 2 and "--command" in usage.output


@pytest.mark.skipif(not _bwrap.available(), reason="bubblewrap is not installed or cannot make a sandbox here")
def test_a_server_under_bubblewrap_cannot_read_shadow_write_outside_or_reach_a_host(
    runtime: glovebox.Runtime, serve_app: Any
) -> None:
    import_mcp(runtime, command=[PYTHON, str(LAB)], name="lab", sandbox="bwrap", timeout_ms=20_000)
    listening = serve_app(lambda scope, receive, send: None)  # a host port that answers outside the sandbox
    port = int(listening.rsplit(":", 1)[1])
    escapes = [Path(__file__).parent / "servers" / "escaped.txt", runtime.home / "escaped.txt"]
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        inside = rt.call("lab-whoami", {}, principal="agent")
        assert inside.ok, inside.error
        for outside, host in zip(escapes, ["127.0.0.1", "1.1.1.1"], strict=True):
            probe = rt.call("lab-probe", {"outside": str(outside), "host": host, "port": port}, principal="agent")
            assert probe.ok, probe.error
            outcomes = probe.output
            assert outcomes["read_shadow"] == "PermissionError"
            assert outcomes["write_outside"] in {"OSError", "PermissionError"}  # EROFS: a read-only file system
            assert outcomes["connect"] != "ok"
            assert outcomes["write_inside"] == "ok"
            assert not outside.exists()
        assert (Path(inside.output["cwd"]) / "inside.txt").read_text() == "fine"  # its directory is the host's


def test_the_sandbox_is_chosen_by_the_descriptor_and_this_machine(runtime: glovebox.Runtime) -> None:
    from glovebox.remote._connect import sandbox_of
    from glovebox.remote._proxy import Descriptor

    server = Descriptor("stdio:x", "t", command=[PYTHON], sandbox="auto")
    assert sandbox_of(server) == ("bwrap" if _bwrap.available() else "none")
    assert sandbox_of(Descriptor("stdio:x", "t", command=[PYTHON], sandbox="none")) == "none"
    if not _bwrap.available():
        with pytest.raises(glovebox.UpstreamError, match="bubblewrap"):
            sandbox_of(Descriptor("stdio:x", "t", command=[PYTHON], sandbox="bwrap"))


def test_a_refresh_that_adds_a_secret_or_drops_the_sandbox_is_a_widening(
    runtime: glovebox.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAB_SECRET", "hunter2-lab-secret")
    import_mcp(runtime, command=[PYTHON, str(LAB)], name="lab", sandbox="bwrap" if _bwrap.available() else "none")
    with pytest.raises(glovebox.WideningRefused) as refused:
        import_mcp(
            runtime, command=[PYTHON, str(LAB)], name="lab", env_secrets=["LAB_TOKEN=LAB_SECRET"], sandbox="none"
        )
    assert "secret LAB_SECRET sent in env LAB_TOKEN" in str(refused.value)
    assert "outside the OS sandbox" in str(refused.value)
    done = import_mcp(
        runtime, command=[PYTHON, str(LAB)], name="lab", env_secrets=["LAB_TOKEN=LAB_SECRET"], sandbox="none",
        accept_widening=True,
    )  # fmt: skip
    assert len(done.changed) == 10 and not done.added  # every tool of the lab server


def test_a_call_its_caller_cancels_is_cancelled_upstream(runtime: glovebox.Runtime) -> None:
    import threading

    from glovebox.remote import Cancellation, cancel_with

    import_mcp(runtime, command=[PYTHON, str(LAB)], name="lab", sandbox="none", timeout_ms=30_000)
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        assert rt.call("lab-whoami", {}, principal="agent").ok
        cancellation = Cancellation()
        threading.Timer(0.5, cancellation.cancel).start()
        started = time.monotonic()
        with cancel_with(cancellation):
            cancelled = rt.call("lab-work", {"seconds": 30}, principal="agent")
        assert time.monotonic() - started < 10
        assert cancelled.code == "upstream_error" and cancelled.error is not None
        assert cancelled.error.details["cancelled"] is True and not cancelled.error.retryable
        deadline = time.monotonic() + 5
        while rt.call("lab-was_cancelled", {}, principal="agent").output != {"result": True}:
            assert time.monotonic() < deadline, "the server never heard notifications/cancelled"
            time.sleep(0.1)


def test_concurrent_calls_of_one_principal_share_its_session(lab: glovebox.Runtime) -> None:
    from concurrent.futures import ThreadPoolExecutor

    pid = lab.call("lab-whoami", {}, principal="agent").output["pid"]
    started = time.monotonic()
    with ThreadPoolExecutor(4) as threads:
        results = list(threads.map(lambda _: lab.call("lab-silent", {"seconds": 1}, principal="agent"), range(4)))
    assert all(result.ok for result in results), [result.error for result in results]
    assert time.monotonic() - started < 3.5  # side by side on the one session, not one after another
    assert lab.call("lab-whoami", {}, principal="agent").output["pid"] == pid
    assert pool_of(lab).open_sessions() == 1
