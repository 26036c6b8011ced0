"""Tool manifests: what a tool is, what it accepts and returns, and what it may use.

A manifest lives in a TOML (or JSON) file beside the artifact. ``register``
looks, in order, for an explicit ``manifest=`` argument, ``<stem>.glovebox.toml``
next to the ``.wasm`` file, then ``glovebox.toml`` in the same directory when it
belongs to that artifact (:func:`folder_manifest`). With none of them, the
defaults apply: the name is the file's stem, the version ``0.0.0``, both schemas
accept any JSON value, default limits, no capabilities and no required scopes. A
manifest without ``name`` takes the stem too.

A manifest that is refused names the file, the line, the field and the value
given, in the words policy errors use: ``invalid manifest F:LINE: FIELD: what``.
One that works but tells callers little (no description, an input schema that
accepts anything) raises :class:`~glovebox.ManifestWarning` at registration.
"""

from __future__ import annotations

import json
import re
import tomllib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from ..core._canonical import canonical_json
from ..core._errors import InvalidManifest, ManifestWarning
from ..core._frozen import Frozen
from ..schema._schemarules import check_schema
from ._capability import registered
from ._checks import Checks
from ._grants import HttpRule, SqlRule, compose

__all__ = [
    "HttpRule",
    "Capabilities",
    "Compensation",
    "Export",
    "GraphqlField",
    "Limits",
    "Manifest",
    "Operation",
    "OutputValidation",
    "ParamStyle",
    "SqlOperation",
    "ToolKind",
    "folder_manifest",
    "load_manifest",
    "find_manifest",
    "manifest_warnings",
]

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
VERSION_PATTERN = r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$"
MIB = 1024 * 1024

#: What runs a call: a wasm component in the sandbox (``wasm``, and the generated
#: ``openapi``/``graphql`` operation tools, which run the generic HTTP-operation
#: guest), or a tool of a remote MCP server that the host proxies (``mcp-remote``:
#: its code does not run on this host, so no sandbox applies to it), or an imported
#: database tool (``sql``: the generic SQL guest runs the input's statement), or one
#: typed function of any component (``component``: see ``Export``).
ToolKind = Literal["wasm", "openapi", "graphql", "mcp-remote", "sql", "component", "program"]


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


if TYPE_CHECKING:

    class Capabilities(Frozen):
        """Host capabilities a tool declares it needs (the built-ins, for type checkers)."""

        http: list[HttpRule] = []
        sql: list[SqlRule] = []

        def __getattr__(self, name: str) -> Any: ...  # a registered capability's declaration

else:
    Capabilities = compose(
        "Capabilities",
        __name__,
        Frozen,
        "Host capabilities a tool declares it needs. Nothing is granted by default.",
        {key: spec for capability in registered() for key, spec in capability.manifest_fields().items()},
    )

#: Declarations written as the manifest's text even when empty (manifests of every version had them).
_ALWAYS_WRITTEN = frozenset({"http"})


class GraphqlField(Frozen):
    """The GraphQL document an operation tool sends, and the field of ``data`` it answers."""

    query: str = Field(description="The GraphQL document; the tool's input is sent as its variables.")
    field: str = Field(description="The field of the answer's data object returned as the output.")
    schema_digest: str | None = Field(
        None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="The schema (SDL) the import stored in the home, by digest: a selection chosen at call "
        "time is validated against it.",
    )
    selection_input: str | None = Field(
        None,
        description="The input field that chooses the answer's fields (a GraphQL selection set), sent in "
        "place of the document's own selection; never sent as a variable.",
    )


