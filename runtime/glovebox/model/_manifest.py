"""Tool manifests: what a tool is, what it accepts and returns, and what it may use.

A manifest lives in a TOML (or JSON) file beside the artifact. ``register``
looks, in order, for an explicit ``manifest=`` argument, ``<stem>.glovebox.toml``
next to the ``.wasm`` file, then ``glovebox.toml`` in the same directory. With
none of them, the defaults apply: the name is the file's stem, the version
``0.0.0``, both schemas accept any JSON value, default limits, no capabilities
and no required scopes.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from ..core._canonical import canonical_json
from ..core._errors import InvalidManifest
from ..core._frozen import Frozen
from ..schema._schemarules import check_schema
from ._grants import HttpRule, SqlRule

__all__ = [
    "HttpRule",
    "Capabilities",
    "GraphqlField",
    "Limits",
    "Manifest",
    "Operation",
    "SqlOperation",
    "ToolKind",
    "load_manifest",
    "find_manifest",
]

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
VERSION_PATTERN = r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$"
MIB = 1024 * 1024

#: What runs a call: a wasm component in the sandbox (``wasm``, and the generated
#: ``openapi``/``graphql`` operation tools, which run the generic HTTP-operation
#: guest), or a tool of a remote MCP server that the host proxies (``mcp-remote``:
#: its code does not run on this host, so no sandbox applies to it), or an imported
#: database tool (``sql``: the generic SQL guest runs the input's statement).
ToolKind = Literal["wasm", "openapi", "graphql", "mcp-remote", "sql"]


class Limits(Frozen):
    """Per-call resource limits. The host keeps its own maxima (see ``HOST_MAXIMA``)."""

    fuel: int = Field(100_000_000, gt=0, description="Wasm fuel units per call.")
    memory_bytes: int = Field(16 * MIB, gt=0, description="Linear memory cap per instance.")
    timeout_ms: int = Field(2_000, gt=0, description="Wall-clock deadline per call.")
    output_bytes: int = Field(1 * MIB, gt=0, description="Largest output (or error) text.")
    log_bytes: int = Field(16 * 1024, ge=0, description="Log text kept per call.")

    def tighter(self, other: Limits) -> Limits:
        """The field-by-field minimum of two limit sets."""
        mine, theirs = self.model_dump(), other.model_dump()
        return Limits(**{key: min(value, theirs[key]) for key, value in mine.items()})


#: The largest limits any manifest may ask for on this host.
HOST_MAXIMA = Limits(
    fuel=10_000_000_000,
    memory_bytes=256 * MIB,
    timeout_ms=60_000,
    output_bytes=16 * MIB,
    log_bytes=256 * 1024,
)


class Capabilities(Frozen):
    """Host capabilities a tool declares it needs. Nothing is granted by default."""

    http: list[HttpRule] = []
    sql: list[SqlRule] = Field([], description="Databases (by alias) and what statements on them may do.")


class GraphqlField(Frozen):
    """The GraphQL document an operation tool sends, and the field of ``data`` it answers."""

    query: str = Field(description="The GraphQL document; the tool's input is sent as its variables.")
    field: str = Field(description="The field of the answer's data object returned as the output.")


class Operation(Frozen):
    """How the generic HTTP-operation guest turns a call's input into one request.

    Written by ``glovebox import openapi|graphql``; the host passes it to the
    guest beside the validated input.
    """

    api: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$", description="The API (import) this tool belongs to.")
    source_id: str = Field("", description="The operation's id in its spec (operationId, or Query.field).")
    method: str = Field(pattern=r"^[A-Z]{1,16}$", description="HTTP method.")
    url: str = Field(pattern=r"^https?://", description="The server's base URL (no trailing slash).")
    path: str = Field(pattern=r"^/", description="Path template; {name} is an input field, percent-encoded.")
    path_params: list[str] = Field([], description="Input fields substituted into the path template.")
    query: list[str] = Field([], description="Input fields sent as query parameters.")
    headers: list[str] = Field([], description="Input fields sent as request headers.")
    body: bool = Field(False, description="Whether the input field 'body' is sent as the JSON request body.")
    graphql: GraphqlField | None = Field(None, description="For a GraphQL field: the document and answer field.")


class SqlOperation(Frozen):
    """Which database an imported SQL tool (``glovebox import sql``) runs its input's statement on.

    The host passes it to the generic SQL guest beside the validated input; what
    the statement may do is the manifest's ``capabilities.sql`` ∩ the policy's grant.
    """

    api: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$", description="The import (and database alias) name.")
    database: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$", description="The database alias.")
    mode: Literal["query", "execute"] = Field(description="query: SELECT only; execute: the grant's kinds.")


class Manifest(Frozen):
    """Everything the host needs to know about a tool besides its code."""

    name: str = Field(pattern=NAME_PATTERN)
    version: str = Field("0.0.0", pattern=VERSION_PATTERN)
    description: str = ""
    input_schema: dict[str, Any] | bool = True
    output_schema: dict[str, Any] | bool = True
    limits: Limits = Limits()
    capabilities: Capabilities = Capabilities()
    required_scopes: list[str] = []
    kind: ToolKind = "wasm"
    operation: Operation | None = None
    sql_operation: SqlOperation | None = None

    @model_validator(mode="after")
    def _operation_fits_kind(self) -> Self:
        if (self.kind == "sql") != (self.sql_operation is not None):
            raise ValueError("kind 'sql' and 'sql_operation' go together (the statement the generic guest runs)")
        wanted = self.kind in ("openapi", "graphql")
        if wanted and self.operation is None:
            raise ValueError(f"kind {self.kind!r} needs an 'operation' (the request the generic guest makes)")
        if not wanted and self.operation is not None:
            raise ValueError(f"'operation' is only for kind 'openapi' or 'graphql', not {self.kind!r}")
        return self

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any] | bool, info: ValidationInfo) -> dict[str, Any] | bool:
        if isinstance(info.context, dict) and info.context.get("stored"):
            return schema  # checked when it was registered; a call's validator fetches nothing either way
        check_schema(schema)
        return schema

    @classmethod
    def default_for(cls, wasm_path: Path) -> Manifest:
        """The manifest of an artifact registered without one."""
        stem = re.sub(r"[^a-z0-9_-]", "-", wasm_path.stem.lower()).strip("-_") or "tool"
        return cls(name=stem[:64])

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys, no spaces) of the whole manifest.

        ``kind`` is left out when it is ``wasm``, ``operation`` and
        ``sql_operation`` when they are unset and ``capabilities.sql`` when
        it is empty, so the text (which signatures and the registry's same-version
        check cover) of every manifest written before they existed stays what it was.
        """
        document = self.model_dump(mode="json")
        if document["kind"] == "wasm":
            del document["kind"]
        if document["operation"] is None:
            del document["operation"]
        if document["sql_operation"] is None:
            del document["sql_operation"]
        if not document["capabilities"]["sql"]:
            del document["capabilities"]["sql"]
        return canonical_json(document, ascii=True)  # v1 of the signed text: ASCII-escaped

    def check_within(self, maxima: Limits) -> None:
        """Raise InvalidManifest when a limit exceeds the host's maximum."""
        for key, value in self.limits.model_dump().items():
            ceiling = getattr(maxima, key)
            if value > ceiling:
                raise InvalidManifest(
                    f"manifest of {self.name!r}: limits.{key} = {value} exceeds the host maximum {ceiling}",
                    details={"field": f"limits.{key}", "value": value, "maximum": ceiling},
                )


