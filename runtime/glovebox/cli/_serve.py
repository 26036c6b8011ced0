"""``glovebox serve``, ``glovebox mcp`` and ``glovebox export``: thin commands over glovebox.servers."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from ..runtime._admission import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_QUEUED
from ..sandbox._compute import DEFAULT_MAX_RUNNING
from ._base import LOG_FORMAT_KEY, CliError, log_config, open_runtime

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from ..runtime._backend import CallBackend
    from ..runtime._runtime import Runtime
    from ..scale._factory import BackendName

__all__ = ["export", "mcp", "serve"]


def _require(*modules: str) -> None:
    from ..servers import SERVE_HINT, missing_serve_dependency

    missing = missing_serve_dependency(*modules)
    if missing is not None:
        raise CliError("missing_extra", f"{missing} is not installed; {SERVE_HINT}")


def _admission_options(command: F) -> F:
    """``--max-in-flight``, ``--max-queued`` and ``--max-running``: the Runtime's admission and compute bounds."""
    command = click.option(
        "--max-running",
        default=DEFAULT_MAX_RUNNING,
        show_default=True,
        type=click.IntRange(1),
        help="Admitted calls that run Python or wasm at once (a call waiting on the network gives its slot up).",
    )(command)
    command = click.option(
        "--max-queued",
        default=DEFAULT_MAX_QUEUED,
        show_default=True,
        type=click.IntRange(0),
        help="Calls that may wait for a slot; beyond them a call answers overloaded.",
    )(command)
    return click.option(
        "--max-in-flight",
        default=DEFAULT_MAX_IN_FLIGHT,
        show_default=True,
        type=click.IntRange(1),
        help="Calls run at once (a call waiting on an upstream counts).",
    )(command)


def _check_can_serve(rt: Runtime, insecure_anonymous: bool) -> None:
    """Refuse before any worker starts, as the server itself would."""
    from ..servers._auth import check_can_serve

    check_can_serve(rt, insecure_anonymous)


_PROCESSES_HELP = "Worker processes running calls (default: CPU count; 1: calls run in the server process)."


def _backend_options(command: F) -> F:
    """``--backend``, ``--address``, ``--replicas``: where calls run (local processes or a Ray cluster)."""
    command = click.option(
        "--replicas", default=2, show_default=True, type=click.IntRange(1), help="Ray replicas (--backend ray)."
    )(command)
    command = click.option("--address", help="The Ray cluster to join (--backend ray; default: start a local one).")(
        command
    )
    return click.option(
        "--backend",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="local: this host (--processes); ray: replicas on a Ray cluster (pip install 'glovebox-runtime[ray]').",
    )(command)


def _backend_choice(
    processes: int | None, backend: str, address: str | None, replicas: int
) -> tuple[BackendName, dict[str, Any]]:
    """The flags as ``open_backend`` arguments: a name and its options (parsing only)."""
    if backend == "ray":
        if processes is not None:
            raise click.UsageError("--processes is for --backend local; Ray runs --replicas")
        return "ray", {"replicas": replicas, "address": address}
    if address is not None:
        raise click.UsageError("--address is for --backend ray")
    count = processes if processes is not None else os.cpu_count() or 1
    return ("local", {}) if count == 1 else ("processes", {"processes": count})


@contextmanager
def _calls(
    rt: Runtime, processes: int | None, backend: str, address: str | None, replicas: int, **bounds: Any
) -> Iterator[CallBackend]:
    """The backend the server runs calls on, on ``rt``'s home and policy: ``rt`` itself for one
    process, else what :func:`glovebox.open_backend` opens (its workers hold the ``bounds``)."""
    name, chosen = _backend_choice(processes, backend, address, replicas)
    if name == "local":
        yield rt
        return
    from ..scale._factory import open_backend

    try:
        opened = open_backend(name, rt.home, rt.policy_path, **chosen, **bounds)
    except ImportError as exc:
        raise CliError("missing_extra", str(exc)) from exc
    with opened:
        yield opened


_WORKERS_HELP = (
    "Server processes answering on the port, each with its own Runtime on the home "
    "(default: 1; a dead one is replaced). With N > 1, --processes defaults to 1"
)


