"""``glovebox import openapi``: each operation of an OpenAPI 3.0/3.1 (or Swagger 2.0, converted first)
document becomes a tool.

The document (YAML or JSON, a file or a URL) is checked for references that
leave it, then validated with ``openapi-spec-validator``; every refusal names
the place (a JSON pointer). Each operation becomes a manifest of kind
``openapi``: name ``<api>-<operationId>`` (or method and path), the input
schema from its path, query and header parameters (their own names) and its
JSON request body (field ``body``), the output schema from its first 2xx JSON
response, one HTTP rule (its host, method and path template, ``{x}`` matching
one segment) and the scope ``<api>:read`` (GET, HEAD, OPTIONS) or
``<api>:write`` (anything else).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urljoin

from ..core._errors import InvalidSpec
from ..model._manifest import Manifest, Operation, ParamStyle
from ._batch import Planned, SecretHint
from ._common import (
    MAX_SPEC_BYTES,
    OPERATION_LIMITS,
    Server,
    api_name,
    http_rule,
    read_spec,
    title_api_name,
    tool_name,
    unique_names,
)
from ._oaschema import SchemaConverter, check_refs, deref, pointer
from ._rename import apply_renames
from ._swagger import from_swagger

__all__ = ["OpenapiPlan", "plan_openapi"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch")
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
#: The most an output schema's ``$defs`` take (JSON): past it, the definitions nearest the root are kept and
#: deeper references accept any value (GitHub's largest output, 76 KB, is whole; Stripe's, 670 KB each, are cut).
MAX_OUTPUT_DEFS_BYTES = 128 * 1024
_DEFAULT_STYLE = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}
#: The styles OpenAPI defines for each place of a parameter.
_STYLES = {
    "path": ("simple", "label", "matrix"),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
    "cookie": ("form",),
}


class OpenapiPlan(NamedTuple):
    """What planning an OpenAPI document made: the tools, and what it left out and why."""

    api: str
    planned: list[Planned]
    secrets: list[SecretHint]
    notes: list[str]
    skipped: list[dict[str, str]]


def plan_openapi(
    source: str | Path | dict[str, Any],
    *,
    name: str | None = None,
    server: str | None = None,
    strict: bool = False,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    max_spec_bytes: int = MAX_SPEC_BYTES,
    known_apis: Collection[str] = (),
    rename: Mapping[str, str] | None = None,
) -> OpenapiPlan:
    """Plan the tools of an OpenAPI document.

    An operation that cannot be made a tool is skipped (listed in ``skipped``
    with its place and reason) unless ``strict``, when it refuses the document.
    ``include``/``exclude`` select operations by tag, operationId or path
    (shell-style globs; a pattern starting with ``/`` matches the path). ``rename`` gives some tools
    names of their own (see :mod:`glovebox.importers._rename`).

    Raises:
        InvalidSpec: the document cannot be imported (or, with ``strict``, one operation
            cannot); the message names the place.
    """
    doc, origin = (source, "(document)") if isinstance(source, dict) else read_spec(source, max_spec_bytes)
    converted = isinstance(doc, dict) and "swagger" in doc
    if converted:
        doc = from_swagger(doc, origin)
    invalid = _check_document(doc, origin, strict)
    api, notes = _api(doc, name, origin, known_apis)
    if converted:
        notes.append("converted from Swagger 2.0 to OpenAPI 3.0 (places name the converted document)")
    base = _server(doc, server, origin)
    converter = SchemaConverter(doc, str(doc["openapi"]).startswith("3.0."), origin)
    planned: list[Planned] = []
    skipped: list[dict[str, str]] = []
    for path, method, item, place in _selected(doc, include, exclude):
        operation_id = str(item[method].get("operationId") or f"{method.upper()} {path}")
        try:
            if place in invalid:
                raise invalid[place]
            where = base if server is not None else _own_server(item, method, place, base, origin)
            planned.append(_operation(doc, api, where, path, method, item, place, origin, converter))
        except InvalidSpec as exc:
            if strict:
                raise
            skipped.append({"operation": operation_id, "place": place, "reason": _reason(exc.message, origin)})
    if not planned:
        why = f" ({len(skipped)} skipped: {skipped[0]['reason']})" if skipped else ""
        raise InvalidSpec(
            f"{origin}: /paths: the document has no operations to import{why}", details={"place": "/paths"}
        )
    names, name_notes = unique_names([(plan.manifest.name, plan.where) for plan in planned])
    keys = [_rename_keys(plan, name) for plan, name in zip(planned, names, strict=True)]
    names, rename_notes = apply_renames(api, keys, names, rename or {})
    name_notes += rename_notes
    planned = [_renamed(plan, new) for plan, new in zip(planned, names, strict=True)]
    secrets, security_notes = _security(doc, api, base, origin)
    return OpenapiPlan(api, planned, secrets, notes + name_notes + security_notes, skipped)


def _api(doc: dict[str, Any], name: str | None, origin: str, known_apis: Collection[str]) -> tuple[str, list[str]]:
    """The API name: ``name``, else the title's short name; a name an earlier release derived from the
    same title is kept when the registry has its tools (a re-import changes them, never duplicates them)."""
    if name:
        return api_name(name, "--name"), []
    title = str(doc["info"].get("title", ""))
    api = title_api_name(title, f"{origin}: /info/title")
    try:
        earlier = api_name(title, f"{origin}: /info/title")
    except InvalidSpec:
        return api, []
    if earlier != api and earlier in known_apis:
        return earlier, [f"kept the API name {earlier!r} of the tools already imported (give --name to change it)"]
    return api, []


def _reason(message: str, origin: str) -> str:
    """An error's first line, without the document's name (the report names it once)."""
    return message.splitlines()[0].removeprefix(f"{origin}: ")


def _selected(
    doc: dict[str, Any], include: Sequence[str], exclude: Sequence[str]
) -> Iterator[tuple[str, str, dict[str, Any], str]]:
    """(path, method, path item, place) of every operation ``include``/``exclude`` select."""
    for path, raw in (doc.get("paths") or {}).items():
        item, item_place = deref(doc, raw, pointer("paths", path))
        for method in METHODS:
            if not (isinstance(item, dict) and isinstance(item.get(method), dict)):
                continue
            keys = _selection_keys(path, item[method])
            if include and not any(_matches(pattern, keys) for pattern in include):
                continue
            if any(_matches(pattern, keys) for pattern in exclude):
                continue
            yield path, method, item, f"{item_place}{pointer(method)}"


def _selection_keys(path: str, operation: dict[str, Any]) -> tuple[str, list[str]]:
    names = [str(tag) for tag in operation.get("tags") or []]
    if operation.get("operationId"):
        names.append(str(operation["operationId"]))
    return path, names


def _matches(pattern: str, keys: tuple[str, list[str]]) -> bool:
    path, names = keys
    if pattern.startswith("/"):
        return fnmatch.fnmatchcase(path, pattern)
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def _rename_keys(plan: Planned, name: str) -> tuple[str, ...]:
    """What a rename map's key may call an operation: its operationId, ``METHOD /path``, its tool name."""
    operation = plan.manifest.operation
    assert operation is not None
    return (operation.source_id, f"{operation.method} {operation.path}", name)