def _describe(exc: ValidationError, source: str) -> InvalidManifest:
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(root)"
        problems.append(f"{field}: {err['msg']}")
    return InvalidManifest(
        f"invalid manifest {source}: " + "; ".join(problems),
        details={"source": source, "problems": problems},
    )


def parse_manifest(data: Any, source: str = "(inline)") -> Manifest:
    """Validate a decoded manifest document (a mapping) into a Manifest."""
    if isinstance(data, Manifest):
        return data
    if not isinstance(data, dict):
        raise InvalidManifest(f"invalid manifest {source}: expected a table/object, got {type(data).__name__}")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise _describe(exc, source) from exc


def load_manifest(path: Path) -> Manifest:
    """Read a manifest file (.toml or .json); errors name the file and the field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidManifest(f"cannot read manifest {path}: {exc}") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except ValueError as exc:  # a syntax error, or an integer too long to convert
        raise InvalidManifest(f"invalid manifest {path}: {exc}") from exc
    except RecursionError as exc:  # both parsers recurse once per nesting level
        raise InvalidManifest(f"invalid manifest {path}: nested too deeply") from exc
    return parse_manifest(data, str(path))


def find_manifest(wasm_path: Path) -> Path | None:
    """The manifest file that belongs to an artifact, if there is one."""
    for candidate in (wasm_path.with_name(wasm_path.stem + ".glovebox.toml"), wasm_path.with_name("glovebox.toml")):
        if candidate.is_file():
            return candidate
    return None
