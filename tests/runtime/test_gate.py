"""The gate's decision cache: the same answer as ``decide``, never a stale one, and bounded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import glovebox
from glovebox.policy import decide, parse_policy
from glovebox.runtime import _gate
from glovebox.runtime._gate import CallTrace, Decisions, PolicyGate

POLICY = """
version: 1
principals:
  agent: {scopes: [a]}
rules:
  - {tool: "*", action: allow}
  - {tool: "calc", principals: [agent], action: require_approval}
limits:
  - {tool: "*", principals: [agent], limits: {timeout_ms: 100}}
"""


def tool(name: str, scopes: list[str] | None = None, timeout_ms: int = 1000) -> glovebox.ToolInfo:
    manifest = glovebox.Manifest(
        name=name, version="1.0.0", required_scopes=scopes or [], limits={"timeout_ms": timeout_ms}
    )
    return glovebox.ToolInfo(manifest=manifest, digest="sha256:" + "0" * 64, registered_at="", size_bytes=0)


@pytest.mark.parametrize("principal", ["agent", "stranger", "anonymous"])
@pytest.mark.parametrize("info", [tool("calc"), tool("echo"), tool("secret", ["a"]), tool("secret", ["b"])])
def test_a_cached_decision_is_the_decision(principal: str, info: glovebox.ToolInfo) -> None:
    policy, decisions = parse_policy(POLICY), Decisions()
    first = decisions.get(policy, principal, info)
    assert first == decide(policy, principal, info)
    assert decisions.get(policy, principal, info) is first  # the second time, from the cache


def test_an_entry_with_the_same_name_and_version_but_another_manifest_is_decided_afresh() -> None:
    policy, decisions = parse_policy(POLICY), Decisions()
    assert decisions.get(policy, "agent", tool("secret", ["a"])).action == "allow"
    assert decisions.get(policy, "agent", tool("secret", ["b"])).missing_scopes == ("b",)
    assert decisions.get(policy, "stranger", tool("echo", timeout_ms=50)).limits.timeout_ms == 50


def test_a_new_policy_is_decided_afresh(tmp_path: Path) -> None:
    gate = PolicyGate(tmp_path, parse_policy(POLICY))
    info = tool("echo")
    assert gate.admit(CallTrace(policy=gate.current()), info, "agent").action == "allow"
    blocked = parse_policy("version: 1\nrules:\n  - {tool: echo, action: block}\n")
    with pytest.raises(glovebox.PermissionDenied):
        gate.admit(CallTrace(policy=blocked), info, "agent")
    gate.close()


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_gate, "MAX_DECISIONS", 10)
    policy, decisions = parse_policy(POLICY), Decisions()
    info = tool("echo")
    for n in range(25):
        assert decisions.get(policy, f"p{n}", info).action == "allow"
    assert len(decisions._kept) <= 10


def test_a_reloaded_policy_file_and_a_new_registration_change_the_next_call(
    tmp_path: Path, build_guest: Callable[[str], Path]
) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text("version: 1\nrules:\n  - {tool: '*', action: allow}\n")
    with glovebox.Runtime(home=tmp_path / "home", policy=policy_file) as rt:
        rt.register(build_guest("echo"), {"name": "echo"})
        assert rt.call("echo", {"x": 1}).ok
        policy_file.write_text("version: 1\nrules:\n  - {tool: '*', action: allow}\n  - {tool: echo, action: block}\n")
        assert rt.reload_policy()
        assert rt.call("echo", {"x": 1}).code == "permission_denied"
        rt.register(build_guest("echo"), {"name": "other"})
        assert rt.call("other", {"x": 1}).ok
        rt.register(build_guest("echo"), {"name": "other", "version": "2.0.0", "required_scopes": ["x"]})
        assert rt.call("other", {"x": 1}).code == "permission_denied"
