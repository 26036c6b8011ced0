"""Policies grant HTTP per principal; the capability enforces exactly that grant."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import glovebox

from ..capabilities.test_http import Server, local_rule, server  # noqa: F401  (fixture)

BuildGuest = Callable[[str], Path]


def write_policy(path: Path, server: Server, timeout_ms: int = 5000) -> Path:  # noqa: F811
    policy = {
        "version": 1,
        "principals": {"reader": {"scopes": []}, "stranger": {"scopes": []}},
        "rules": [{"tool": "hc", "action": "allow"}],
        "grants": [{"tool": "hc", "principals": ["reader"], "http": [local_rule(server)]}],
        "limits": [{"tool": "hc", "principals": ["stranger"], "limits": {"timeout_ms": timeout_ms}}],
    }
    path.write_text(json.dumps(policy))  # JSON is YAML
    return path


def test_policy_grants_http_to_one_principal_only(
    _isolated_env: Path,
    build_guest: BuildGuest,
    server: Server,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    policy = write_policy(tmp_path / "policy.yaml", server)
    # Constructor grants are ignored once a policy governs.
    with glovebox.Runtime(home=_isolated_env, policy=policy, grants={"http": [local_rule(server)]}) as rt:
        rt.register(build_guest("http_client"), {"name": "hc", "capabilities": {"http": [local_rule(server)]}})
        url = server.url("/users/7")
        granted = rt.call("hc", {"method": "GET", "url": url}, principal="reader")
        assert granted.ok and granted.output["status"] == "ok", granted.to_dict()
        assert granted.meta["egress"][0]["status"] == 200
        refused = rt.call("hc", {"method": "GET", "url": url}, principal="stranger")
        assert refused.ok and refused.output["status"] == "denied", refused.to_dict()
        assert refused.meta["denials"][0]["reason"] == "the http capability is not granted to this call"
    assert [seen["path"] for seen in server.seen] == ["/users/7"]


def test_policy_limit_override_tightens_the_manifest(
    _isolated_env: Path,
    build_guest: BuildGuest,
    server: Server,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    policy = write_policy(tmp_path / "policy.yaml", server, timeout_ms=50)
    with glovebox.Runtime(home=_isolated_env, policy=policy) as rt:
        rt.register(build_guest("loop_forever"), {"name": "hc", "limits": {"timeout_ms": 10_000, "fuel": 10**10}})
        result = rt.call("hc", {}, principal="stranger")
    assert result.code == "timeout"
    assert result.error is not None and result.error.details == {"timeout_ms": 50}
