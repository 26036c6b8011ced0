"""A host call whose arguments exceed what wasmtime copies in one call is the tool's fault, not the host's.

wasmtime bounds the data it copies out of a guest for one host call (the
"hostcall fuel"). A tool that hands ``http-fetch`` a request body past that
bound is stopped by wasmtime before the host function runs; the call must
answer a structured, non-retryable ``guest_trap`` naming the cause, leave its
audit row, send nothing, and leave the host serving the next call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import glovebox

from ..capabilities.test_http import Server, local_rule, server  # noqa: F401  (server is a fixture)

#: Every test here runs on the native core and on the pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("sandbox_path")

BuildGuest = Callable[[str], Path]
MIB = 1024 * 1024


def test_a_request_body_past_the_hostcall_budget_is_a_guest_trap(
    _isolated_env: Path,
    build_guest: BuildGuest,
    server: Server,  # noqa: F811  (the fixture imported above)
) -> None:
    rule = local_rule(server, methods=["POST"])
    manifest = {
        "name": "big-body",
        "capabilities": {"http": [rule]},
        "limits": {"memory_bytes": 64 * MIB, "timeout_ms": 20_000},
    }
    grants = {"http": [rule]}
    with glovebox.Runtime(home=_isolated_env, grants=grants) as rt:
        rt.register(build_guest("big_body"), manifest=manifest)
        url = f"http://127.0.0.1:{server.port}/echo"
        small = rt.call("big-body", {"url": url, "bytes": 1024})
        assert small.ok, small.to_dict()
        seen = len(server.seen)

        result = rt.call("big-body", {"url": url, "bytes": 24 * MIB})
        assert result.code == "guest_trap", result.to_dict()
        assert result.error is not None and result.error.retryable is False
        assert "host call" in result.error.message
        assert len(server.seen) == seen  # nothing was sent
        record = rt.audit.find(result.meta["call_id"])
        assert record is not None and record["outcome"] == "guest_trap"

        assert rt.call("big-body", {"url": url, "bytes": 1024}).ok  # the host goes on