def _renamed(plan: Planned, name: str) -> Planned:
    if name == plan.manifest.name:
        return plan
    return dataclasses.replace(plan, manifest=plan.manifest.model_copy(update={"name": name}))


def _check_document(doc: Any, origin: str, strict: bool) -> dict[str, InvalidSpec]:
    """Refuse what no operation can be imported from; return the operations the validator finds invalid
    (by place), each with its error."""
    if not isinstance(doc, dict):
        raise InvalidSpec(f"{origin}: /: expected an OpenAPI document (a mapping), got {type(doc).__name__}")
    version = str(doc.get("openapi", ""))
    if not version.startswith(("3.0.", "3.1.")):
        raise InvalidSpec(
            f"{origin}: /openapi: {version or 'missing'}; OpenAPI 3.0 and 3.1 are supported",
            details={"place": "/openapi"},
        )
    try:
        check_refs(doc)
    except InvalidSpec as exc:
        raise InvalidSpec(f"{origin}: {exc.message}", details=exc.details) from exc
    return validate_document(doc, version, origin, strict=strict)


class _NotRetrieved(Exception):
    """What the spec validator's resolver raises for every URI: it retrieves nothing."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.uri = uri


def validate_document(doc: dict[str, Any], version: str, origin: str, *, strict: bool = True) -> dict[str, InvalidSpec]:
    """Validate ``doc`` with ``openapi-spec-validator`` under a resolver that retrieves nothing.

    Only the document itself is registered with the resolver: a reference to
    any other URI (a file, a URL, a base ``$id`` elsewhere) fails the
    validation instead of being fetched. Unless ``strict``, an error inside one
    operation (``/paths/<path>/<method>/...``) does not refuse the document:
    it is returned, by the operation's place, for the planner to skip it.

    Raises:
        InvalidSpec: the document is not valid OpenAPI ``version``; the message names the place.
    """
    from jsonschema_path import SchemaPath
    from jsonschema_path.accessors import SchemaAccessor
    from openapi_spec_validator import OpenAPIV30SpecValidator, OpenAPIV31SpecValidator
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    def retrieve(uri: str) -> Any:
        raise _NotRetrieved(uri)

    registry: Any = Registry(retrieve=retrieve).with_resource("", DRAFT202012.create_resource(doc))  # type: ignore[call-arg]
    spec = SchemaPath(SchemaAccessor(doc, registry.resolver(base_uri=""), resolved_cache_maxsize=0))
    validator = OpenAPIV30SpecValidator if version.startswith("3.0.") else OpenAPIV31SpecValidator
    invalid: dict[str, InvalidSpec] = {}
    try:
        for error in validator(spec).iter_errors():
            place = pointer(*error.path) or "/"
            refusal = InvalidSpec(
                f"{origin}: {place}: invalid OpenAPI {version}: {error.message}", details={"place": place}
            )
            parts = list(error.path)
            if strict or len(parts) < 3 or parts[0] != "paths" or parts[2] not in METHODS:
                raise refusal from error
            invalid.setdefault(pointer(*parts[:3]), refusal)
    except InvalidSpec:
        raise
    except Exception as exc:  # the resolver refusing a URI, or the validator failing on what it cannot follow
        refused = _not_retrieved(exc)
        if refused is not None:
            raise InvalidSpec(
                f"{origin}: a reference to {refused!r} is not retrieved: a spec is read alone, "
                "the host fetches no other file or URL"
            ) from exc
        raise InvalidSpec(f"{origin}: invalid OpenAPI {version}: {exc}") from exc
    return invalid


def _not_retrieved(exc: BaseException) -> str | None:
    """The URI the resolver refused somewhere in ``exc``'s chain, or None."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, _NotRetrieved):
            return found.uri
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None


