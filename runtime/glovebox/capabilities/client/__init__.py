"""The ``client`` capability: a tool asks the MCP client of its call (``glovebox:tool/client@0.1.0``).

A tool called through ``glovebox mcp`` may ask that call's MCP client for a
completion of its model (``sample``: MCP's ``sampling/createMessage``) or for
input from its user (``elicit``: ``elicitation/create``, form mode). Off by
default: a manifest declares what it asks for (``capabilities.client``: a list of
``{request = "sampling"}`` or ``{request = "elicitation"}``), a policy grants it
per tool and principal (``client``: ``request``, ``max_requests``,
``max_request_bytes``, ``max_answer_bytes``, ``max_tokens``), and a call may ask
only what both name. With several matching grants of one kind, the largest bounds apply.

What bounds a request:

- at most ``max_requests`` of each kind per call (default 1);
- its JSON text at most ``max_request_bytes`` (default 16 KiB), the client's answer
  at most ``max_answer_bytes`` (default 64 KiB; a longer one is ``failed``);
- a sampling request's ``maxTokens`` at most ``max_tokens`` (default 1,024; one
  without ``maxTokens`` is sent with that bound);
- an elicitation is form mode only (``mode: "url"`` is ``invalid``: a tool must not
  send the user to a page of its choosing);
- the call's own deadline: the wait for the client counts against ``timeout_ms``.

Who answers: whoever made the call put a :class:`ClientRequests` in force with
:func:`asking_client` (``glovebox mcp`` does, for the client of each
``tools/call``; a context variable carries it to the thread that runs the call).
With none (a call from the Python API, the HTTP API, a worker process of a pool),
or a client that did not declare the capability, the host function answers
``unsupported``: the tool decides what to do without the client.

Every request is one entry of the call's record ``client`` (``request``, ``bytes``,
``answer_bytes``, ``result``, ``ms``, and an elicitation's ``action`` or a
sampling's ``model``; never the messages or the user's answer), kept in the audit
row's ``egress.client``; a refused one is also a denial.

The WIT interface::

    variant client-error { denied(string), unsupported(string), invalid(string), timeout(string), failed(string) }
    sample: func(request: string) -> result<string, client-error>;
    elicit: func(request: string) -> result<string, client-error>;

``request`` is the JSON of the MCP request's ``params``; the answer is the JSON of
the client's result (``CreateMessageResult``, ``ElicitResult``).
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, Protocol

from pydantic import Field

from ...core._carried import carried
from ...core._frozen import Frozen
from ...model._capability import Capability, HostFunction

__all__ = [
    "CAPABILITY",
    "CLIENT_INTERFACE",
    "ClientCapability",
    "ClientGrant",
    "ClientRequestError",
    "ClientRequests",
    "ClientRule",
    "asking_client",
    "current_client",
]

CLIENT_INTERFACE = "glovebox:tool/client@0.1.0"
logger = logging.getLogger("glovebox")
_ERRORS = frozenset({"denied", "unsupported", "invalid", "timeout", "failed"})
#: The MCP method of each kind of request.
METHODS = {"sampling": "sampling/createMessage", "elicitation": "elicitation/create"}

WIT = """\
  variant client-error { denied(string), unsupported(string), invalid(string), timeout(string), failed(string) }
  sample: func(request: string) -> result<string, client-error>;
  elicit: func(request: string) -> result<string, client-error>;
"""

Request = Literal["sampling", "elicitation"]


class ClientRule(Frozen):
    """A kind of request a tool declares it makes of the MCP client."""

    request: Request = Field(description="sampling (the client's model) or elicitation (the client's user).")


class ClientGrant(ClientRule):
    """A kind of request granted to matching calls, with its bounds."""

    max_requests: int = Field(1, ge=1, le=64, description="Requests of this kind one call may make.")
    max_request_bytes: int = Field(
        16 * 1024, gt=0, le=1024 * 1024, description="Bytes of one request's JSON text, at most."
    )
    max_answer_bytes: int = Field(
        64 * 1024, gt=0, le=4 * 1024 * 1024, description="Bytes of the client's answer (JSON), at most."
    )
    max_tokens: int = Field(1024, gt=0, description="The largest maxTokens a sampling request may ask for.")


class ClientRequestError(Exception):
    """Why the client gave no answer: ``kind`` is one of the ``client-error`` cases."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        if kind not in _ERRORS:
            raise ValueError(f"unknown client-error kind {kind!r}")
        self.kind = kind
        self.reason = reason


