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
from collections.abc import Collection, Iterator, Mapping, Sequence
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
from ._oaencoding import check_parameter, param_schema, param_style, request_body, sends_matrix
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
    fields = _parameter_fields(parameters, "requestBody" in operation, converter, origin)
    properties, required, groups, styles = fields.properties, fields.required, fields.groups, fields.styles
    body = request_body(doc, operation, place, origin, converter, properties, required)
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
        "capabilities": {
            "http": [http_rule(server, upper, path, where, path_params=sends_matrix(styles, groups["path"]))]
        },
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
            wire_names=fields.wire_names,
            **body,
        ),
    }
    action = "allow" if upper in READ_METHODS else "require_approval"
    return Planned(manifest=_manifest(manifest, where, converter), action=action, where=place)


class _Fields(NamedTuple):
    """What an operation's parameters make of its input schema and request."""

    properties: dict[str, Any]
    required: list[str]
    groups: dict[str, list[str]]  # the input fields sent in the path, the query, headers and cookies
    styles: dict[str, ParamStyle]
    wire_names: dict[str, str]


def _parameter_fields(
    parameters: list[tuple[dict[str, Any], str]], has_body: bool, converter: SchemaConverter, origin: str
) -> _Fields:
    """Each parameter's input field (its schema), where it is sent, in which style and under which name."""
    fields = _Fields({}, [], {"path": [], "query": [], "header": [], "cookie": []}, {}, {})
    taken = {param["name"] for param, _ in parameters if param["in"] == "path"} | ({"body"} if has_body else set())
    for param, param_place in parameters:
        raw, under = param_schema(param) or ({}, "/schema")
        schema = converter.convert(raw, f"{param_place}{under}")
        if param.get("description") and isinstance(schema, dict):
            schema = {**schema, "description": param["description"]}
        field = _field_name(param, fields.properties, taken, param_place, origin)
        if field != param["name"]:
            fields.wire_names[field] = param["name"]
        fields.properties[field] = schema
        fields.groups[param["in"]].append(field)
        style = param_style(param)
        if style is not None:
            fields.styles[field] = style
        if param.get("required") or param["in"] == "path":
            fields.required.append(field)
    return fields


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
            check_parameter(param, param_place, origin)
            merged[(param["name"], param["in"])] = (param, param_place)
    return list(merged.values())


def _json_media(content: dict[str, Any]) -> str | None:
    for media in content:
        base = media.split(";")[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            return str(media)
    return None


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
        if kind in ("oauth2", "openIdConnect"):  # a connection per principal: glovebox connect API
            reference = f"connection://{api}/{{principal}}"
            hints.append(SecretHint(secret, env, "Authorization", "Bearer {value}", server.scheme, reference))
            notes.append(_connect_note(doc, api, name, scheme, origin, place))
        elif kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer":
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


def _requirements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    requirements = list(doc.get("security") or [])
    for item in (doc.get("paths") or {}).values():
        for method in METHODS:
            if isinstance(item, dict) and isinstance(item.get(method), dict):
                requirements += item[method].get("security") or []
    return [requirement for requirement in requirements if isinstance(requirement, dict)]


def _used_schemes(doc: dict[str, Any]) -> set[str]:
    used: set[str] = set()
    for requirement in _requirements(doc):
        used.update(requirement)
    return used


def _connect_note(doc: dict[str, Any], api: str, name: str, scheme: dict[str, Any], origin: str, place: str) -> str:
    """How an OAuth 2 (or OpenID Connect) scheme's tokens come: ``glovebox connect`` per principal, its scopes."""
    scopes = sorted(
        {str(scope) for requirement in _requirements(doc) for scope in (requirement.get(name) or ())}
    )  # fmt: skip
    command = f"glovebox connect {api} --account PRINCIPAL" + (f" --scope '{' '.join(scopes)}'" if scopes else "")
    where = ""
    if scheme.get("type") == "openIdConnect" and isinstance(scheme.get("openIdConnectUrl"), str):
        where = f" (its OpenID configuration: {scheme['openIdConnectUrl']})"
    else:
        flows = scheme.get("flows")
        flows = flows if isinstance(flows, dict) else {}
        urls = [f.get("tokenUrl") or f.get("authorizationUrl") for f in flows.values() if isinstance(f, dict)]
        found = next((url for url in urls if isinstance(url, str)), None)
        where = f" (its token URL: {found})" if found else ""
    return (
        f"security scheme {name!r} ({scheme.get('type')}, {origin}: {place}) is OAuth: {command} connects each "
        f"principal's account (the fragment sends connection://{api}/{{principal}}); list the authorization "
        f"server's issuer{where} in the policy's connections.issuers"
    )