def _workers_option(command: F) -> F:
    """``--workers N``: N server processes on one port (``servers._prefork``)."""
    return click.option("--workers", default=1, show_default=True, type=click.IntRange(1), help=_WORKERS_HELP + ".")(
        command
    )


def _serve_workers(
    ctx: click.Context,
    kind: Literal["http", "mcp"],
    workers: int,
    where: tuple[str, int],
    choice: tuple[int | None, str, str | None, int],
    bounds: dict[str, Any],
    app: dict[str, Any],
) -> None:
    """Check as one server would, then serve ``app`` from ``workers`` processes (``choice``: the backend flags)."""
    from ..servers._prefork import Spec, serve_workers

    processes, backend, address, replicas = choice
    if backend != "local":
        raise click.UsageError("--workers is for --backend local (a Ray deployment scales with --replicas)")
    name, chosen = _backend_choice(processes or 1, backend, address, replicas)
    with open_runtime(ctx, **bounds) as rt:
        _check_can_serve(rt, bool(app.get("insecure_anonymous")))
        home, policy = str(rt.home), rt.policy_path
    fmt = ctx.meta.get(LOG_FORMAT_KEY, "text")
    logs = fmt if fmt == "json" or ctx.find_root().params.get("verbose") else None
    spec = Spec(kind, home, None if policy is None else str(policy), bounds, (name, chosen), app, logs)
    serve_workers(spec, workers, host=where[0], port=where[1], log_config=log_config(ctx))


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="TCP port.")
@click.option("--max-body-bytes", default=1024 * 1024, show_default=True, type=click.IntRange(1), help="Body limit.")
@_workers_option
@click.option(
    "--threads", type=click.IntRange(1), help="Threads listing and describing tools (default: CPU count, at least 4)."
)
@_admission_options
@click.option("--processes", type=click.IntRange(1), help=_PROCESSES_HELP)
@_backend_options
@click.option("--insecure-anonymous", is_flag=True, help="Serve without a policy: anyone reaching the port may call.")
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    max_body_bytes: int,
    workers: int,
    threads: int | None,
    max_in_flight: int,
    max_queued: int,
    max_running: int,
    processes: int | None,
    backend: str,
    address: str | None,
    replicas: int,
    insecure_anonymous: bool,
) -> None:
    """Serve the HTTP API (list, describe and call tools; /healthz; /metrics)."""
    _require("starlette", "uvicorn")
    from ..servers._api import serve as serve_http

    bounds: dict[str, Any] = {"max_in_flight": max_in_flight, "max_queued": max_queued, "max_running": max_running}
    if workers > 1:
        app = {"max_body_bytes": max_body_bytes, "workers": threads, "insecure_anonymous": insecure_anonymous}
        choice = (processes, backend, address, replicas)
        _serve_workers(ctx, "http", workers, (host, port), choice, bounds, app)
        return
    with open_runtime(ctx, **bounds) as rt:
        _check_can_serve(rt, insecure_anonymous)
        with _calls(rt, processes, backend, address, replicas, **bounds) as calls:
            serve_http(
                calls,
                host=host,
                port=port,
                max_body_bytes=max_body_bytes,
                workers=threads,
                insecure_anonymous=insecure_anonymous,
                log_config=log_config(ctx),
            )


@click.command()
@click.option("--format", "fmt", type=click.Choice(["openai", "anthropic"]), required=True, help="Target API.")
@click.option("--principal", help="Export only the tools this principal may see (default: anonymous).")
@click.pass_context
def export(ctx: click.Context, fmt: str, principal: str | None) -> None:
    """Print the tool definitions an LLM API takes (OpenAI or Anthropic), as JSON."""
    from ..integrations._export import export_tools

    with open_runtime(ctx) as rt:
        definitions = export_tools(rt.visible_tools(principal), fmt)
    click.echo(json.dumps(definitions, indent=2, ensure_ascii=False))


def _check_elicitation(transport: str, principal: str | None, asked: bool, approver: str | None) -> None:
    """Refuse an elicitation set-up that would let a caller approve its own calls."""
    if approver is not None and not asked:
        raise click.UsageError("--approver is for --approve-via-elicitation")
    if not asked:
        return
    if transport != "stdio":
        raise click.UsageError(
            "--approve-via-elicitation is for stdio: over http the client's user is whoever holds the "
            "calling key, so approving as another principal would let a caller approve its own calls"
        )
    if approver is None:
        raise click.UsageError(
            "--approve-via-elicitation needs --approver PRINCIPAL: who the client's user approves as "
            "(a principal with the approver scope, not --principal)"
        )
    if approver == (principal or "anonymous"):
        raise click.UsageError(f"--approver {approver!r} is the caller (--principal): nobody approves their own calls")