class ParamStyle(Frozen):
    """How one parameter (or form-body field) is serialized: an OpenAPI ``style`` with its ``explode``."""

    style: Literal["simple", "label", "matrix", "form", "spaceDelimited", "pipeDelimited", "deepObject", "json"] = (
        Field(
            description="An OpenAPI style, or json: a parameter with content application/json, its JSON text one value."
        )
    )
    explode: bool
    allow_reserved: bool = Field(False, description="Reserved characters but # & = + sent as they are (query).")


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
    query_join: dict[str, Literal["csv", "space", "pipe"]] = Field(
        {},
        description="Query arrays sent as one value, joined by a comma, a space or a pipe (what imports before "
        "'styles' wrote; the guest still reads it).",
    )
    headers: list[str] = Field([], description="Input fields sent as request headers.")
    cookies: list[str] = Field([], description="Input fields sent in the Cookie header.")
    wire_names: dict[str, str] = Field(
        {}, description="Input fields sent under another name (a parameter whose name one in another place holds)."
    )
    styles: dict[str, ParamStyle] = Field(
        {},
        description="Parameters not serialized as their place's default (path and header: simple; query and "
        "cookie: form, exploded).",
    )
    body: bool = Field(False, description="Whether the input field 'body' is sent as the request body.")
    body_encoding: Literal["json", "form", "text", "binary", "multipart"] = Field(
        "json",
        description="How 'body' is sent: JSON, application/x-www-form-urlencoded (the fields 'body_fields' of an "
        "object, each in its 'body_styles' style), text (a string, as it is), binary (a base64 string, decoded) "
        "or multipart/form-data (a part per member; 'body_files' are file parts).",
    )
    body_media: str = Field(
        "", pattern=r"^[!-~][ -~]*$|^$", description="The Content-Type of a text or binary body (empty: the default)."
    )
    body_fields: list[str] = Field([], description="For a form body: the fields of 'body' sent, in this order.")
    body_styles: dict[str, ParamStyle] = Field({}, description="For a form body: fields not sent as form, exploded.")
    body_files: list[str] = Field([], description="For a multipart body: the members sent as file parts.")
    graphql: GraphqlField | None = Field(None, description="For a GraphQL field: the document and answer field.")


class SqlOperation(Frozen):
    """Which database an imported SQL tool (``glovebox import sql``) runs its input's statement on.

    The host passes it to the generic SQL guest beside the validated input; what
    the statement may do is the manifest's ``capabilities.sql`` ∩ the policy's grant.
    """

    api: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$", description="The import (and database alias) name.")
    database: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$", description="The database alias.")
    mode: Literal["query", "execute"] = Field(description="query: SELECT only; execute: the grant's kinds.")


#: A JSON pointer (RFC 6901): empty (the whole document) or ``/`` then its path.
POINTER_PATTERN = r"^(/([^~]|~[01])*)*$"


class Compensation(Frozen):
    """The tool that undoes a successful call of this one (``glovebox runs rollback``).

    ``input_from`` builds the compensating call's input: each key is a JSON pointer
    into that input (``""`` for the whole of it, ``/id`` for its field ``id``), each
    value a JSON pointer into ``{"input": <the call's input>, "output": <its output>}``
    (``/output/id``, ``/input/channel``). Keys apply in sorted order, so ``""`` comes
    first and a field before its own sub-fields. With no ``input_from`` the
    compensation gets the original call's input."""

    tool: str = Field(
        pattern=r"^[a-z0-9][a-z0-9_-]{0,63}(@[0-9A-Za-z.+-]{1,64})?$",
        description="The compensating tool: NAME or NAME@VERSION.",
    )
    input_from: dict[str, str] = Field(
        {},
        description="JSON pointer into the compensation's input -> JSON pointer into {input, output} of the call.",
    )

    @field_validator("input_from")
    @classmethod
    def _pointers(cls, mapping: dict[str, str]) -> dict[str, str]:
        for target, source in mapping.items():
            for pointer in (target, source):
                if not re.fullmatch(POINTER_PATTERN, pointer):
                    raise ValueError(f"{pointer!r} is not a JSON pointer ('' or '/field/...')")
            if not (source == "" or source.startswith(("/input", "/output"))):
                raise ValueError(f"{source!r} must point into /input or /output of the call")
        return mapping


class Export(Frozen):
    """Which function of a component a ``component`` tool calls (written at registration, from its WIT types)."""

    interface: str = Field("", max_length=256, description="The exported interface; empty at the world's top.")
    function: str = Field(min_length=1, max_length=256, description="The exported function's name.")


