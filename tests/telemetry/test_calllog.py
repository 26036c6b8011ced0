"""The ``glovebox.calls`` log line and ``--log-format json``, through the real command line.

Every stderr line of a JSON-logging command must parse as JSON; the call line's
``call_id`` must equal the envelope's ``meta.call_id`` and the audit row's.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import glovebox
from glovebox.telemetry._calllog import JsonFormatter

from ..conftest import _free_port
from ..scale.test_process_pool import _until

SECRET_INPUT = "never-log-this-input-7781"


def glovebox_cli(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "glovebox", "--home", str(home), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


@contextmanager
def serving(home: Path, policy: Path, stderr: Path, *command: str) -> Iterator[str]:
    """``python -m glovebox --home H --policy P COMMAND --port N``, its stderr to a file; yields its URL."""
    port = _free_port()
    argv = [sys.executable, "-m", "glovebox", "--home", str(home), "--policy", str(policy), *command]
    with stderr.open("wb") as log:
        proc = subprocess.Popen([*argv, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=log)
    try:

        def listening() -> bool:
            assert proc.poll() is None, stderr.read_text()
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        _until(listening, "the server to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(60)


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every non-empty line of ``text`` as JSON (fails on any line that is not)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["logger"] == "glovebox.calls"]


def audit_ids(home: Path) -> list[str]:
    with glovebox.Runtime(home=home) as rt:
        return [row["call_id"] for row in rt.audit.records()]


def test_cli_call_logs_one_json_line_that_joins_envelope_and_audit(
    _isolated_env: Path, build_example: Callable[[str], Path]
) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_example("calc"))
    done = glovebox_cli(_isolated_env, "--log-format", "json", "call", "calc", "--input", '{"expression": "6*7"}')
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    [line] = calls(json_lines(done.stderr))  # one per call, among the host's other lines
    assert line["level"] == "info"
    assert line["call_id"] == envelope["meta"]["call_id"] and audit_ids(_isolated_env) == [line["call_id"]]
    assert (line["tool"], line["version"], line["principal"], line["outcome"]) == ("calc", "1.0.0", "anonymous", "ok")
    assert line["duration_ms"] == envelope["meta"]["duration_ms"]
    assert "trace_id" not in line  # no tracer provider in this process


def test_a_failed_call_logs_its_code_and_never_its_input_or_message(
    _isolated_env: Path, build_example: Callable[[str], Path]
) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_example("calc"))
    value = json.dumps({"expression": SECRET_INPUT})
    done = glovebox_cli(_isolated_env, "call", "calc", "--input", value, env={"GLOVEBOX_LOG_FORMAT": "JSON"})
    assert done.returncode == 1
    envelope = json.loads(done.stdout)
    [line] = calls(json_lines(done.stderr))
    assert line["outcome"] == envelope["error"]["code"] == "guest_error"
    assert SECRET_INPUT not in done.stderr and envelope["error"]["message"] not in done.stderr


def test_text_is_the_default_and_says_nothing(_isolated_env: Path, build_example: Callable[[str], Path]) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_example("calc"))
    done = glovebox_cli(_isolated_env, "call", "calc", "--input", '{"expression": "1"}')
    assert (done.returncode, done.stderr) == (0, "")


def test_an_unknown_log_format_is_a_usage_error(_isolated_env: Path) -> None:
    done = glovebox_cli(_isolated_env, "tools", env={"GLOVEBOX_LOG_FORMAT": "xml"})
    assert done.returncode == 2
    assert "GLOVEBOX_LOG_FORMAT must be text or json, not 'xml'" in done.stderr
    flag = glovebox_cli(_isolated_env, "--log-format", "xml", "tools")
    assert flag.returncode == 2 and "--log-format" in flag.stderr


@pytest.mark.slow
@pytest.mark.parametrize("processes", ["1", "2"])
def test_serve_logs_json_lines_that_join_envelope_and_audit(
    server_home: tuple[Path, Path], processes: str, tmp_path: Path
) -> None:
    home, policy = server_home
    log = tmp_path / "serve.log"
    headers = {"Authorization": "Bearer agent-key"}
    with serving(home, policy, log, "--log-format", "json", "serve", "--processes", processes) as url:
        answer = httpx.post(
            f"{url}/v1/tools/calc/call", json={"input": {"expression": SECRET_INPUT}}, headers=headers, timeout=120
        )
        ok = httpx.post(
            f"{url}/v1/tools/calc/call", json={"input": {"expression": "2*3"}}, headers=headers, timeout=120
        )
    text = log.read_text()
    lines = json_lines(text)  # every line is JSON, uvicorn's included
    assert any(line["logger"].startswith("uvicorn") for line in lines), text
    logged = calls(lines)
    assert [c["call_id"] for c in logged] == [answer.json()["meta"]["call_id"], ok.json()["meta"]["call_id"]]
    assert [c["outcome"] for c in logged] == ["guest_error", "ok"]
    assert all(c["principal"] == "agent" for c in logged)
    assert set(audit_ids(home)) >= {c["call_id"] for c in logged}
    assert SECRET_INPUT not in text


def test_json_formatter_keeps_the_exception_and_plain_records() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.getLogger("glovebox").makeRecord(
            "glovebox", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info()
        )
    line = json.loads(JsonFormatter().format(record))
    assert (line["level"], line["logger"], line["message"]) == ("error", "glovebox", "failed here")
    assert "RuntimeError: boom" in line["exception"]
    assert line["time"].endswith("Z") and len(line["time"]) == len("2026-01-02T03:04:05.678Z")


class _Unparsed:
    """An MCP client message handler keeping what the client could not read on the server's stdout."""

    def __init__(self) -> None:
        self.errors: list[Exception] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)


def test_mcp_stdio_logs_json_lines_on_stderr_and_leaves_stdout_to_the_protocol(
    mcp_home: tuple[Path, Path], tmp_path: Path
) -> None:
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from ..servers.test_mcp import envelope, server_env

    home, policy = mcp_home
    where = ["--home", str(home), "--policy", str(policy)]
    args = ["-m", "glovebox", "--log-format", "json", *where, "mcp", "--principal", "agent"]
    params = StdioServerParameters(command=sys.executable, args=args, env=server_env())
    unparsed = _Unparsed()
    asked = [{"expression": "6*7"}, {"expression": SECRET_INPUT}, {"expression": "1+1"}]

    async def session(errlog: Any) -> list[dict[str, Any]]:
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport, cache=None, message_handler=unparsed, read_timeout_seconds=60) as client:  # type: ignore[arg-type]
            return [envelope(await client.call_tool("calc", value)) for value in asked]

    with (tmp_path / "stderr.log").open("w+", encoding="utf-8") as errlog:
        envelopes = anyio.run(session, errlog)
        errlog.seek(0)
        stderr = errlog.read()
    assert unparsed.errors == []  # nothing but JSON-RPC reached the client on stdout
    assert [e["ok"] for e in envelopes] == [True, False, True] and envelopes[0]["output"] == {"value": 42}
    lines = calls(json_lines(stderr))  # every stderr line is JSON, and one per call is a call line
    assert [line["call_id"] for line in lines] == [e["meta"]["call_id"] for e in envelopes] == audit_ids(home)
    assert [line["outcome"] for line in lines] == ["ok", "guest_error", "ok"]
    assert {line["principal"] for line in lines} == {"agent"} and SECRET_INPUT not in stderr
