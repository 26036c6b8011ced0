"""The console's test home: a require_approval tool, approvers, auditors, and hostile names."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import glovebox
from glovebox.servers import create_app

#: A principal whose name is markup: the console must show it as text.
XSS_PRINCIPAL = "<img src=x onerror=alert('principal')>"
#: A tool description that is markup.
XSS_DESCRIPTION = "<script>alert('description')</script>Echo, once approved."
KEYS = {
    "admin": "admin-key",
    "boss": "boss-key",
    "agent": "agent-key",
    "nobody": "nobody-key",
    XSS_PRINCIPAL: "xss-key",
}


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _policy() -> str:
    def entry(name: str, scopes: str) -> str:
        return f'  "{name}": {{scopes: [{scopes}], api_key_sha256: [{sha(KEYS[name])}]}}\n'

    return (
        "version: 1\nprincipals:\n"
        + entry("admin", "run, glovebox:approve, glovebox:audit")
        + entry("boss", "run, glovebox:approve, glovebox:audit")
        + entry("agent", "run")
        + entry("nobody", "")
        + entry(XSS_PRINCIPAL, "run")
        + "rules:\n  - {tool: sensitive, action: require_approval}\n  - {tool: plain, action: allow}\n"
        + "approvals: {ttl_s: 600}\naudit: {store_inputs: true}\n"
    )


@dataclass
class Console:
    """A served home: its base URL and the runtime behind it."""

    url: str
    runtime: glovebox.Runtime
    policy: Path

    def call(self, who: str, value: object, tool: str = "sensitive") -> dict[str, object]:
        """Call a tool over the HTTP API as ``who``; the envelope."""
        headers = {"Authorization": f"Bearer {KEYS[who]}"}
        answer = httpx.post(f"{self.url}/v1/tools/{tool}/call", json={"input": value}, headers=headers, timeout=30)
        envelope: dict[str, object] = answer.json()
        return envelope

    def request_approval(self, who: str, value: object) -> str:
        """Make ``who`` call sensitive on ``value`` and return the approval id it is answered with."""
        envelope = self.call(who, value)
        error = envelope["error"]
        assert isinstance(error, dict) and error["code"] == "approval_required", envelope
        approval_id: str = error["details"]["approval_id"]
        return approval_id


@pytest.fixture
def console(
    tmp_path: Path, build_guest: Callable[[str], Path], serve_app: Callable[[object], str]
) -> Iterator[Console]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(_policy())
    with glovebox.Runtime(home=tmp_path / "home", policy=policy) as rt:
        echo = build_guest("echo")
        rt.register(echo, {"name": "sensitive", "description": XSS_DESCRIPTION, "required_scopes": ["run"]})
        rt.register(echo, {"name": "plain", "description": "Echo.", "required_scopes": ["run"]})
        yield Console(serve_app(create_app(rt)), rt, policy)
