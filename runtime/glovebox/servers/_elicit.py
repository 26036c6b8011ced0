"""Approvals asked of the MCP client's user through ``elicitation/create``.

Off by default. With ``glovebox mcp --approve-via-elicitation --approver P``
(``McpService(approver=P)``), a call answered ``approval_required`` is not
returned to the agent at once: when the client declared the ``elicitation``
capability, the server asks the client's user, acting as principal ``P``, to
approve or deny that exact request (its id, ``tool@version``, the input and its
digest, the expiry) with a form of two fields (``approve``, ``reason``):

- accept with ``approve: true``: ``approve(id, principal=P)``, then the call runs
  again and spends that approval (once);
- accept with ``approve: false``, or decline: ``deny(id, principal=P, reason)``, so
  the call answers ``permission_denied`` with the reason (the one given, else
  "declined in the MCP client");
- cancel, an error from the client, or a client without elicitation: the
  ``approval_required`` result unchanged (the request stays pending for the
  console or ``glovebox approve``).

Never the caller's own request: a call made by ``P`` itself is not asked about
(and the runtime refuses self-approval anyway), nor is anyone asked when the
policy in force does not give ``P`` the approver scope. Handshake-era clients
get a standalone ``elicitation/create`` request; 2026-era clients get it inside
an ``InputRequiredResult`` and answer it when they retry the call.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..core._errors import GloveboxError
from ..model._result import CallResult
from ..runtime._backend import CallBackend

__all__ = ["ELICITATION_KEY", "REQUESTED_SCHEMA", "elicit_approval"]

logger = logging.getLogger("glovebox")

#: The key of the approval form among a 2026-era ``InputRequiredResult``'s requests.
ELICITATION_KEY = "glovebox.approval"
#: Characters of the input shown in the form's message.
INPUT_CHARS = 2000
#: The longest reason kept from the form (it reaches the caller).
REASON_CHARS = 500
#: What the form asks for (flat primitives, as elicitation requires).
REQUESTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Yes: the call runs once with exactly this input. No: it is denied.",
            "default": False,
        },
        "reason": {
            "type": "string",
            "title": "Reason",
            "description": "Why you deny it (the caller is told).",
            "maxLength": REASON_CHARS,
        },
    },
    "required": ["approve"],
}
_ASK = types.ClientCapabilities(elicitation=types.ElicitationCapability())


def _form(result: CallResult, value: Any, principal: str, approver: str) -> types.ElicitRequestFormParams:
    details = result.error.details if result.error is not None else {}
    meta = result.meta
    shown = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(shown) > INPUT_CHARS:
        shown = shown[:INPUT_CHARS] + f"… ({len(shown) - INPUT_CHARS} more characters)"
    message = (
        f"glovebox: {principal!r} asks to call {meta.get('tool')}@{meta.get('version')} "
        f"(request {details.get('approval_id')}, until {details.get('expires_at_iso')}) with this input:\n"
        f"{shown}\n"
        f"Approve it once as {approver!r}, or deny it with a reason."
    )
    return types.ElicitRequestFormParams(message=message, requested_schema=REQUESTED_SCHEMA)


async def _answer(ctx: Any, responses: dict[str, Any] | None, form: types.ElicitRequestFormParams) -> Any:
    """The client's ElicitResult, an InputRequiredResult to send first (2026 era), or None (no answer)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answer = (responses or {}).get(ELICITATION_KEY)
        if answer is None:
            return types.InputRequiredResult(input_requests={ELICITATION_KEY: types.ElicitRequest(params=form)})
        return answer if isinstance(answer, types.ElicitResult) else None
    try:
        return await ctx.session.elicit_form(form.message, form.requested_schema, related_request_id=ctx.request_id)
    except Exception as exc:  # the client answered an error, or went away: the request stays pending
        logger.info("the MCP client did not answer the approval form: %s", exc)
        return None


async def elicit_approval(
    runtime: CallBackend,
    approver: str,
    ctx: Any,
    responses: dict[str, Any] | None,
    call: tuple[str, Any, str],
    result: CallResult,
) -> CallResult | types.InputRequiredResult:
    """Ask the client's user about the ``approval_required`` ``result`` of ``call`` (name, input, principal).

    Returns the call's new result once the user decided, the ``InputRequiredResult``
    a 2026-era client must answer first, or ``result`` unchanged (see the module).
    """
    name, value, principal = call
    session = getattr(ctx, "session", None)
    if principal == approver or session is None or not session.check_client_capability(_ASK):
        return result
    policy = runtime.policy
    if policy.approvals.approver_scope not in policy.scopes_of(approver):
        logger.warning("--approver %r lacks the approver scope under the policy in force: not asking", approver)
        return result
    answer = await _answer(ctx, responses, _form(result, value, principal, approver))
    if answer is None or isinstance(answer, types.InputRequiredResult):
        return answer if answer is not None else result
    if answer.action == "cancel":
        return result
    approval_id = str(result.error.details["approval_id"]) if result.error is not None else ""
    content = answer.content or {}
    if answer.action == "accept" and content.get("approve") is True:
        job = functools.partial(runtime.approve, approval_id, principal=approver)
    else:
        reason = str(content.get("reason") or "").strip()[:REASON_CHARS] or "declined in the MCP client"
        job = functools.partial(runtime.deny, approval_id, principal=approver, reason=reason)
    try:
        await anyio.to_thread.run_sync(job)
    except GloveboxError as exc:  # the approver lost the scope since: the request stays pending
        logger.warning("approving %s through elicitation was refused: %s", approval_id, exc.message)
        return result
    except ValueError:  # decided or expired meanwhile: the call says where it stands now
        pass
    return await runtime.acall(name, value, principal=principal)