def _server(doc: dict[str, Any], override: str | None, origin: str, place: str = "/servers") -> Server:
    if override is not None:
        return Server(override, "--server")
    servers = doc.get("servers") or []
    if not servers or not isinstance(servers[0], dict) or "url" not in servers[0]:
        raise InvalidSpec(
            f"{origin}: {place}: the document names no server; give one with --server", details={"place": place}
        )
    url = str(servers[0]["url"])
    for key, variable in (servers[0].get("variables") or {}).items():
        url = url.replace("{" + key + "}", str(variable.get("default", "")))
    if origin.startswith(("http://", "https://")):
        url = urljoin(origin, url)  # a relative server URL is relative to where the document came from
    elif url.startswith("//"):
        url = f"https:{url}"  # a scheme-relative URL (Kubernetes' //kubernetes.local): https, as a client would
    return Server(url, f"{origin}: {place}/0/url")


def _own_server(item: dict[str, Any], method: str, place: str, base: Server, origin: str) -> Server:
    """An operation's own server: its ``servers``, else its path item's, else the document's (``base``)."""
    for servers, at in ((item[method].get("servers"), place), (item.get("servers"), place.rsplit("/", 1)[0])):
        if servers:
            return _server({"servers": servers}, None, origin, f"{at}/servers")
    return base


