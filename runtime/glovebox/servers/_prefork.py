"""Server workers: ``glovebox serve|mcp --workers N``, N server processes on one listening socket.

The parent binds the socket once and starts N processes (``spawn``) under
uvicorn's multiprocess supervisor; each accepts connections on the same socket
(the kernel hands a new connection to one of the processes waiting in
``accept``), opens its own :class:`~glovebox.Runtime` on the shared home and
serves the whole app. What the processes share lives in the home and is made
for several writers: each process appends its audit rows to a journal file of
its own and the home's fold chains them into the one audit chain; approvals,
the registry and runs are SQLite in WAL mode; a policy file is reloaded by each
process when it changes.

The supervisor checks its workers every half second: a worker that died
(killed, out of memory) or stopped answering its health check is logged
(``Child process [pid] died``) and replaced by a fresh one, and the port keeps
answering through the survivors meanwhile. A worker that fails before it
serves (a bad policy, say) stops the whole server, since every replacement
would fail the same way.

What stays per process: ``/metrics`` counts the calls of the process that
answers the scrape; MCP over HTTP runs stateless (each request stands alone, no
``Mcp-Session-Id``, so a client's next request may land on any worker; there is
no server-to-client stream, so no ``list_changed`` notifications); and the
operator console (``/ui``) is not served, as its sign-in sessions live in one
process's memory (run it on a one-worker server).

:class:`Spec` is everything a worker needs, picklable, so the CLI and a Python
program start the same server.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Spec", "serve_workers", "worker_app"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Spec:
    """What each worker process opens and serves.

    Attributes:
        kind: ``http`` (the HTTP API, ``create_app``) or ``mcp`` (MCP over streamable HTTP).
        home: the home every worker opens (resolved by the caller).
        policy: the policy file, or None for ``GLOVEBOX_POLICY``.
        runtime: further ``Runtime`` keyword arguments (the admission bounds).
        backend: the backend each worker runs calls on (``open_backend``'s name; ``local``:
            the worker's own Runtime) and its options (``processes``).
        app: the app's options (``create_app``'s, or ``McpService``'s plus ``host``).
        logs: where the worker's log records go, as the CLI's ``-v``/``--log-format`` chose:
            ``text`` or ``json`` lines on stderr (the ``glovebox`` logger from INFO up), or
            None for nowhere.
    """

    kind: Literal["http", "mcp"]
    home: str
    policy: str | None
    runtime: dict[str, Any] = field(default_factory=dict)
    backend: tuple[str, dict[str, Any]] = ("local", {})
    app: dict[str, Any] = field(default_factory=dict)
    logs: Literal["text", "json"] | None = None


#: The text log line, as the CLI writes it.
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def serve_workers(
    spec: Spec,
    workers: int,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    log_config: dict[str, Any] | None = None,
) -> None:
    """Serve ``spec`` from ``workers`` processes on ``host:port`` until interrupted (SIGINT/SIGTERM).

    Raises:
        ValueError: ``workers`` is below 1.
        OSError: the address cannot be bound.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG
    from uvicorn.supervisors.multiprocess import Multiprocess

    config = uvicorn.Config(
        functools.partial(worker_app, spec),
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="info",
        log_config=LOGGING_CONFIG if log_config is None else log_config,
    )
    sock = config.bind_socket()
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()


def worker_app(spec: Spec) -> ASGIApp:
    """The app one worker serves, over a Runtime (and backend) of its own, closed when the app stops."""
    from ..runtime._runtime import Runtime

    _log_to(spec.logs)
    stack = ExitStack()
    try:
        runtime = stack.enter_context(Runtime(home=spec.home, policy=spec.policy, **spec.runtime))
        calls: Any = runtime
        name, options = spec.backend
        if name != "local":
            from ..scale._factory import open_backend

            calls = stack.enter_context(open_backend(name, spec.home, spec.policy, **options, **spec.runtime))  # type: ignore[arg-type]
        app = _http(calls, spec.app) if spec.kind == "http" else _mcp(calls, spec.app)
    except BaseException:
        stack.close()
        raise
    return _ClosesAfter(app, calls, stack.close)


def _log_to(logs: Literal["text", "json"] | None) -> None:
    """Route this worker's log records as the CLI routes its own (``cli._base._logging``)."""
    import logging
    import sys

    handler: logging.Handler
    if logs is None:
        handler = logging.NullHandler()
    else:
        from ..telemetry._calllog import JsonFormatter

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter() if logs == "json" else logging.Formatter(TEXT_FORMAT))
        logging.getLogger("glovebox").setLevel(logging.INFO)
    logging.getLogger().addHandler(handler)


def _http(calls: Any, options: dict[str, Any]) -> ASGIApp:
    from ._api import create_app

    app: ASGIApp = create_app(calls, console=False, **options)
    return app


def _mcp(calls: Any, options: dict[str, Any]) -> ASGIApp:
    from ._mcp import McpService, streamable_http_app

    opts = dict(options)
    host = opts.pop("host", "127.0.0.1")
    app: ASGIApp = streamable_http_app(McpService(calls, **opts), host=host, stateless=True)
    return app


class _ClosesAfter:
    """An ASGI app over ``backend`` that runs ``close`` once its lifespan has ended (after the app's
    own shutdown)."""

    def __init__(self, app: ASGIApp, backend: Any, close: Callable[[], None]) -> None:
        self.app, self.backend, self.close = app, backend, close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.close()