@click.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: one client on stdin/stdout; http: streamable HTTP on --host:--port.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on (http).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="TCP port (http).")
@click.option("--principal", help="Who the stdio client is (default: anonymous); http uses API keys.")
@click.option(
    "--mode",
    type=click.Choice(["full", "search", "code"]),
    default="full",
    show_default=True,
    help="full: one MCP tool per tool; search: search_tools + call_tool for large catalogs; code: as --code-mode.",
)
@click.option(
    "--code-mode",
    is_flag=True,
    help="Offer execute (a program that calls tools, run under the policy), search and resume (same as --mode code).",
)
@click.option(
    "--insecure-anonymous",
    is_flag=True,
    help="Serve without a policy (stdio: as --principal or anonymous; http: anyone reaching the port).",
)
@click.option(
    "--approve-via-elicitation",
    is_flag=True,
    help="Off by default. A call needing approval asks the client's user (as --approver) through "
    "elicitation/create, instead of answering approval_required (stdio).",
)
@click.option(
    "--approver",
    help="The principal the client's user approves as (default: none; required by --approve-via-elicitation).",
)
@click.option("--processes", type=click.IntRange(1), help=f"{_PROCESSES_HELP[:-1]} (http).")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help=_WORKERS_HELP + "; over several, MCP runs stateless (http).",
)
@_backend_options
@click.option("--poll-seconds", default=0.5, show_default=True, type=click.FloatRange(0.05), help="List-change check.")
@_admission_options
@click.pass_context
def mcp(
    ctx: click.Context,
    transport: str,
    host: str,
    port: int,
    principal: str | None,
    mode: str,
    code_mode: bool,
    insecure_anonymous: bool,
    approve_via_elicitation: bool,
    approver: str | None,
    processes: int | None,
    workers: int,
    backend: str,
    address: str | None,
    replicas: int,
    poll_seconds: float,
    max_in_flight: int,
    max_queued: int,
    max_running: int,
) -> None:
    """Serve the tools as an MCP server (stdio, or streamable HTTP at /mcp); both need a policy.

    Give --home and --policy on the command line (glovebox --home DIR --policy FILE mcp):
    an MCP client passes a server it spawns only a few variables, not GLOVEBOX_*.
    """
    _require("mcp", "starlette", "uvicorn")
    import anyio

    from ..servers._mcp import McpService, check_stdio, run_stdio, streamable_http_app

    if transport == "http" and principal is not None:
        raise click.UsageError("--principal is for stdio; over http each request's API key names the principal")
    if transport == "stdio" and (processes is not None or backend != "local" or workers > 1):
        raise click.UsageError("--processes, --workers and --backend are for --transport http; stdio serves one client")
    _check_elicitation(transport, principal, approve_via_elicitation, approver)
    mode = "code" if code_mode else mode
    bounds: dict[str, Any] = {"max_in_flight": max_in_flight, "max_queued": max_queued, "max_running": max_running}
    options: dict[str, Any] = {"mode": mode, "insecure_anonymous": insecure_anonymous, "poll_s": poll_seconds}
    if workers > 1:
        choice = (processes, backend, address, replicas)
        _serve_workers(ctx, "mcp", workers, (host, port), choice, bounds, {**options, "host": host})
        return
    with open_runtime(ctx, **bounds) as rt:
        if transport == "stdio":
            service = McpService(rt, principal=principal, approver=approver, **options)
            check_stdio(service)  # before stdin is read: the client sees the refusal on stderr
            anyio.run(run_stdio, service)
            return
        _check_can_serve(rt, insecure_anonymous)
        with _calls(rt, processes, backend, address, replicas, **bounds) as calls:
            app = streamable_http_app(McpService(calls, **options), host=host)
            import uvicorn
            from uvicorn.config import LOGGING_CONFIG

            logs = log_config(ctx) or LOGGING_CONFIG
            uvicorn.run(app, host=host, port=port, log_level="info", log_config=logs)