class ClientRequests(Protocol):
    """Who answers a call's requests to its MCP client (``glovebox mcp``: that call's client)."""

    def ask(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send ``method`` with ``params`` and wait at most ``timeout_s`` for the result.

        Raises:
            ClientRequestError: no answer (``unsupported``, ``invalid``, ``timeout``, ``failed``).
        """
        ...


_CLIENT: contextvars.ContextVar[ClientRequests | None] = carried(
    contextvars.ContextVar("glovebox_client", default=None)
)


@contextmanager
def asking_client(client: ClientRequests) -> Iterator[None]:
    """Let the calls made in this block ask ``client`` (when granted the capability)."""
    token = _CLIENT.set(client)
    try:
        yield
    finally:
        _CLIENT.reset(token)


def current_client() -> ClientRequests | None:
    """Who answers the current call's client requests (None: nobody)."""
    return _CLIENT.get()


class ClientAccess:
    """The ``client`` capability of one call: the kinds declared ∩ granted, and what was used."""

    def __init__(self, grants: dict[str, ClientGrant]) -> None:
        self.grants = grants
        self.used: dict[str, int] = {}

    def answer(self, state: Any, kind: str, text: str) -> Any:
        from wasmtime.component import Variant

        started = time.monotonic()
        entry: dict[str, Any] = {"request": kind, "bytes": len(text.encode("utf-8", "replace"))}
        grant = self.grants.get(kind)
        refusal = self._refusal(grant, kind)
        if refusal is not None:
            state.add_denial({"capability": "client", "request": kind, "reason": refusal})
            state.add_record("client", {**entry, "result": "denied"})
            return Variant("denied", refusal)
        assert grant is not None
        self.used[kind] = self.used.get(kind, 0) + 1
        try:
            params = _params(kind, text, grant)
            answer, detail = self._ask(kind, params, grant, state)
        except Exception as exc:  # the answerer's own failure is the tool's `failed`, never a trap
            if not isinstance(exc, ClientRequestError):
                logger.warning("asking the MCP client failed: %r", exc)
                exc = ClientRequestError("failed", "the MCP client gave no answer")
            ms = round((time.monotonic() - started) * 1000, 3)
            state.add_record("client", {**entry, "result": exc.kind, "ms": ms})
            if exc.kind == "timeout":
                state.timed_out = True
            return Variant(exc.kind, state.clip(exc.reason))
        ms = round((time.monotonic() - started) * 1000, 3)
        state.add_record("client", {**entry, "answer_bytes": len(answer.encode()), "result": "ok", "ms": ms, **detail})
        return answer

    def _refusal(self, grant: ClientGrant | None, kind: str) -> str | None:
        if grant is None:
            return f"{kind} requests to the MCP client are not granted to this call"
        if self.used.get(kind, 0) >= grant.max_requests:
            return f"this call may make at most {grant.max_requests} {kind} request(s) of the MCP client"
        return None

    def _ask(self, kind: str, params: dict[str, Any], grant: ClientGrant, state: Any) -> tuple[str, dict[str, Any]]:
        client = current_client()
        if client is None:
            raise ClientRequestError(
                "unsupported",
                "no MCP client is waiting on this call (not made through glovebox mcp, or run in a worker process)",
            )
        timeout_s = state.remaining_s()
        if timeout_s <= 0:
            raise ClientRequestError("timeout", "the call has no time left to ask its MCP client")
        result = client.ask(METHODS[kind], params, timeout_s)
        answer = json.dumps(result, ensure_ascii=False)
        if len(answer.encode("utf-8")) > grant.max_answer_bytes:
            raise ClientRequestError("failed", f"the client's answer is over {grant.max_answer_bytes} bytes")
        if kind == "elicitation":
            detail = {"action": str(result.get("action", ""))[:16]}
        else:
            detail = {"model": str(result.get("model", ""))[:128]}
        return answer, detail


def _params(kind: str, text: str, grant: ClientGrant) -> dict[str, Any]:
    """The request's ``params`` from the guest's JSON text, within the grant."""
    if len(text.encode("utf-8", "replace")) > grant.max_request_bytes:
        raise ClientRequestError("invalid", f"the request is over {grant.max_request_bytes} bytes")
    try:
        params = json.loads(text)
    except ValueError as exc:
        raise ClientRequestError("invalid", f"the request is not JSON: {exc}") from None
    if not isinstance(params, dict):
        raise ClientRequestError("invalid", "the request is a JSON object (the MCP request's params)")
    if kind == "sampling":
        tokens = params.setdefault("maxTokens", grant.max_tokens)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or not 0 < tokens <= grant.max_tokens:
            raise ClientRequestError("invalid", f"maxTokens is an integer from 1 to {grant.max_tokens}")
    elif params.get("mode", "form") != "form":
        raise ClientRequestError("invalid", "only form elicitation is allowed (never a URL of the tool's choosing)")
    return params


def _answer(kind: str) -> Any:
    def answer(state: Any, text: str) -> Any:
        from wasmtime.component import Variant

        bound = None if state is None else state.capability("client")
        if bound is not None:
            return bound.answer(state, kind, text)
        reason = "the client capability is not granted to this call"
        if state is not None:
            state.add_denial({"capability": "client", "request": kind, "reason": reason})
        return Variant("denied", reason)

    return answer


def _failed() -> Any:
    from wasmtime.component import Variant

    return Variant("failed", "host error")


class ClientCapability(Capability):
    """Sampling and elicitation asked of the MCP client that made the call."""

    name = "client"
    interface = CLIENT_INTERFACE
    wit = WIT

    def manifest_fields(self) -> Mapping[str, Any]:
        return {"client": (list[ClientRule], Field([], description="Requests the tool makes of its MCP client."))}

    def grant_fields(self) -> Mapping[str, Any]:
        return {"client": (list[ClientGrant], Field([], description="Requests of the MCP client granted."))}

    def functions(self) -> Sequence[HostFunction]:
        from ...sandbox._hostabi import lower_result, string_args

        def lower(answer: Any, slot: Any) -> None:
            lower_result(answer, slot, ok="text", errors=_ERRORS)

        return (
            HostFunction("sample", string_args("request"), _answer("sampling"), lower, _failed()),
            HostFunction("elicit", string_args("request"), _answer("elicitation"), lower, _failed()),
        )

    def bind(self, declared: Any, grants: Any, context: Any) -> Any:
        if not declared.client or not grants.client:
            return None
        kinds = {rule.request for rule in declared.client}
        chosen: dict[str, ClientGrant] = {}
        for grant in grants.client:
            if grant.request in kinds:
                chosen[grant.request] = _widest(chosen.get(grant.request), grant)
        return ClientAccess(chosen) if chosen else None


def _widest(a: ClientGrant | None, b: ClientGrant) -> ClientGrant:
    if a is None:
        return b
    bounds = ("max_requests", "max_request_bytes", "max_answer_bytes", "max_tokens")
    return b.model_copy(update={name: max(getattr(a, name), getattr(b, name)) for name in bounds})


CAPABILITY = ClientCapability()
