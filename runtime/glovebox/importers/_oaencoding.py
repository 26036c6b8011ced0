"""How an OpenAPI operation's parameters and request body become its tool's input and request encoding.

Parameters keep their ``style`` and ``explode`` (a :class:`ParamStyle` where they
differ from their place's default); the body is sent as the first media type
:func:`body_media` accepts (JSON, a form, multipart, text, raw bytes), with what
the guest needs to encode it (``body_encoding``, ``body_fields``, ``body_styles``,
``body_files``, ``body_media``). The guest's side is ``guest/operation/encode.h``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core._errors import InvalidSpec
from ..model._manifest import ParamStyle
from ._oaschema import SchemaConverter, deref, pointer

__all__ = [
    "BINARY_BODY",
    "FILE_PART",
    "body_media",
    "check_parameter",
    "param_schema",
    "param_style",
    "request_body",
    "sends_matrix",
]

_DEFAULT_STYLE = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}
#: The styles OpenAPI defines for each place of a parameter.
_STYLES = {
    "path": ("simple", "label", "matrix"),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
    "cookie": ("form",),
}


def param_style(param: dict[str, Any]) -> ParamStyle | None:
    """How a parameter is serialized when not as its place's default (simple; query and cookie: form,
    exploded), else None."""
    where = str(param.get("in"))
    if "content" in param:  # application/json (checked): the value's JSON text, one value
        return ParamStyle(style="json", explode=False)
    style = str(param.get("style") or _DEFAULT_STYLE[where])
    explode = param.get("explode", style == "form")
    reserved = bool(param.get("allowReserved")) and where == "query"
    if style == _DEFAULT_STYLE[where] and explode is (style == "form") and not reserved:
        return None
    return ParamStyle.model_validate({"style": style, "explode": bool(explode), "allow_reserved": reserved})


def check_parameter(param: dict[str, Any], place: str, origin: str) -> None:
    """Refuse a parameter the guest cannot send."""
    where = param.get("in")
    if where not in _DEFAULT_STYLE:
        raise InvalidSpec(
            f"{origin}: {place}/in: parameters in {where!r} are not supported (path, query, header and cookie are)",
            details={"place": f"{place}/in"},
        )
    style = param.get("style", _DEFAULT_STYLE[where])
    if "content" in param and param_schema(param) is None:
        raise InvalidSpec(
            f"{origin}: {place}/content: parameter {param.get('name')!r}: a parameter serialized by a media type "
            f"({', '.join(param['content'] or {}) or 'none'}) is not supported (application/json and the schema "
            "styles are)",
            details={"place": f"{place}/content"},
        )
    if style not in _STYLES[where]:
        raise InvalidSpec(
            f"{origin}: {place}/style: parameter {param.get('name')!r}: style {style!r} is not defined for "
            f"{where} parameters ({', '.join(_STYLES[where])} are)",
            details={"place": f"{place}/style"},
        )


def param_schema(param: dict[str, Any]) -> tuple[Any, str] | None:
    """A parameter's schema and its place under the parameter: its ``schema``, or that of its one JSON
    ``content`` media type; None when its content is another media type."""
    content = param.get("content")
    if content is None:
        return param.get("schema", {}), "/schema"
    if isinstance(content, dict) and len(content) == 1:
        media, value = next(iter(content.items()))
        base = str(media).split(";")[0].strip().lower()
        if (base == "application/json" or base.endswith("+json")) and isinstance(value, dict):
            return value.get("schema", {}), pointer("content", media, "schema")
    return None


def sends_matrix(styles: dict[str, ParamStyle], path_params: list[str]) -> bool:
    """Whether the operation sends ``;`` path parameters (a matrix-style path parameter)."""
    return any(styles[name].style == "matrix" for name in path_params if name in styles)


def request_body(
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
