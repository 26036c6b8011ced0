"""The ``client`` capability: a tool asks the MCP client of its call (sampling, elicitation), within its grant.

The guest is ``tests/guests/client_asker.c``; who answers is an in-memory client made
current with ``asking_client`` (``glovebox mcp`` puts the real one there, see
``tests/servers/test_mcp_client_requests.py``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.capabilities.client import ClientRequestError, asking_client

pytestmark = [pytest.mark.system, pytest.mark.usefixtures("sandbox_path")]  # native core and Python path

SAMPLE = json.dumps({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 50})
FORM = json.dumps({"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}})


class Client:
    """Answers every request with ``answer`` (or raises it), and keeps what it was asked."""

    def __init__(self, answer: Any = None, wait_s: float = 0) -> None:
        self.answer = answer if answer is not None else {"role": "assistant", "model": "m", "content": {}}
        self.wait_s = wait_s
        self.asked: list[tuple[str, dict[str, Any], float]] = []

    def ask(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.asked.append((method, params, timeout_s))
        if self.wait_s:
            threading.Event().wait(min(self.wait_s, timeout_s))
            raise ClientRequestError("timeout", "no answer in time")
        if isinstance(self.answer, Exception):
            raise self.answer
        return dict(self.answer)


@pytest.fixture
def asker(tmp_path: Path, build_guest: Callable[[str], Path]) -> Callable[..., glovebox.Runtime]:
    def make(*grants: dict[str, Any], declared: tuple[str, ...] = ("sampling", "elicitation")) -> glovebox.Runtime:
        policy = {"version": 1, "defaults": {"action": "allow"}, "grants": [{"tool": "asker", "client": list(grants)}]}
        home = tmp_path / "-".join(["home", *declared])  # one home per declaration (a tool's manifest is fixed)
        rt = glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(policy))
        manifest = {
            "name": "asker",
            "capabilities": {"client": [{"request": kind} for kind in declared]},
            "limits": {"timeout_ms": 2000},
        }
        rt.register(build_guest("client_asker"), manifest=manifest)
        return rt

    return make


def ask(rt: glovebox.Runtime, kind: str, request: str, times: int = 1) -> tuple[list[dict[str, Any]], Any]:
    done = rt.call("asker", {"kind": kind, "request": request, "times": times})
    assert done.ok, done.to_dict()
    return list(done.output["answers"]), done


def test_a_granted_request_reaches_the_client_and_its_answer_the_tool(asker: Callable[..., glovebox.Runtime]) -> None:
    client = Client({"role": "assistant", "model": "test-model", "content": {"type": "text", "text": "yo"}})
    with asker({"request": "sampling"}) as rt, asking_client(client):
        [answer], done = ask(rt, "sample", SAMPLE)
    assert answer["status"] == "ok" and json.loads(answer["text"])["content"]["text"] == "yo"
    [(method, params, timeout_s)] = client.asked
    assert method == "sampling/createMessage" and params["maxTokens"] == 50 and 0 < timeout_s <= 2
    [entry] = done.meta["client"]
    assert entry["request"] == "sampling" and entry["result"] == "ok" and entry["model"] == "test-model"


def test_off_by_default_and_only_what_both_the_manifest_and_the_grant_name(
    asker: Callable[..., glovebox.Runtime],
) -> None:
    client = Client()
    with asker() as rt, asking_client(client):  # no grant
        [answer], done = ask(rt, "sample", SAMPLE)
    assert answer["status"] == "denied" and done.meta["denials"][0]["capability"] == "client"
    with asker({"request": "sampling"}, declared=("elicitation",)) as rt, asking_client(client):  # not declared
        [answer], _ = ask(rt, "sample", SAMPLE)
    assert answer["status"] == "denied"
    with asker({"request": "sampling"}) as rt, asking_client(client):  # granted sampling, asks elicitation
        [answer], _ = ask(rt, "elicit", FORM)
    assert answer["status"] == "denied" and client.asked == []


def test_the_grants_bounds_hold(asker: Callable[..., glovebox.Runtime]) -> None:
    client = Client({"action": "accept", "content": {"name": "x" * 500}})
    grant = {"request": "elicitation", "max_requests": 2, "max_request_bytes": 200, "max_answer_bytes": 300}
    with asker(grant, {"request": "sampling", "max_tokens": 40}) as rt, asking_client(client):
        answers, done = ask(rt, "elicit", FORM, times=3)
        assert [a["status"] for a in answers] == ["failed", "failed", "denied"]  # the answer is over 300 bytes
        assert "over 300 bytes" in answers[0]["text"] and "at most 2" in answers[2]["text"]
        assert [e["result"] for e in done.meta["client"]] == ["failed", "failed", "denied"]
        [too_long], _ = ask(rt, "elicit", json.dumps({"message": "x" * 300, "requestedSchema": {}}))
        assert too_long["status"] == "invalid" and "over 200 bytes" in too_long["text"]
        [url], _ = ask(rt, "elicit", json.dumps({"mode": "url", "message": "m", "url": "https://evil.example"}))
        assert url["status"] == "invalid" and "form" in url["text"]
        [tokens], _ = ask(rt, "sample", SAMPLE)  # maxTokens 50 over the grant's 40
        assert tokens["status"] == "invalid" and "maxTokens" in tokens["text"]
        [not_json], _ = ask(rt, "sample", "[1, 2]")
        assert not_json["status"] == "invalid"
    assert len(client.asked) == 2  # only the two elicitations within bounds reached the client
    sent = Client()
    with asker({"request": "sampling", "max_tokens": 64}) as rt, asking_client(sent):
        ask(rt, "sample", json.dumps({"messages": []}))
    assert sent.asked[0][1]["maxTokens"] == 64  # none asked: the grant's bound is sent


def test_with_no_client_waiting_the_tool_is_told_unsupported(asker: Callable[..., glovebox.Runtime]) -> None:
    with asker({"request": "sampling"}) as rt:
        [answer], done = ask(rt, "sample", SAMPLE)
    assert answer["status"] == "unsupported" and "no MCP client" in answer["text"]
    assert done.meta["client"][0]["result"] == "unsupported"


def test_a_client_that_fails_or_never_answers(asker: Callable[..., glovebox.Runtime]) -> None:
    with asker({"request": "sampling"}) as rt:
        with asking_client(Client(RuntimeError("the client broke"))):
            [answer], _ = ask(rt, "sample", SAMPLE)
        assert answer["status"] == "failed" and "broke" not in answer["text"]  # its own words stay in the host log
        started = time.monotonic()
        with asking_client(Client(wait_s=10)):
            done = rt.call("asker", {"kind": "sample", "request": SAMPLE})
        assert time.monotonic() - started < 5  # bounded by the call's 2 s deadline
        assert done.code == "timeout", done.to_dict()


def test_the_python_helper(tmp_path: Path, build_py: Callable[[Path], Path]) -> None:
    guest = Path(__file__).parents[1] / "guests" / "py_client.py"
    policy = {
        "version": 1,
        "defaults": {"action": "allow"},
        "grants": [{"tool": "*", "client": [{"request": "sampling"}]}],
    }
    with glovebox.Runtime(home=tmp_path / "home", policy=glovebox.Policy.model_validate(policy)) as rt:
        manifest = {
            "name": "py-client",
            "capabilities": {"client": [{"request": "sampling"}, {"request": "elicitation"}]},
        }
        rt.register(build_py(guest), manifest=manifest)
        model = Client({"role": "assistant", "model": "m", "content": {"type": "text", "text": "hello"}})
        with asking_client(model):
            sampled = rt.call("py-client", {"kind": "sample", "params": {"messages": []}})
            elicited = rt.call("py-client", {"kind": "elicit", "params": {"message": "m", "requestedSchema": {}}})
    assert sampled.ok and sampled.output["answer"]["content"]["text"] == "hello", sampled.to_dict()
    assert elicited.ok and elicited.output == {"error": "denied", "reason": elicited.output["reason"]}
    assert "not granted" in elicited.output["reason"]
