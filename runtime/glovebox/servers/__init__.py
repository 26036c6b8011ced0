"""The doors agents come through: an MCP server and an HTTP API, and the operator console.

Both carry the same checks and the same envelope as ``Runtime.call``. They
import their frameworks (``mcp``, ``starlette``, ``uvicorn``, ``jinja2``) lazily:
install them with ``pip install 'glovebox-runtime[serve]'``.

- :mod:`._api` — the HTTP API (``create_app``); :mod:`._auth` API keys; :mod:`._apierrors`
  its error envelopes; :mod:`._metrics` ``/metrics``.
- :mod:`._console` — the console's pages under ``/ui`` (templates and stylesheet in ``ui/``);
  :mod:`._sessions` its sign-in sessions and CSRF tokens.
- :mod:`._mcp` — the MCP server.
"""

import typing

__all__ = ["SERVE_HINT", "create_app", "missing_serve_dependency"]

SERVE_HINT = "the servers need the 'serve' extra: pip install 'glovebox-runtime[serve]'"


def missing_serve_dependency(*modules: str) -> str | None:
    """The first of ``modules`` that cannot be imported, or None when all are present."""
    import importlib.util

    for module in modules:
        if importlib.util.find_spec(module) is None:
            return module
    return None


def __getattr__(name: str) -> typing.Any:
    # The frameworks load on first use, so `import glovebox.servers` stays cheap.
    if name == "create_app":
        from ._api import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