def _operation(
    doc: dict[str, Any],
    api: str,
    server: Server,
    path: str,
    method: str,
    item: Any,
    place: str,
    origin: str,
    converter: SchemaConverter,
) -> Planned:
    operation = item[method]
    where = f"{origin}: {place}"
    parameters = _parameters(doc, item, operation, place, origin)
    properties: dict[str, Any] = {}
    required: list[str] = []
    groups: dict[str, list[str]] = {"path": [], "query": [], "header": [], "cookie": []}
    styles: dict[str, ParamStyle] = {}
    wire_names: dict[str, str] = {}
    taken = {param["name"] for param, _ in parameters if param["in"] == "path"} | (
        {"body"} if "requestBody" in operation else set()
    )
    for param, param_place in parameters:
        schema = converter.convert(param.get("schema", {}), f"{param_place}/schema")
        if param.get("description"):
            schema = {**schema, "description": param["description"]} if isinstance(schema, dict) else schema
        field = _field_name(param, properties, taken, param_place, origin)
        if field != param["name"]:
            wire_names[field] = param["name"]
        properties[field] = schema
        groups[param["in"]].append(field)
        style = param_style(param)
        if style is not None:
            styles[field] = style
        if param.get("required") or param["in"] == "path":
            required.append(field)
    body = _body(doc, operation, place, origin, converter, properties, required)
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    output_schema = _output(doc, operation, place, converter)
    input_schema = converter.with_defs(input_schema)
    output_schema = converter.with_defs(output_schema, MAX_OUTPUT_DEFS_BYTES)
    upper = method.upper()
    operation_id = operation.get("operationId") or f"{method} {path}"
    manifest = {
        "name": tool_name(api, operation_id, where),
        "version": "1.0.0",
        "description": _description(operation, upper, path),
        "kind": "openapi",
        "input_schema": input_schema,
        "output_schema": output_schema,
        "limits": OPERATION_LIMITS,
        "capabilities": {"http": [http_rule(server, upper, path, where, path_params=_matrix(styles, groups["path"]))]},
        "required_scopes": [f"{api}:{'read' if upper in READ_METHODS else 'write'}"],
        "operation": Operation(
            api=api,
            source_id=operation_id,
            method=upper,
            url=server.url,
            path=path,
            path_params=groups["path"],
            query=groups["query"],
            headers=groups["header"],
            cookies=groups["cookie"],
            styles=styles,
            wire_names=wire_names,
            **body,
        ),
    }
    action = "allow" if upper in READ_METHODS else "require_approval"
    return Planned(manifest=_manifest(manifest, where, converter), action=action, where=place)


def _field_name(param: dict[str, Any], properties: dict[str, Any], taken: set[str], place: str, origin: str) -> str:
    """The input field of a parameter: its name, or ``<in>_<name>`` when a parameter in another place has the
    name, or it is ``body`` beside a request body (a path parameter keeps its name: Kubernetes' proxy
    ``{path}`` and its ``path`` query parameter)."""
    name = str(param["name"])
    if param["in"] != "path" and name in taken:
        name = f"{param['in']}_{name}"
    if name in properties:
        raise InvalidSpec(
            f"{origin}: {place}: parameter {param['name']!r} is used twice (in different places)",
            details={"place": place},
        )
    return name


def _matrix(styles: dict[str, ParamStyle], path_params: list[str]) -> bool:
    """Whether the operation sends ``;`` path parameters (a matrix-style path parameter)."""
    return any(styles[name].style == "matrix" for name in path_params if name in styles)


def _manifest(data: dict[str, Any], where: str, converter: SchemaConverter) -> Manifest:
    """The manifest, its schemas checked through ``converter`` (each shared definition once per document)."""
    from pydantic import ValidationError

    try:
        for key in ("input_schema", "output_schema"):
            try:
                converter.check(data[key])
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from exc
        return Manifest.model_validate(data, context={"stored": True})  # the schemas are checked above
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InvalidSpec(
            f"{where}: cannot make a tool of this operation: {problems}", details={"place": where}
        ) from exc
    except Exception as exc:  # a schema the host refuses (check_schema), named by the manifest error
        raise InvalidSpec(f"{where}: cannot make a tool of this operation: {exc}", details={"place": where}) from exc


