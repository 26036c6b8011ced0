"""The doors agents come through: an MCP server and an HTTP API, and the operator console.

No module of this package imports the package itself (``from . import x``):
``__init__`` loads ``._api`` lazily, so that would be an import cycle.

Both carry the same checks and the same envelope as ``Runtime.call``. They
import their frameworks (``mcp``, ``starlette``, ``uvicorn``, ``jinja2``) lazily:
install them with ``pip install 'glovebox-runtime[serve]'``.

- :mod:`._api` — the HTTP API's app (``create_app``): routes, middleware, exception handlers;
  :mod:`._apitools` its routes; :mod:`._auth` API keys; :mod:`._apierrors` its error envelopes;
  :mod:`._metrics` ``/metrics``.
- :mod:`._identity` — who is asking (Starlette's ``AuthenticationMiddleware``: keys, sessions);
  :mod:`._refusals` — ``Forbidden``, ``NotFound``, ... and the ``requires(scope)`` guard;
  :mod:`._guards` — the security headers on every answer, the console's CSRF and origin checks.
- :mod:`._console` — the console's pages under ``/ui`` (templates and stylesheet in ``ui/``), one
  router per area (``_uisignin``, ``_uitools``, ``_uiaudit``, ``_uiapprovals``, ``_uiruns``,
  ``_uihealth``; ``_uibase`` what they share); :mod:`._sessions` its sessions and CSRF tokens.
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
