"""``import_mcp``: every tool of a remote MCP server (streamable HTTP) as a ``mcp-remote`` tool.

The host lists the server's tools with the official ``mcp`` SDK client and
registers each as ``<prefix>-<remote name>`` (lower-cased, characters outside
``[a-z0-9_-]`` replaced by ``-``, cut to 64), with the remote description (cut
to :data:`DESCRIPTION_CHARS` after the listing was scrubbed of the header
secrets, see ``glovebox.remote._proxy``) and
input schema (held to the host's schema rules; a schema the host cannot
accept refuses the whole import, naming the tool), the remote ``outputSchema``
or ``true``, the required scopes given (default ``<prefix>:call``) and the
limits given. Its artifact is a descriptor (see ``glovebox.remote._proxy``). Calls
are proxied by the host to the server under the policy like any tool's. The
tools go through the one import step of every importer (``_batch.apply``):
the tools an import of the same URL and prefix made are its previous set.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..core._errors import InvalidManifest
from ..model._manifest import HOST_MAXIMA, NAME_PATTERN, Limits, parse_manifest
from ..remote._headers import check_url, parse_header_secrets
from ._batch import Planned, Source, apply
from ._fragment import SecretHint
from ._importresult import ImportResult
from ._mcpresources import plan_reads

if TYPE_CHECKING:
    from ..model._result import ToolInfo
    from ..remote._proxy import Descriptor
    from ..runtime._runtime import Runtime

__all__ = ["import_mcp"]

#: The deadline and the byte cap of listing a server's tools at import.
LIST_TIMEOUT_S = 30.0
LIST_BYTES = 16 * 1024 * 1024
DESCRIPTION_CHARS = 4000


def sanitize(text: str) -> str:
    """A tool name from any text: lower case, ``[a-z0-9_-]`` only, at most 64 characters.

    >>> sanitize("My Server/Get Weather!")
    'my-server-get-weather'
    """
    name = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")[:64].rstrip("-_")
    return name or "tool"


def import_mcp(
    runtime: Runtime,
    url: str | None = None,
    *,
    command: str | Sequence[str] | None = None,
    env: Iterable[str] | Mapping[str, str] = (),
    env_secrets: Iterable[str] | Mapping[str, str] = (),
    sandbox: str = "auto",
    name: str | None = None,
    scopes: Iterable[str] | None = None,
    header_secrets: Iterable[str] | Mapping[str, str] = (),
    timeout_ms: int | None = None,
    output_bytes: int | None = None,
    propagate_trace: bool = False,
    accept_widening: bool = False,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ImportResult:
    """Register (or refresh) every tool of the MCP server at ``url``; all of them or none.

    Args:
        runtime: the Runtime whose registry receives the tools.
        url: the server's streamable-HTTP endpoint (``http`` or ``https``; the host
            connects wherever the URL points, loopback and private addresses included).
        command: instead of ``url``, a local (stdio) server: its command line (a string,
            split like a shell would, or an argv list); the executable is resolved on
            this host's ``PATH`` to an absolute path, which is stored.
        env: a stdio server's ``NAME=VALUE`` environment variables (stored as they are);
            it gets no other variable of the host's.
        env_secrets: a stdio server's ``NAME=SECRET`` pairs: the host's variable ``SECRET``,
            read when the server starts, is its ``NAME``; only the names are stored.
        sandbox: a stdio server's OS sandbox: ``auto`` (bubblewrap where it runs here),
            ``bwrap`` (refuse to start it without) or ``none``.
        name: the tools' name prefix (default: the server's name, else its host).
        scopes: the scopes a caller needs (default ``<prefix>:call``).
        header_secrets: ``HEADER=SECRET_NAME`` pairs (or a mapping): the host sends
            the environment variable ``SECRET_NAME`` in ``HEADER``; only the name is stored.
        timeout_ms: each call's deadline (``limits.timeout_ms``; default the manifest default).
        output_bytes: each call's output cap (``limits.output_bytes``).
        propagate_trace: send each call's W3C trace context (``traceparent``/``tracestate``
            in ``_meta``) to the server; off by default, when the server learns no trace ids.
        accept_widening: let a refresh send an existing tool a secret it was not sent before,
            or turn on ``propagate_trace``.
        dry_run: list the server and compute the diff; register nothing.
        progress: called with one line per slow step (listing the server, registering);
            the CLI shows them on a terminal.

    Returns:
        What was added, changed (a new patch version), removed (deprecated) and left unchanged.

    Raises:
        ValueError: a malformed URL, name, scope or header secret.
        InvalidManifest: a remote tool the host cannot accept (named), a name taken by another tool,
            or a remote tool name holding a secret sent to the server.
        WideningRefused: a changed tool would be sent a new secret and ``accept_widening`` is not set.
        UpstreamError, CallTimeout, OutputTooLarge: the server could not be listed.
    """
    from ..remote._proxy import Descriptor, list_remote

    if runtime.is_closed:
        raise ValueError("this Runtime is closed")
    _require_sdk()
    if (url is None) == (command is None):
        raise ValueError("import mcp takes a server URL or --command, not both (and not neither)")
    if name is not None and not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(f"--name {name!r}: a tool name prefix must match {NAME_PATTERN}")
    limits = _limits(timeout_ms, output_bytes)
    say = progress or (lambda line: None)
    if command is not None:
        if header_secrets:
            raise ValueError("--header-secret is for a server URL; a --command server takes --env-secret")
        server = stdio_descriptor(command, env, env_secrets, sandbox)
        headers: dict[str, str] = {}
        say(f"starting {server.origin} to list its tools")
        listing = _list_stdio(runtime, server)
        fallback = server.url.removeprefix("stdio:")
    else:
        assert url is not None
        check_url(url)
        headers = parse_header_secrets(url, header_secrets)
        server = Descriptor(url, "", headers=headers)
        say(f"listing the tools of {server.origin}")
        listing = list_remote(url, headers, LIST_TIMEOUT_S, LIST_BYTES, runtime.home)
        fallback = urlsplit(url).hostname or "remote"
    prefix = name or sanitize(listing.server_name or fallback)
    required = _scopes(scopes, prefix)
    planned = [_planned(server, tool, prefix, required, limits, propagate_trace) for tool in listing.tools]
    if command is None:  # resources, prompts and completions of a server URL
        assert url is not None
        planned += plan_reads(url, headers, prefix, limits, None if scopes is None else required, runtime.home)
    _check_unique(planned, server.origin)
    source = Source(
        prefix,
        "mcp-remote",
        _owner(runtime, server, prefix),
        f"removed from the MCP server {server.origin}",
        refusal=InvalidManifest,
    )
    hints = [_hint(server.url, header, secret) for header, secret in headers.items()]
    hints += [_env_hint(variable, secret) for variable, secret in server.env_secrets.items()]
    return apply(
        runtime, planned, None, source, secrets=hints, accept_widening=accept_widening, dry_run=dry_run, progress=say
    )


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ValueError(
            "importing an MCP server needs the serve extra: pip install 'glovebox-runtime[serve]'"
        ) from exc


def _limits(timeout_ms: int | None, output_bytes: int | None) -> Limits:
    given = {"timeout_ms": timeout_ms, "output_bytes": output_bytes}
    try:
        limits = Limits(**{key: value for key, value in given.items() if value is not None})
    except ValueError as exc:
        raise ValueError(f"limits: {exc}") from exc
    for key, value in given.items():
        ceiling = getattr(HOST_MAXIMA, key)
        if value is not None and value > ceiling:
            raise ValueError(f"--{key.replace('_', '-')} {value} exceeds the host maximum {ceiling}")
    return limits


def _scopes(scopes: Iterable[str] | None, prefix: str) -> list[str]:
    found = [f"{prefix}:call"] if scopes is None else list(scopes)
    for scope in found:
        if not isinstance(scope, str) or not re.fullmatch(r"[A-Za-z0-9_.:*/-]{1,128}", scope):
            raise ValueError(f"--scope {scope!r}: not a scope name")
    return found


def _planned(
    server: Descriptor,
    tool: Any,
    prefix: str,
    scopes: list[str],
    limits: Limits,
    propagate_trace: bool = False,
) -> Planned:
    """The plan of one listed tool (already scrubbed by ``list_remote``: its description is cut after that)."""

    description = (tool.description or "")[:DESCRIPTION_CHARS]
    output_schema = tool.output_schema if tool.output_schema is not None else True
    document = {
        "name": sanitize(f"{prefix}-{tool.name}"),
        "description": description,
        "input_schema": tool.input_schema,
        "output_schema": output_schema,
        "limits": limits.model_dump(),
        "required_scopes": scopes,
        "kind": "mcp-remote",
    }
    manifest = parse_manifest(document, f"of the remote tool {tool.name!r} of {server.origin}")
    descriptor = dataclasses.replace(
        server,
        tool=tool.name,
        description=description,
        input_schema=tool.input_schema,
        output_schema=output_schema,
        propagate_trace=propagate_trace,
    )
    return Planned(manifest, where=f"the remote tool {tool.name!r}", descriptor=descriptor.to_bytes())


def stdio_descriptor(
    command: str | Sequence[str],
    env: Iterable[str] | Mapping[str, str] = (),
    env_secrets: Iterable[str] | Mapping[str, str] = (),
    sandbox: str = "auto",
) -> Descriptor:
    """The server part of a stdio server's descriptors: its argv (executable resolved), environment, sandbox.

    Raises:
        ValueError: an empty command, an executable not found, a malformed variable, an unknown sandbox.
    """
    from ..remote._proxy import Descriptor

    argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    if not argv or not argv[0]:
        raise ValueError("--command is empty")
    found = shutil.which(argv[0])
    if found is None:
        raise ValueError(f"--command: {argv[0]!r} is not an executable on this host's PATH")
    argv[0] = str(Path(found).absolute())
    if sandbox not in SANDBOXES:
        raise ValueError(f"--sandbox {sandbox!r}: expected one of {', '.join(SANDBOXES)}")
    literal = _pairs(env, "--env", "NAME=VALUE", value_is_name=False)
    secrets = _pairs(env_secrets, "--env-secret", "NAME=SECRET", value_is_name=True)
    for variable in set(literal) & set(secrets):
        raise ValueError(f"--env and --env-secret both set {variable}")
    return Descriptor(
        f"stdio:{Path(argv[0]).name}", "", command=argv, env=literal, env_secrets=secrets, sandbox=sandbox
    )


SANDBOXES = ("auto", "bwrap", "none")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
#: Variables a server's environment is given by the host itself (see ``glovebox.remote._stdio``).
_RESERVED_VARIABLES = {"PATH", "HOME", "TMPDIR"}


def _pairs(pairs: Iterable[str] | Mapping[str, str], option: str, form: str, *, value_is_name: bool) -> dict[str, str]:
    items = list(pairs.items()) if isinstance(pairs, Mapping) else [_split_pair(pair, option, form) for pair in pairs]
    found: dict[str, str] = {}
    for variable, value in items:
        if not _VARIABLE.fullmatch(variable) or variable in _RESERVED_VARIABLES:
            raise ValueError(f"{option} {variable}=...: {variable!r} is not a variable a server may be given")
        if value_is_name and not _VARIABLE.fullmatch(value):
            raise ValueError(f"{option} {variable}={value}: {value!r} is not an environment variable name")
        if "\0" in value:
            raise ValueError(f"{option} {variable}: the value holds a NUL character")
        if variable in found:
            raise ValueError(f"{option}: {variable} is given twice")
        found[variable] = value
    return found


def _split_pair(pair: str, option: str, form: str) -> tuple[str, str]:
    variable, sep, value = pair.partition("=")
    if not sep or not variable:
        raise ValueError(f"{option} {pair!r}: expected {form}")
    return variable.strip(), value


def _list_stdio(runtime: Runtime, server: Descriptor) -> Any:
    """List a stdio server's tools on a pool of its own, closed (the server stopped) right after."""
    from ..remote._call import list_stdio
    from ..remote._sessions import SessionPool

    pool = SessionPool(runtime.home)
    try:
        return list_stdio(pool, server, LIST_TIMEOUT_S, LIST_BYTES)
    finally:
        pool.close()


