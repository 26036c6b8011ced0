"""Swagger 2.0 to OpenAPI 3.0: what ``glovebox import openapi`` does first with a ``swagger: "2.0"`` document.

The conversion follows the OpenAPI 3.0 specification's own mapping: ``host``,
``basePath`` and ``schemes`` become ``servers`` (https first); ``in: body`` a
``requestBody`` in each media type of ``consumes``; ``in: formData`` parameters
one object schema, sent as ``multipart/form-data`` when ``consumes`` says so or a
parameter is a ``file``, else as ``application/x-www-form-urlencoded``;
``collectionFormat`` a ``style`` and ``explode`` (csv: form or simple, ssv:
spaceDelimited, pipes: pipeDelimited, multi: form exploded; tsv has no OpenAPI 3
style and becomes a query parameter the import skips); ``definitions``
``components/schemas`` (every ``$ref`` rewritten); ``securityDefinitions``
``components/securitySchemes``; responses' schemas a ``content`` in each media
type of ``produces``. Parameter and response ``$ref``s are inlined.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin

from ..core._errors import InvalidSpec
from ._oaschema import deref

__all__ = ["from_swagger"]

#: Keywords a Swagger 2.0 non-body parameter shares with a schema.
_SCHEMA_KEYS = (
    "type format items default maximum exclusiveMaximum minimum exclusiveMinimum maxLength minLength pattern "
    "maxItems minItems uniqueItems enum multipleOf"
).split()
_FLOWS = {"implicit": "implicit", "password": "password", "application": "clientCredentials"}
_FLOWS["accessCode"] = "authorizationCode"


def from_swagger(doc: dict[str, Any], origin: str) -> dict[str, Any]:
    """The OpenAPI 3.0.3 document equivalent to the Swagger 2.0 document ``doc``.

    Raises:
        InvalidSpec: the document is not Swagger 2.0 or has no paths object.
    """
    if str(doc.get("swagger")) != "2.0":
        raise InvalidSpec(
            f"{origin}: /swagger: {doc.get('swagger')!r}; Swagger 2.0 and OpenAPI 3.0/3.1 are supported",
            details={"place": "/swagger"},
        )
    converted: dict[str, Any] = {"openapi": "3.0.3", "info": doc.get("info") or {"title": "", "version": ""}}
    servers = _servers(doc, origin)
    if servers:
        converted["servers"] = servers
    for key in ("tags", "security", "externalDocs"):
        if key in doc:
            converted[key] = doc[key]
    components: dict[str, Any] = {}
    if doc.get("definitions"):
        components["schemas"] = {name: _schema(schema) for name, schema in doc["definitions"].items()}
    if doc.get("securityDefinitions"):
        components["securitySchemes"] = {
            name: _security_scheme(scheme) for name, scheme in doc["securityDefinitions"].items()
        }
    if components:
        converted["components"] = components
    converted["paths"] = {
        path: _path_item(doc, item, f"/paths/{path}") for path, item in (doc.get("paths") or {}).items()
    }
    return converted


def _servers(doc: dict[str, Any], origin: str) -> list[dict[str, str]]:
    base = str(doc.get("basePath") or "/")
    schemes = [str(s) for s in doc.get("schemes") or []]
    host = doc.get("host")
    if not host:  # the host serving the document, when it came from a URL
        return [{"url": urljoin(origin, base).rstrip("/")}] if origin.startswith(("http://", "https://")) else []
    scheme = "https" if "https" in schemes or not schemes else schemes[0]
    return [{"url": f"{scheme}://{host}{base}".rstrip("/") or f"{scheme}://{host}"}]


def _path_item(doc: dict[str, Any], item: Any, place: str) -> Any:
    item, _ = deref(doc, item, place)
    if not isinstance(item, dict):
        return item
    shared = [deref(doc, p, place)[0] for p in item.get("parameters") or []]
    converted: dict[str, Any] = {}
    for method, operation in item.items():
        if method in ("get", "put", "post", "delete", "options", "head", "patch") and isinstance(operation, dict):
            converted[method] = _operation(doc, operation, shared, f"{place}/{method}")
    return converted


def _operation(doc: dict[str, Any], operation: dict[str, Any], shared: list[Any], place: str) -> dict[str, Any]:
    converted: dict[str, Any] = {
        key: operation[key]
        for key in ("tags", "summary", "description", "externalDocs", "operationId", "deprecated", "security")
        if key in operation
    }
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*shared, *(operation.get("parameters") or [])]:
        param, _ = deref(doc, raw, place)
        if isinstance(param, dict):
            merged[(str(param.get("name")), str(param.get("in")))] = param
    consumes = operation.get("consumes") or doc.get("consumes") or ["application/json"]
    produces = operation.get("produces") or doc.get("produces") or ["application/json"]
    parameters = [_parameter(p) for p in merged.values() if p.get("in") not in ("body", "formData")]
    if parameters:
        converted["parameters"] = parameters
    body = _request_body(merged.values(), consumes)
    if body is not None:
        converted["requestBody"] = body
    converted["responses"] = {
        str(code): _response(doc, response, produces, place)
        for code, response in (operation.get("responses") or {}).items()
    } or {"default": {"description": ""}}
    return converted


def _parameter(param: dict[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = {key: param[key] for key in ("name", "in", "description", "required") if key in param}
    converted["schema"] = _param_schema(param)
    if param.get("type") == "array":
        fmt = param.get("collectionFormat", "csv")
        where = param.get("in")
        if fmt == "multi":
            converted |= {"style": "form", "explode": True}
        elif fmt == "csv":
            converted |= {"style": "form", "explode": False} if where in ("query", "cookie") else {"style": "simple"}
        elif fmt == "ssv":
            converted |= {"style": "spaceDelimited", "explode": False}
        elif fmt == "pipes":
            converted |= {"style": "pipeDelimited", "explode": False}
        else:  # tsv: no OpenAPI 3 style; a media type the import reports as not supported
            converted.pop("schema")
            converted["content"] = {"text/tab-separated-values": {"schema": _param_schema(param)}}
    if param.get("allowEmptyValue") and param.get("in") == "query":
        converted["allowEmptyValue"] = True
    return converted


def _param_schema(param: dict[str, Any]) -> dict[str, Any]:
    schema = {key: param[key] for key in _SCHEMA_KEYS if key in param}
    if schema.get("type") == "file":
        schema = {"type": "string", "format": "binary"}
    if isinstance(schema.get("items"), dict):
        schema["items"] = _param_schema(schema["items"])
    return schema


def _request_body(params: Any, consumes: list[str]) -> dict[str, Any] | None:
    params = list(params)
    body = next((p for p in params if p.get("in") == "body"), None)
    if body is not None:
        body_schema = _schema(body.get("schema") or {})
        media: list[str] = [m for m in consumes if "form" not in m] or ["application/json"]
        converted: dict[str, Any] = {"content": {m: {"schema": body_schema} for m in media}}
        for key in ("description", "required"):
            if key in body:
                converted[key] = body[key]
        return converted
    fields = [p for p in params if p.get("in") == "formData"]
    if not fields:
        return None
    multipart = any(p.get("type") == "file" for p in fields) or any("multipart" in m for m in consumes)
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    encoding: dict[str, Any] = {}
    for field in fields:
        prop = _param_schema(field)
        if field.get("description"):
            prop["description"] = field["description"]
        schema["properties"][field["name"]] = prop
        if field.get("required"):
            schema.setdefault("required", []).append(field["name"])
        if field.get("type") == "array" and field.get("collectionFormat", "csv") != "multi" and not multipart:
            encoding[field["name"]] = {"style": "form", "explode": False}
    form = "multipart/form-data" if multipart else "application/x-www-form-urlencoded"
    content: dict[str, Any] = {"schema": schema}
    if encoding:
        content["encoding"] = encoding
    return {"content": {form: content}, "required": "required" in schema}


def _response(doc: dict[str, Any], response: Any, produces: list[str], place: str) -> dict[str, Any]:
    response, _ = deref(doc, response, place)
    if not isinstance(response, dict):
        return {"description": ""}
    converted: dict[str, Any] = {"description": str(response.get("description", ""))}
    if "schema" in response:
        schema = _schema(response["schema"])
        converted["content"] = {media: {"schema": schema} for media in produces}
    return converted


def _security_scheme(scheme: dict[str, Any]) -> dict[str, Any]:
    kind = scheme.get("type")
    base = {"description": scheme["description"]} if "description" in scheme else {}
    if kind == "basic":
        return {**base, "type": "http", "scheme": "basic"}
    if kind == "apiKey":
        return {**base, "type": "apiKey", "name": scheme.get("name", ""), "in": scheme.get("in", "header")}
    flow: dict[str, Any] = {key: scheme[key] for key in ("authorizationUrl", "tokenUrl") if key in scheme}
    flow["scopes"] = scheme.get("scopes") or {}
    return {**base, "type": "oauth2", "flows": {_FLOWS.get(str(scheme.get("flow")), "implicit"): flow}}


def _schema(node: Any) -> Any:
    """A Swagger 2.0 schema as OpenAPI 3.0: ``#/definitions/`` references rewritten, ``type: file`` a binary
    string, ``x-nullable`` ``nullable``, a string ``discriminator`` an object."""
    if isinstance(node, list):
        return [_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith("#/definitions/"):
            converted[key] = "#/components/schemas/" + value.removeprefix("#/definitions/")
        elif key in ("properties", "definitions"):
            converted[key] = {name: _schema(sub) for name, sub in (value or {}).items()}
        elif key == "x-nullable":
            converted["nullable"] = bool(value)
        elif key == "discriminator" and isinstance(value, str):
            converted[key] = {"propertyName": value}
        elif key in ("example", "default", "enum", "x-example"):
            converted[key] = value
        else:
            converted[key] = _schema(value)
    if converted.get("type") == "file":
        converted = {**converted, "type": "string", "format": "binary"}
    return converted