def _description(operation: dict[str, Any], method: str, path: str) -> str:
    text = " ".join(str(operation.get(key, "")).strip() for key in ("summary", "description")).strip()
    return text or f"{method} {path}"


def _parameters(
    doc: dict[str, Any], item: dict[str, Any], operation: dict[str, Any], place: str, origin: str
) -> list[tuple[dict[str, Any], str]]:
    """Path-level then operation-level parameters (an operation's overrides the path's), each checked."""
    item_place = place.rsplit("/", 1)[0]
    merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    for params, base in ((item.get("parameters") or [], item_place), (operation.get("parameters") or [], place)):
        for index, raw in enumerate(params):
            param, param_place = deref(doc, raw, f"{base}/parameters/{index}")
            if param.get("in") == "header" and str(param.get("name", "")).lower() in _IGNORED_HEADERS:
                continue  # OpenAPI: such a parameter definition SHALL be ignored (the host sets these)
            _check_parameter(param, param_place, origin)
            merged[(param["name"], param["in"])] = (param, param_place)
    return list(merged.values())


def param_style(param: dict[str, Any]) -> ParamStyle | None:
    """How a parameter is serialized when not as its place's default (simple; query and cookie: form,
    exploded), else None."""
    where = str(param.get("in"))
    style = str(param.get("style") or _DEFAULT_STYLE[where])
    explode = param.get("explode", style == "form")
    reserved = bool(param.get("allowReserved")) and where == "query"
    if style == _DEFAULT_STYLE[where] and explode is (style == "form") and not reserved:
        return None
    return ParamStyle.model_validate({"style": style, "explode": bool(explode), "allow_reserved": reserved})


def _check_parameter(param: dict[str, Any], place: str, origin: str) -> None:
    """Refuse a parameter the guest cannot send."""
    where = param.get("in")
    if where not in _DEFAULT_STYLE:
        raise InvalidSpec(
            f"{origin}: {place}/in: parameters in {where!r} are not supported (path, query, header and cookie are)",
            details={"place": f"{place}/in"},
        )
    style = param.get("style", _DEFAULT_STYLE[where])
    if "content" in param:
        raise InvalidSpec(
            f"{origin}: {place}/content: parameter {param.get('name')!r}: a parameter serialized by a media type "
            "('content') is not supported (one with a schema and a style is)",
            details={"place": f"{place}/content"},
        )
    if style not in _STYLES[where]:
        raise InvalidSpec(
            f"{origin}: {place}/style: parameter {param.get('name')!r}: style {style!r} is not defined for "
            f"{where} parameters ({', '.join(_STYLES[where])} are)",
            details={"place": f"{place}/style"},
        )


