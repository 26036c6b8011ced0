"""Importers: whole APIs (OpenAPI documents, GraphQL schemas, remote MCP servers, SQL databases) as tools.

Every operation becomes a tool run by one generic HTTP-operation guest (see
``guest/operation/operation.c``). The parsers (``openapi-spec-validator``,
``graphql-core``, the ``import`` extra) load only when an import runs.
:func:`import_mcp` registers the tools of a remote MCP server, whose calls the
host proxies (no sandbox applies to them: their code runs elsewhere).
:func:`import_sql` makes a database's two tools, run by the generic SQL guest
(``guest/sqlop/sqlop.c``), each statement judged by the host's ``sql`` capability. All three
plan their tools and hand them to one step (``_batch.apply``): the diff against
the previous import, the widening check, and one registry transaction that
registers all of an import or none of it, with one result type, :class:`ImportResult`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import MAX_SPEC_BYTES
from ._fragment import SecretHint
from ._importresult import ImportResult

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from ..model._result import ToolInfo
    from ..runtime._runtime import Runtime


__all__ = [
    "MAX_SPEC_BYTES",
    "ImportResult",
    "SecretHint",
    "import_graphql",
    "import_mcp",
    "import_openapi",
    "import_sql",
]


def __getattr__(name: str) -> Any:
    if name == "import_mcp":  # the MCP SDK client loads only when a server is imported
        from ._mcp import import_mcp

        return import_mcp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def import_openapi(
    runtime: Runtime,
    spec: str | os.PathLike[str] | dict[str, Any],
    *,
    name: str | None = None,
    server: str | None = None,
    accept_widening: bool = False,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
    strict: bool = False,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    max_spec_bytes: int = MAX_SPEC_BYTES,
    rename: Mapping[str, str] | None = None,
) -> ImportResult:
    """Register every operation of an OpenAPI 3.0/3.1 (or Swagger 2.0) document that can be a tool (all of
    them or none).

    An operation that cannot be made a tool (a request encoding or parameter
    style the generic guest does not speak, an invalid schema) is skipped and
    listed in the result's ``skipped`` with its reason, unless ``strict``.

    Args:
        runtime: the Runtime whose registry receives the tools.
        spec: a file (YAML or JSON), an http(s) URL (fetched once, bounded in
            size and time) or an already parsed document.
        name: the API name (tool-name and scope prefix); default: from ``info.title``.
        server: the base URL to call instead of the document's first server.
        accept_widening: let a re-import give an existing operation a new host, method or path.
        dry_run: compute the diff and the policy fragment; register nothing.
        progress: called with one line per slow step (reading, planning, building the
            generic guest, registering), for a terminal; None (the default): silent.
        strict: refuse the whole document if any operation cannot be imported.
        include: import only the operations one of these matches (a tag, an operationId, or a
            path when it starts with ``/``; shell-style globs); empty: all.
        exclude: leave out the operations one of these matches (as ``include``).
        max_spec_bytes: the largest document read from a file or a URL.
        rename: tool names of your choosing: operationId, ``METHOD /path`` or the tool name the
            import would make → the new name (``<api>-`` added in front unless it starts so).

    Returns:
        What was added, changed, removed (deprecated), skipped, and the policy fragment.

    Raises:
        InvalidSpec: the document cannot be imported (with ``strict``: one of its operations
            cannot), or a rename makes a bad or taken name; the message names the place.
        WideningRefused: a re-import widens an operation and ``accept_widening`` is not set.
        BuildError: the generic guest must be built and the ``build`` extra is missing.
    """
    from ._openapi import plan_openapi

    if runtime.is_closed:
        raise ValueError("this Runtime is closed")
    source = spec if isinstance(spec, dict) else _source(spec)
    say = progress or _silent
    say(f"reading and planning {'the document' if isinstance(source, dict) else source}")
    plan = plan_openapi(
        source,
        name=name,
        server=server,
        strict=strict,
        include=include,
        exclude=exclude,
        max_spec_bytes=max_spec_bytes,
        rename=rename,
        known_apis={info.manifest.operation.api for info in runtime.tools() if info.manifest.operation is not None},
    )
    skipped = f" ({len(plan.skipped)} skipped)" if plan.skipped else ""
    say(f"{len(plan.planned)} operations of {plan.api!r}{skipped} to compare with the registry")
    result = _apply(runtime, "openapi", plan.api, plan.planned, plan.secrets, plan.notes, accept_widening, dry_run, say)
    result.skipped = plan.skipped
    return result


def import_graphql(
    runtime: Runtime,
    schema: str | os.PathLike[str],
    *,
    endpoint: str,
    name: str | None = None,
    depth: int = 2,
    accept_widening: bool = False,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
    max_spec_bytes: int = MAX_SPEC_BYTES,
    bearer_env: str | None = None,
    header_env: Mapping[str, str] | None = None,
    bearer_secret: str | None = None,
) -> ImportResult:
    """Register every Query field (a read) and Mutation field (a write) of a GraphQL schema as a tool.

    Args:
        runtime: the Runtime whose registry receives the tools.
        schema: an SDL file or an introspection result (JSON) file.
        endpoint: the GraphQL endpoint URL every tool POSTs to.
        name: the API name; default: the schema file's stem.
        depth: how many levels of object fields each tool selects, 1 to 8 (cycles are cut).
        accept_widening: let a re-import give an existing operation a new host, method or path.
        dry_run: compute the diff and the policy fragment; register nothing.
        progress: called with one line per slow step (reading, planning, building the
            generic guest, registering), for a terminal; None (the default): silent.
        max_spec_bytes: the largest schema file read.
        bearer_env: the environment variable whose value the host sends as
            ``Authorization: Bearer <value>`` (a secret of the policy fragment; the tools never see it).
        header_env: header name -> the environment variable whose value the host sends in that header.
        bearer_secret: a secret reference the host sends as ``Authorization: Bearer <value>`` instead of
            ``bearer_env``: ``connection://API/{principal}`` (each principal's OAuth connection, made by
            ``glovebox connect API``), ``keyring://SERVICE/USER``, ``exec://...``, ``encrypted://NAME``.

    A tool whose answer is an object takes ``fields``, a GraphQL selection set checked
    against the schema at call time (the schema is kept in the home); without it, the
    import's selection (``depth`` levels) is sent. A field defined twice in one type is
    a note of the result, not a refusal.

    Raises:
        InvalidSpec: the schema does not parse, is over ``max_spec_bytes``, or nests an argument's type too
            deeply; the message names the line and column, or the field and argument.
        ValueError: ``depth`` is out of range, a header or variable name is not one, or ``bearer_secret``
            is not a reference (or comes with ``bearer_env``).
        WideningRefused: a re-import widens an operation and ``accept_widening`` is not set.
    """
    from ._graphql import plan_graphql

    say = progress or _silent
    say(f"reading and planning {schema}")
    plan = plan_graphql(
        Path(schema),
        endpoint=endpoint,
        name=name,
        depth=depth,
        max_spec_bytes=max_spec_bytes,
        bearer_env=bearer_env,
        header_env=dict(header_env or {}),
        bearer_secret=bearer_secret,
    )
    say(f"{len(plan.planned)} fields of {plan.api!r} to compare with the registry")
    if not dry_run:
        from ..runtime._selection import store_schema

        store_schema(runtime.home, plan.schema_text)
    return _apply(runtime, "graphql", plan.api, plan.planned, plan.secrets, plan.notes, accept_widening, dry_run, say)


def import_sql(
    runtime: Runtime,
    dsn: str,
    *,
    name: str,
    password: dict[str, str] | None = None,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ImportResult:
    """Register a database as two tools: ``<name>-query`` (SELECT only) and ``<name>-execute``.

    Args:
        runtime: the Runtime whose registry receives the tools.
        dsn: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (an existing file),
            or ``postgresql://user@host:port/dbname`` (never with a password in it).
        name: the database alias and the tools' prefix.
        password: PostgreSQL only: where the host reads the password,
            ``{"provider": "env" | "file", "source": NAME_OR_PATH}`` (it reads it
            here for the catalog, and the fragment grants the same source).
        dry_run: compute the diff and the policy fragment; register nothing.

    Returns:
        What was added or changed, and the policy fragment that grants the
        alias (with the DSN, absolute) to both tools.

    Raises:
        InvalidSpec: the DSN is neither a SQLite file nor a PostgreSQL DSN, or its catalog cannot be read.
        BuildError: the generic guest must be built and the ``build`` extra is missing.
    """
    import functools

    from ._batch import Source, apply
    from ._guest import cached_sql_guest, sql_guest
    from ._sql import plan_sql, sql_fragment

    if runtime.is_closed:
        raise ValueError("this Runtime is closed")
    say = progress or _silent
    api, planned, granted = plan_sql(dsn, name, password)
    if not dry_run and cached_sql_guest(runtime.home) is None:
        say(_FIRST_GUEST.format(kind="SQL"))
    artifact = cached_sql_guest(runtime.home) if dry_run else sql_guest(runtime.home)

    def owns(info: ToolInfo) -> bool:
        return info.manifest.sql_operation is not None and info.manifest.sql_operation.api == api

    source = Source(api, "sql", owns, f"removed from {api} by a re-import")
    fragment = functools.partial(sql_fragment, granted=granted)
    return apply(runtime, planned, artifact, source, dry_run=dry_run, fragment=fragment, progress=say)


#: What a first import says while the generic guest is built.
_FIRST_GUEST = "building the generic {kind} guest for this home, once (a C build; about 30 s on a cold Zig cache)"


def _silent(line: str) -> None:
    """No progress."""


def _source(spec: str | os.PathLike[str]) -> str | Path:
    text = os.fspath(spec)
    return text if text.startswith(("http://", "https://")) else Path(text)


def _apply(
    runtime: Runtime,
    kind: str,
    api: str,
    planned: list[Any],
    secrets: list[SecretHint],
    notes: list[str],
    accept_widening: bool,
    dry_run: bool,
    progress: Callable[[str], None],
) -> ImportResult:
    from ._batch import Source, apply
    from ._guest import cached_operation_guest, operation_guest

    if runtime.is_closed:
        raise ValueError("this Runtime is closed")
    if not dry_run and cached_operation_guest(runtime.home) is None:
        progress(_FIRST_GUEST.format(kind="HTTP-operation"))
    artifact = cached_operation_guest(runtime.home) if dry_run else operation_guest(runtime.home)

    def owns(info: ToolInfo) -> bool:
        return info.manifest.operation is not None and info.manifest.operation.api == api

    source = Source(api, kind, owns, f"removed from {api} by a re-import")
    return apply(
        runtime,
        planned,
        artifact,
        source,
        secrets=secrets,
        notes=notes,
        accept_widening=accept_widening,
        dry_run=dry_run,
        progress=progress,
    )
