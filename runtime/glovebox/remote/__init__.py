"""Remote MCP tools: the descriptor a ``mcp-remote`` tool is stored as, and the proxy.

- :mod:`._proxy` — the descriptor, and the call proxied to the remote server
  (the official ``mcp`` SDK, loaded only when a remote tool is called).
- :mod:`._headers` — the server URL and the secret-carrying headers.

Imports: :mod:`glovebox.core`, :mod:`glovebox.model`, :mod:`glovebox.capabilities`,
:mod:`glovebox.sandbox` (``clip``: the one bounded scrub of a record) and
:mod:`glovebox.telemetry` (the call's trace context, sent only with ``propagate_trace``).
"""