def _json_media(content: dict[str, Any]) -> str | None:
    for media in content:
        base = media.split(";")[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            return str(media)
    return None


def _body(
    doc: dict[str, Any],
    operation: dict[str, Any],
    place: str,
    origin: str,
    converter: SchemaConverter,
    properties: dict[str, Any],
    required: list[str],
) -> dict[str, Any]:
    """Add the request body's field ``body``; return the operation's body fields (``body``, ``body_encoding``...)."""
    if "requestBody" not in operation:
        return {}
    body, body_place = deref(doc, operation["requestBody"], f"{place}/requestBody")
    content = body.get("content") or {}
    media, encoding = body_media(content)
    if media is None:
        raise InvalidSpec(
            f"{origin}: {body_place}/content: the request body offers no media type", details={"place": body_place}
        )
    if "body" in properties:
        raise InvalidSpec(
            f"{origin}: {place}: a parameter named 'body' collides with the request body field",
            details={"place": place},
        )
    schema_place = f"{body_place}{pointer('content', media, 'schema')}"
    raw_schema = content[media].get("schema", {})
    fields: dict[str, Any] = {"body": True, "body_encoding": encoding}
    if encoding in ("form", "multipart"):
        target, _ = deref(doc, raw_schema, schema_place)
        names = (target or {}).get("properties") if isinstance(target, dict) else None
        if not names and isinstance(target, dict) and target.get("additionalProperties") is False:
            return {}  # a form of no fields (Stripe's GET operations): nothing to send
        if encoding == "form":
            fields["body_fields"] = sorted(names or {})
            fields["body_styles"] = _field_styles(content[media].get("encoding") or {})
        else:
            parts = content[media].get("encoding") or {}
            raw_schema, fields["body_files"] = _file_parts(doc, target or {"type": "object"}, schema_place, parts)
    elif encoding == "text":
        raw_schema = raw_schema or {"type": "string"}
        fields["body_media"] = "" if media.split(";")[0].strip().lower() == "text/plain" else _concrete(media)
    elif encoding == "json" and media.split(";")[0].strip().lower() != "application/json":
        fields["body_media"] = media.strip()  # application/merge-patch+json and its kind, as the server expects
    elif encoding == "binary":
        raw_schema = {**BINARY_BODY, "contentMediaType": _concrete(media)}
        fields["body_media"] = _concrete(media)
    properties["body"] = converter.convert(raw_schema, schema_place)
    if body.get("required"):
        required.append("body")
    return fields


#: A raw binary request body in the input: its bytes as base64.
BINARY_BODY: dict[str, Any] = {
    "type": "string",
    "contentEncoding": "base64",
    "description": "The request body's bytes, base64-encoded.",
}
#: A file part of a multipart/form-data body in the input: its content as base64 or as text.
FILE_PART: dict[str, Any] = {
    "type": "object",
    "description": "A file: its content as 'base64' or as 'text' (UTF-8), with an optional filename "
    "(default: the field's name) and content type (default: application/octet-stream).",
    "properties": {
        "base64": {"type": "string", "contentEncoding": "base64"},
        "text": {"type": "string"},
        "filename": {"type": "string"},
        "content_type": {"type": "string", "pattern": "^[!-~][ -~]*$"},
    },
    "oneOf": [{"required": ["base64"]}, {"required": ["text"]}],
    "additionalProperties": False,
}


def _concrete(media: str) -> str:
    """The Content-Type sent for ``media``: itself, or ``application/octet-stream`` for a range (``image/*``)."""
    return "application/octet-stream" if "*" in media else media.strip()


def _field_styles(encoding: dict[str, Any]) -> dict[str, ParamStyle]:
    """A form body's fields not sent as form, exploded (the media type's ``encoding`` object)."""
    styles = {}
    for name, spec in encoding.items():
        if isinstance(spec, dict) and any(key in spec for key in ("style", "explode", "allowReserved")):
            style = param_style({**spec, "in": "query"})
            if style is not None:
                styles[str(name)] = style
    return styles


def _is_file(doc: dict[str, Any], schema: Any, place: str, part_type: str = "") -> bool:
    """Whether a multipart field's schema is a file: a string of format binary or base64 (3.0), or with a
    contentMediaType or contentEncoding (3.1), or a part whose ``encoding`` gives a content type other than
    text or JSON."""
    target, _ = deref(doc, schema, place)
    if not isinstance(target, dict):
        return False
    if target.get("format") in ("binary", "base64") or "contentMediaType" in target or "contentEncoding" in target:
        return True
    base = part_type.split(";")[0].strip().lower()
    return target.get("type") in ("string", None) and bool(base) and not base.startswith(("text/", "application/json"))


def _file_parts(
    doc: dict[str, Any], target: dict[str, Any], place: str, encoding: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """A multipart body's object schema with its file fields (and arrays of files) as :data:`FILE_PART`, and
    the names of those fields."""
    properties = dict(target.get("properties") or {})
    files = []
    for name, schema in properties.items():
        field_place = f"{place}{pointer('properties', name)}"
        part = encoding.get(name)
        part_type = str(part.get("contentType", "")) if isinstance(part, dict) else ""
        field, _ = deref(doc, schema, field_place)
        if _is_file(doc, schema, field_place, part_type):
            properties[name] = FILE_PART
        elif isinstance(field, dict) and field.get("type") == "array" and _is_file(doc, field.get("items"), place):
            properties[name] = {**field, "items": FILE_PART}
        else:
            continue
        files.append(name)
    return {**target, "type": "object", "properties": properties}, sorted(files)


#: Media types sent as text besides text/*.
_TEXT = ("application/xml", "application/yaml", "application/x-yaml", "application/javascript", "application/sql")


def body_media(content: dict[str, Any]) -> tuple[str | None, str]:
    """The media type a request body is sent as, and its encoding: JSON first, then a form, multipart,
    text, and raw bytes (``binary``) for anything else."""
    bases = {str(media): media.split(";")[0].strip().lower() for media in content}
    # among JSON types, application/json first and a JSON Patch (an array of operations, which a declared
    # object schema never describes) last: Kubernetes' PATCH is sent as application/merge-patch+json
    bases = dict(sorted(bases.items(), key=lambda item: (item[1] != "application/json", "json-patch" in item[1])))
    choices: tuple[tuple[str, Callable[[str], bool]], ...] = (
        ("json", lambda b: b == "application/json" or b.endswith("+json")),
        ("form", lambda b: b == "application/x-www-form-urlencoded"),
        ("multipart", lambda b: b.startswith("multipart/")),
        ("text", lambda b: b.startswith("text/") or b in _TEXT or b.endswith("+xml")),
        ("json", lambda b: b == "*/*" and _object_like(content, b)),
        ("binary", lambda b: True),
    )
    for encoding, wanted in choices:
        for media, base in bases.items():
            if wanted(base):
                return media, encoding
    return None, "json"


def _object_like(content: dict[str, Any], base: str) -> bool:
    """Whether a ``*/*`` body's schema is other than a string (then it is sent as JSON)."""
    schema = next((value.get("schema") for media, value in content.items() if media.strip() == base), None)
    return isinstance(schema, dict) and bool(schema) and schema.get("type") != "string"


def _output(doc: dict[str, Any], operation: dict[str, Any], place: str, converter: SchemaConverter) -> Any:
    responses = operation.get("responses") or {}
    for code in sorted(str(key) for key in responses):
        if code.startswith("2"):
            response, response_place = deref(doc, responses[code], f"{place}{pointer('responses', code)}")
            content = response.get("content") or {}
            media = _json_media(content)
            if media is None or "schema" not in content[media]:
                return True
            return converter.convert(content[media]["schema"], f"{response_place}{pointer('content', media, 'schema')}")
    return True


def _security(doc: dict[str, Any], api: str, server: Server, origin: str) -> tuple[list[SecretHint], list[str]]:
    """The secrets the operator provides, from the security schemes operations use."""
    schemes = (doc.get("components") or {}).get("securitySchemes") or {}
    used = _used_schemes(doc)
    hints, notes = [], []
    for name in sorted(used):
        scheme, place = deref(doc, schemes.get(name, {}), pointer("components", "securitySchemes", name))
        env = f"{api}_{name}".upper().replace("-", "_")
        secret = f"{api}-{name}"[:64]
        kind, where = scheme.get("type"), scheme.get("in")
        if kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer" or kind in ("oauth2", "openIdConnect"):
            hints.append(SecretHint(secret, env, "Authorization", "Bearer {value}", server.scheme))
        elif kind == "http" and str(scheme.get("scheme", "")).lower() == "basic":
            hints.append(SecretHint(secret, env, "Authorization", "Basic {value}", server.scheme))
            notes.append(f"{env}: the base64 of 'user:password' ({origin}: {place})")
        elif kind == "apiKey" and where == "header":
            hints.append(SecretHint(secret, env, str(scheme.get("name")), "{value}", server.scheme))
        else:
            notes.append(
                f"{origin}: {place}: security scheme {name!r} ({kind}, in {where}) cannot be injected by the host "
                "(only headers can); its operations run without it"
            )
    if server.scheme == "http" and hints:
        notes.append(f"the server {server.url} is plain http: the secrets would cross the network unencrypted")
    return hints, notes


def _used_schemes(doc: dict[str, Any]) -> set[str]:
    used: set[str] = set()
    requirements = list(doc.get("security") or [])
    for item in (doc.get("paths") or {}).values():
        for method in METHODS:
            if isinstance(item, dict) and isinstance(item.get(method), dict):
                requirements += item[method].get("security") or []
    for requirement in requirements:
        used.update(requirement or {})
    return used
