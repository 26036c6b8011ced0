"""MCP servers' tools: the descriptor a ``mcp-remote`` tool is stored as, its sessions and its calls.

- :mod:`._proxy` — the descriptor, a one-shot exchange (listing at import) and the
  output and error rules of a call (the official ``mcp`` SDK, loaded only when used).
- :mod:`._headers` — the server URL and the secret-carrying headers.
- :mod:`._connect` — a client to a server, over streamable HTTP or stdio.
- :mod:`._stdio` — a local server's child process: clean environment, bounded pipes.
- :mod:`._bwrap` — its OS sandbox (bubblewrap), where the machine can run it.
- :mod:`._egress` — the sandboxed server's one way out: an HTTP proxy enforcing the
  call's granted HTTP rules (``grants.http``), reached through a Unix socket.
- :mod:`._sessions` — one session per (server, principal), supervised: lazy start,
  restart backoff, idle stop, expiry, deadlines extended by progress.
- :mod:`._call` — one tool call on its session.
- :mod:`._relay` — :func:`relay_progress`, where a call's progress notifications go, and
  :class:`Cancellation` / :func:`cancel_with`, how its caller cancels it.

Imports: :mod:`glovebox.core`, :mod:`glovebox.model`, :mod:`glovebox.capabilities`
(the HTTP rule matcher and the SSRF address check, for the egress proxy),
:mod:`glovebox.sandbox` (``clip``: the one bounded scrub of a record) and
:mod:`glovebox.telemetry` (the call's trace context, sent only with ``propagate_trace``).
"""

from ._relay import Cancellation, ProgressCallback, cancel_with, relay_progress

__all__ = ["Cancellation", "ProgressCallback", "cancel_with", "relay_progress"]