def _env_hint(variable: str, secret: str) -> SecretHint:
    """What the operator sets: the environment variable ``secret``, given to the server as ``variable``."""
    return SecretHint(name=secret, env=secret, header=f"env {variable}", format="{value}", scheme="stdio")


def _hint(url: str, header: str, secret: str) -> SecretHint:
    """What the operator sets: the environment variable ``secret``, sent in ``header``."""
    value = "Bearer {value}" if header.lower() == "authorization" else "{value}"
    return SecretHint(name=secret, env=secret, header=header, format=value, scheme=urlsplit(url).scheme)


def _check_unique(planned: list[Planned], origin: str) -> None:
    seen: dict[str, str] = {}
    for plan in planned:
        remote = _remote_name(plan)
        other = seen.setdefault(plan.manifest.name, remote)
        if other != remote:
            raise InvalidManifest(
                f"the remote tools {other!r} and {remote!r} of {origin} both become {plan.manifest.name!r}; "
                "rename one on the server or import with another --name",
                details={"name": plan.manifest.name},
            )


def _remote_name(plan: Planned) -> str:
    from ..remote._proxy import Descriptor

    assert plan.descriptor is not None
    return Descriptor.from_bytes(plan.descriptor).tool


def _owner(runtime: Runtime, server: Descriptor, prefix: str) -> Callable[[ToolInfo], bool]:
    """Whether a registered tool version was imported from ``server`` (its URL, or its command) under ``prefix``."""
    from ..remote._proxy import load_descriptor

    known: dict[str, bool] = {}  # by digest: each descriptor is read once per import

    def owns(info: ToolInfo) -> bool:
        if info.kind != "mcp-remote" or not info.name.startswith(f"{prefix}-"):
            return False
        if info.digest not in known:
            try:
                descriptor = load_descriptor(runtime.registry.descriptor_path(info.digest), info.digest)
                known[info.digest] = (descriptor.url, descriptor.command) == (server.url, server.command)
            except Exception:  # missing or changed on disk: not provably this server's
                known[info.digest] = False
        return known[info.digest]

    return owns
