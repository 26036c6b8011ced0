"""Approvals asked of the MCP client's user (``glovebox mcp --approve-via-elicitation``), with the official client."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import glovebox
from glovebox.cli._main import cli
from glovebox.servers._elicit import REQUESTED_SCHEMA
from glovebox.servers._mcp import McpService

from .test_mcp import envelope, server_env, stdio_args

pytestmark = pytest.mark.anyio

#: boss may approve; agent may call sensitive once approved (MCP_RULES).
BOSS = "principals:\n  boss:\n    scopes: [glovebox:approve]\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def approval_home(mcp_home: tuple[Path, Path]) -> tuple[Path, Path]:
    home, policy = mcp_home
    policy.write_text(policy.read_text().replace("principals:\n", BOSS, 1))
    return home, policy


class User:
    """The client's user: answers every approval form with ``answer``, and keeps what it was shown."""

    def __init__(self, action: str, content: dict[str, Any] | None = None) -> None:
        self.action, self.content = action, content
        self.asked: list[types.ElicitRequestFormParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        return types.ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


@asynccontextmanager
async def elicit_client(
    home: Path, policy: Path, user: User | None, *args: str, mode: str = "auto"
) -> AsyncIterator[Client]:
    argv = stdio_args(home, policy, "--principal", "agent", "--approve-via-elicitation", "--approver", "boss", *args)
    params = StdioServerParameters(command=sys.executable, args=argv, env=server_env())
    async with Client(params, mode=mode, cache=None, elicitation_callback=user, read_timeout_seconds=60) as client:  # type: ignore[arg-type]
        yield client


def last_record(home: Path) -> dict[str, Any]:
    with glovebox.Runtime(home=home) as rt:
        *_, record = rt.audit.records()
    return record


def pending(home: Path, policy: Path) -> list[str]:
    with glovebox.Runtime(home=home, policy=policy) as rt:
        return [a.id for a in rt.pending_approvals()]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_accepted_form_approves_the_call_once_as_the_approver(
    approval_home: tuple[Path, Path], mode: str
) -> None:
    home, policy = approval_home
    user = User("accept", {"approve": True})
    async with elicit_client(home, policy, user, mode=mode) as client:
        done = await client.call_tool("sensitive", {"amount": "<b>42</b>"})
        assert done.is_error is False, envelope(done)
        assert envelope(done)["output"] == {"amount": "<b>42</b>"}
        [form] = user.asked
        assert form.requested_schema == REQUESTED_SCHEMA
        assert "'agent' asks to call sensitive@" in form.message and '"<b>42</b>"' in form.message
        record = last_record(home)
        assert record["outcome"] == "ok" and json.loads(record["egress"])["approval"]["by"] == "boss"
        # The approval was spent: the same call asks again.
        again = await client.call_tool("sensitive", {"amount": "<b>42</b>"})
        assert again.is_error is False and len(user.asked) == 2
    assert pending(home, policy) == []


async def test_a_declined_form_denies_the_call(approval_home: tuple[Path, Path]) -> None:
    home, policy = approval_home
    async with elicit_client(home, policy, User("decline")) as client:
        refused = envelope(await client.call_tool("sensitive", {"q": 1}))
    assert refused["error"]["code"] == "permission_denied"
    assert refused["error"]["details"]["denied_by"] == "boss"
    assert refused["error"]["details"]["reason"] == "declined in the MCP client"


async def test_a_form_answered_no_denies_with_its_reason(approval_home: tuple[Path, Path]) -> None:
    home, policy = approval_home
    user = User("accept", {"approve": False, "reason": "not on a Friday"})
    async with elicit_client(home, policy, user, mode="legacy") as client:
        refused = envelope(await client.call_tool("sensitive", {"q": 2}))
    assert refused["error"]["code"] == "permission_denied"
    assert refused["error"]["message"].endswith("not on a Friday")


async def test_a_cancelled_form_leaves_the_request_pending(approval_home: tuple[Path, Path]) -> None:
    home, policy = approval_home
    async with elicit_client(home, policy, User("cancel")) as client:
        waiting = envelope(await client.call_tool("sensitive", {"q": 3}))
    assert waiting["error"]["code"] == "approval_required"
    assert pending(home, policy) == [waiting["error"]["details"]["approval_id"]]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_without_elicitation_gets_approval_required(approval_home: tuple[Path, Path], mode: str) -> None:
    home, policy = approval_home
    async with elicit_client(home, policy, None, mode=mode) as client:
        waiting = envelope(await client.call_tool("sensitive", {"q": 4}))
    assert waiting["error"]["code"] == "approval_required"
    assert len(pending(home, policy)) == 1


async def test_the_approver_is_never_asked_about_its_own_call(approval_home: tuple[Path, Path]) -> None:
    home, policy = approval_home
    anyone = policy.read_text().replace("principals: [agent]\n    action: require_approval", "action: require_approval")
    policy.write_text(anyone)
    user = User("accept", {"approve": True})
    with glovebox.Runtime(home=home, policy=policy) as rt:
        service = McpService(rt, principal="boss", approver="boss")
        async with Client(service.server, cache=None, elicitation_callback=user) as client:  # type: ignore[arg-type]
            own = envelope(await client.call_tool("sensitive", {"q": 5}))
        assert own["error"]["code"] == "approval_required" and user.asked == []
        # An approver the policy does not give the scope asks nobody either.
        service = McpService(rt, principal="agent", approver="agent-without-scope")
        async with Client(service.server, cache=None, elicitation_callback=user) as client:  # type: ignore[arg-type]
            other = envelope(await client.call_tool("sensitive", {"q": 6}))
        assert other["error"]["code"] == "approval_required" and user.asked == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--approve-via-elicitation"], "needs --approver PRINCIPAL"),
        (["--approver", "boss"], "--approver is for --approve-via-elicitation"),
        (["--principal", "boss", "--approve-via-elicitation", "--approver", "boss"], "nobody approves their own"),
        (["--transport", "http", "--approve-via-elicitation", "--approver", "boss"], "is for stdio"),
    ],
)
def test_the_cli_refuses_an_elicitation_set_up_that_could_self_approve(
    approval_home: tuple[Path, Path], args: list[str], says: str
) -> None:
    home, policy = approval_home
    answer = CliRunner().invoke(cli, ["--home", str(home), "--policy", str(policy), "mcp", *args], prog_name="glovebox")
    assert answer.exit_code == 2 and "error [usage_error]" in answer.output and says in answer.output