#: What a mismatch between a tool's output and its output schema does: ``enforce`` refuses it
#: (``invalid_output``), ``warn`` answers the output with the mismatch in ``meta.warnings``,
#: ``off`` does not validate the output.
OutputValidation = Literal["enforce", "warn", "off"]


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
    #: For ``kind = "component"``: the typed export the tool calls.
    export: Export | None = None
    #: Output checks the tool's author declares (a policy's guards may add to them, never lift them).
    checks: Checks | None = None
    #: What a mismatch with ``output_schema`` does (None: the default, see :meth:`output_validation_mode`).
    output_validation: OutputValidation | None = None
    #: The tool that undoes a successful call of this one when a run is rolled back (None: none).
    compensate: Compensation | None = None

    def output_validation_mode(self) -> OutputValidation:
        """``output_validation``, or its default: ``warn`` for an imported API operation (its output
        schema is the API's description, which real answers often miss), ``enforce`` for every other tool."""
        if self.output_validation is not None:
            return self.output_validation
        return "warn" if self.operation is not None else "enforce"

    @model_validator(mode="after")
    def _operation_fits_kind(self) -> Self:
        if (self.kind == "component") != (self.export is not None):
            raise ValueError("kind 'component' and 'export' go together (the typed function the tool calls)")
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

        ``kind`` is left out when it is ``wasm``, ``operation``,
        ``sql_operation``, ``checks``, ``output_validation`` and ``compensate`` when they are unset
        and a capability other than ``http`` when it is empty, so the text (which signatures and
        the registry's same-version check cover) of every manifest written before they existed
        stays what it was.
        """
        document = self.model_dump(mode="json")
        if document["kind"] == "wasm":
            del document["kind"]
        if document["operation"] is None:
            del document["operation"]
        elif document["operation"]["graphql"] is not None:
            for key in ("schema_digest", "selection_input"):  # unset: the text of earlier imports stays
                if document["operation"]["graphql"][key] is None:
                    del document["operation"]["graphql"][key]
        if document["sql_operation"] is None:
            del document["sql_operation"]
        if document["export"] is None:
            del document["export"]
        if document["checks"] is None:
            del document["checks"]
        if document["output_validation"] is None:
            del document["output_validation"]
        if document["compensate"] is None:
            del document["compensate"]
        for key in [key for key, value in document["capabilities"].items() if not value]:
            if key not in _ALWAYS_WRITTEN:
                del document["capabilities"][key]
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


#: What a tool's files end with: the sources ``glovebox build`` takes and the artifact it makes.
TOOL_SUFFIXES = (".c", ".py", ".wasm")
SOURCE_SUFFIXES = (".c", ".py")


def _describe(exc: ValidationError, source: str, text: str | None) -> InvalidManifest:
    problems: list[dict[str, Any]] = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        field = ".".join(str(p) for p in loc) or "(root)"
        line = _line(text, loc, json_text=source.endswith(".json")) if text is not None else None
        problems.append({"line": line, "field": field, "message": _message(err)})
    where = [f"{source}:{p['line']}" if p["line"] is not None else source for p in problems]
    first = problems[0]
    return InvalidManifest(
        "invalid manifest "
        + "; ".join(f"{w}: {p['field']}: {p['message']}" for w, p in zip(where, problems, strict=True)),
        details={
            "source": source,
            "file": source,
            "line": first["line"],
            "field": first["field"],
            "problems": problems,
        },
    )


def _message(err: Any) -> str:
    """A pydantic error in the words of policy errors (``glovebox.policy._loader``), with the value given."""
    if err["type"] == "extra_forbidden":
        return "unknown field (not part of the manifest format; see the manifest reference)"
    if err["type"] == "missing":
        return "required field is missing"
    given = repr(err.get("input"))
    given = given if len(given) <= 80 else given[:77] + "..."
    return f"{err['msg'].removeprefix('Value error, ')} (got {given})"


def _line(text: str, loc: tuple[Any, ...], *, json_text: bool) -> int:
    """The 1-based line of the deepest key along ``loc`` in a manifest's text (1 when none is found)."""
    keys = [str(part) for part in loc if isinstance(part, str)]
    if json_text:
        line, position = 1, 0
        for key in keys:
            found = text.find(json.dumps(key) + ":", position)
            found = found if found >= 0 else text.find(json.dumps(key), position)
            if found < 0:
                break
            position, line = found, text.count("\n", 0, found) + 1
        return line
    best, line, table = 0, 1, []
    for number, raw in enumerate(text.splitlines(), 1):
        header = re.match(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?", raw)
        assigned = None if header else re.match(r"^\s*([A-Za-z0-9_.\"' -]+?)\s*=", raw)
        if header:
            path = table = _dotted(header.group(1))
        elif assigned:
            path = table + _dotted(assigned.group(1))
        else:
            continue
        depth = len(path) if keys[: len(path)] == path else 0
        if depth > best:
            best, line = depth, number
    return line


def _dotted(key: str) -> list[str]:
    return [part.strip().strip("\"'") for part in key.split(".")]


def parse_manifest(
    data: Any, source: str = "(inline)", *, default_name: str | None = None, text: str | None = None
) -> Manifest:
    """Validate a decoded manifest document (a mapping) into a Manifest.

    ``default_name`` is the name of a document without one (the artifact's
    stem); ``text`` is the document's source text, whose lines errors name.
    """
    if isinstance(data, Manifest):
        return data
    if not isinstance(data, dict):
        raise InvalidManifest(f"invalid manifest {source}: expected a table/object, got {type(data).__name__}")
    if default_name is not None and "name" not in data:
        data = {"name": default_name, **data}
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise _describe(exc, source, text) from exc


def load_manifest(path: Path, *, default_name: str | None = None) -> Manifest:
    """Read a manifest file (.toml or .json); errors name the file, the line, the field and the value."""
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
    return parse_manifest(data, str(path), default_name=default_name, text=text)


def find_manifest(wasm_path: Path) -> Path | None:
    """The manifest file that belongs to an artifact, if there is one."""
    own = wasm_path.with_name(wasm_path.stem + ".glovebox.toml")
    return own if own.is_file() else folder_manifest(wasm_path)


def folder_manifest(tool_file: Path) -> Path | None:
    """The ``glovebox.toml`` of ``tool_file``'s folder, when it belongs to that tool.

    It does when its ``name`` is the tool's default name (its file's stem), or
    when the folder holds that one tool: for a source, the only ``.c`` or
    ``.py`` source there (what builds made beside it does not count); for an
    artifact, its ``.c``, ``.py`` and ``.wasm`` files share one stem.
    Otherwise it names another tool: it is not used, and a
    :class:`~glovebox.ManifestWarning` says so.
    """
    candidate = tool_file.with_name("glovebox.toml")
    if not candidate.is_file():
        return None
    kinds = SOURCE_SUFFIXES if tool_file.suffix in SOURCE_SUFFIXES else TOOL_SUFFIXES
    stems = {p.stem for p in tool_file.parent.iterdir() if p.suffix in kinds and p.is_file()}
    stems.add(tool_file.stem)
    if stems == {tool_file.stem}:
        return candidate
    try:
        name = tomllib.loads(candidate.read_text(encoding="utf-8")).get("name")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        name = None  # unreadable: it is not this tool's either way
    if name == Manifest.default_for(tool_file).name:
        return candidate
    warnings.warn(
        f"{candidate} is not used for {tool_file.name}: it names {name or 'no tool'!s} and the folder holds "
        f"{len(stems)} tools; give this one its own {tool_file.stem}.glovebox.toml",
        ManifestWarning,
        stacklevel=2,
    )
    return None


def manifest_warnings(manifest: Manifest) -> list[str]:
    """What a manifest leaves an agent to guess: no description, an input schema that accepts anything."""
    found = []
    tool = f"{manifest.name}@{manifest.version}"
    if not manifest.description.strip():
        found.append(f"{tool} has no description: agents are told nothing about what it does")
    schema = manifest.input_schema
    if (
        schema is True
        or schema == {}
        or (isinstance(schema, dict) and set(schema) <= {"type"} and schema.get("type") == "object")
    ):
        shown = json.dumps(schema)
        found.append(f"{tool} accepts any input (input_schema {shown}): agents are told nothing about its parameters")
    return found
