"""OpenAPI schemas to the JSON Schema of a tool: ``$ref``s kept as ``$defs``, 3.0 dialect translated.

A ``$ref`` inside a schema becomes ``#/$defs/<Name>`` (``Name`` from
``#/components/schemas/<Name>``, else from the pointer), and its target is
converted once into ``$defs``, so recursive schemas stay recursive instead of
being unrolled. Only references within the document are followed: an external
``$ref``, ``$dynamicRef`` or ``$recursiveRef`` is refused before anything else,
naming where it is, under whatever key it sits (a response named ``default``, a
schema named ``enum``, a reference inside an ``example`` value: the spec
validator would follow each of them). A document nested deeper than
:data:`MAX_DOCUMENT_DEPTH` levels, and a schema nested deeper than
:data:`MAX_SCHEMA_DEPTH` levels (a ``$ref`` counting as one level and its target
as the next), are refused naming the place: the walks here use explicit stacks or
bounded depth, never unbounded recursion.

OpenAPI 3.0's dialect differs from JSON Schema: ``nullable: true`` becomes a
``null`` type, boolean ``exclusiveMinimum``/``exclusiveMaximum`` become the
numeric form, and ``discriminator``, ``xml``, ``externalDocs`` and ``example``
(annotations with no JSON Schema meaning) are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from ..core._errors import InvalidSpec

__all__ = [
    "MAX_DOCUMENT_DEPTH",
    "MAX_SCHEMA_DEPTH",
    "SchemaConverter",
    "check_refs",
    "deref",
    "ecma_pattern",
    "pointer",
    "resolve",
]

#: Levels of mappings and lists a document may nest.
MAX_DOCUMENT_DEPTH = 128
#: Levels of schemas one schema may nest, following each ``$ref`` (an input is at most 64 levels deep).
MAX_SCHEMA_DEPTH = 64
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")

_DATA = frozenset({"enum", "const", "default", "example", "examples"})
#: Schema keywords whose value maps names to schemas: a property may be named ``$ref``.
_NAMED_MAPS = frozenset({"properties", "patternProperties", "definitions", "dependentSchemas"})
_DROP_30 = frozenset({"discriminator", "xml", "externalDocs", "example", "nullable"})


def pointer(*parts: Any) -> str:
    """A JSON pointer from path parts.

    >>> pointer("paths", "/pets/{id}", "get")
    '/paths/~1pets~1{id}/get'
    """
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def check_refs(doc: Any) -> None:
    """Refuse any reference that leaves the document (a file or a URL) or does not resolve, under any key,
    and a document nested deeper than :data:`MAX_DOCUMENT_DEPTH`, naming the place."""
    stack: list[tuple[Any, str, int, bool]] = [(doc, "", 0, False)]
    while stack:
        node, place, depth, named = stack.pop()
        if depth > MAX_DOCUMENT_DEPTH:
            raise InvalidSpec(
                f"{place}: the document is nested deeper than {MAX_DOCUMENT_DEPTH} levels", details={"place": place}
            )
        if isinstance(node, dict):
            if not named:  # in a map of names (``properties``), a key "$ref" is a name, not a reference
                _check_node_refs(doc, node, place)
            stack.extend(
                (value, f"{place}{pointer(key)}", depth + 1, key in _NAMED_MAPS and not named)
                for key, value in node.items()
            )
        elif isinstance(node, list):
            stack.extend((value, f"{place}/{index}", depth + 1, False) for index, value in enumerate(node))


def _check_node_refs(doc: Any, node: dict[str, Any], place: str) -> None:
    for key in _REFS:
        ref = node.get(key)
        if key in node and (not isinstance(ref, str) or not ref.startswith("#")):
            raise InvalidSpec(
                f"{place}/{key}: {ref!r} refers outside the document; only '#/...' references are supported",
                details={"place": f"{place}/{key}"},
            )
    if "$ref" in node:
        resolve(doc, node["$ref"], f"{place}/$ref")


def resolve(doc: Any, ref: str, place: str) -> Any:
    """The node a local ``$ref`` (``#/a/b``) points to."""
    node = doc
    path = ref[1:]
    if path and not path.startswith("/"):
        raise InvalidSpec(f"{place}: $ref {ref!r} is not a JSON pointer", details={"place": place})
    for token in path.split("/")[1:]:
        key = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise InvalidSpec(f"{place}: $ref {ref!r} does not resolve", details={"place": place, "ref": ref})
    return node


def deref(doc: Any, node: Any, place: str) -> tuple[Any, str]:
    """Follow a chain of ``$ref`` objects (parameters, bodies, responses); return (target, its place)."""
    seen = set()
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        ref = node["$ref"]
        if ref in seen:
            raise InvalidSpec(f"{place}: $ref {ref!r} refers to itself", details={"place": place})
        seen.add(ref)
        node, place = resolve(doc, ref, place), ref[1:]
    return node, place


class SchemaConverter:
    """Converts the schemas of one document, each referenced schema once into ``defs``.

    :meth:`with_defs` gives one schema the ``$defs`` it reaches, and only those:
    an input schema never carries what only outputs refer to.
    """

    def __init__(self, doc: Any, openapi_30: bool, origin: str = "(document)") -> None:
        self.doc = doc
        self.openapi_30 = openapi_30
        self.origin = origin
        self.defs: dict[str, Any] = {}
        self._names: dict[str, str] = {}
        self._failed: dict[str, InvalidSpec] = {}
        self._refs_of: dict[str, frozenset[str]] = {}
        self._checked: dict[str, ValueError | None] = {}
        self._sizes: dict[str, int] = {}
        self._depth = 0

    def check(self, schema: Any) -> None:
        """Raise ValueError (naming the place) unless ``schema`` (from :meth:`with_defs`) is a schema the host
        may use: as ``check_schema`` on the whole, but each definition checked once per document."""
        from ..schema._schemarules import check_schema

        if not isinstance(schema, dict) or "$defs" not in schema:
            check_schema(schema)
            return
        root = {key: value for key, value in schema.items() if key != "$defs"}
        if _mixes_keywords([root, *schema["$defs"].values()]):
            check_schema(schema)  # a rule about the schema as a whole: checked as a whole
            return
        for name in schema["$defs"]:
            if name not in self._checked:
                try:
                    check_schema({"$defs": {name: self.defs[name]}})
                    self._checked[name] = None
                except ValueError as exc:
                    self._checked[name] = exc
            problem = self._checked[name]
            if problem is not None:
                raise problem
        check_schema(root)

    def with_defs(self, schema: Any, max_bytes: int | None = None) -> Any:
        """``schema`` with a ``$defs`` of the definitions it reaches (itself unchanged when none).

        With ``max_bytes``, definitions whose JSON would take more than that keep the ones nearest the
        root (breadth first) within it; a reference to one left out becomes ``{}`` (any value), described
        as not expanded (Stripe's responses reach most of its 1,300 schemas: 670 KB each, unbounded).
        """
        if not isinstance(schema, dict):
            return schema
        reached: list[str] = []  # breadth first: nearest the root first
        seen: set[str] = set()
        todo = sorted(set(_def_refs(schema)))
        while todo:
            level: list[str] = []
            for name in todo:
                if name in seen or name not in self.defs:
                    continue
                seen.add(name)
                reached.append(name)
                refs = self._refs_of.get(name)
                if refs is None:
                    refs = self._refs_of[name] = frozenset(_def_refs(self.defs[name]))
                level.extend(sorted(refs))
            todo = level
        if not reached:
            return schema
        if max_bytes is not None:
            kept = self._within(reached, max_bytes)
            if len(kept) < len(reached):
                return self._pruned(schema, kept)
        return {**schema, "$defs": {name: self.defs[name] for name in sorted(reached)}}

    def _within(self, reached: list[str], max_bytes: int) -> list[str]:
        """The first of ``reached`` whose JSON fits ``max_bytes`` together."""
        import json

        kept, total = [], 0
        for name in reached:
            size = self._sizes.get(name)
            if size is None:
                size = self._sizes[name] = len(json.dumps(self.defs[name]))
            if total + size > max_bytes:
                break
            kept.append(name)
            total += size
        return kept

    def _pruned(self, schema: dict[str, Any], kept: list[str]) -> dict[str, Any]:
        """``schema`` and the definitions ``kept``, each reference to another definition made ``{}``."""
        keep = set(kept)

        def prune(node: Any) -> Any:
            if isinstance(node, list):
                return [prune(item) for item in node]
            if not isinstance(node, dict):
                return node
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[len("#/$defs/") :] not in keep:
                return {"description": f"{ref[len('#/$defs/') :]} (not expanded: the schema's size limit)"}
            return {key: value if key in _DATA else prune(value) for key, value in node.items()}

        defs = {  # a definition that refers to none left out is shared, not copied (memory: Stripe's 452 tools)
            name: self.defs[name] if self._refs_of.get(name, frozenset()) <= keep else prune(self.defs[name])
            for name in sorted(kept)
        }
        return {**prune(schema), "$defs": defs}

    def convert(self, node: Any, place: str) -> Any:
        """The JSON Schema for the OpenAPI schema ``node`` found at ``place``.

        Raises:
            InvalidSpec: the schema nests deeper than :data:`MAX_SCHEMA_DEPTH` (naming the place).
        """
        if isinstance(node, list):
            return [self.convert(item, f"{place}/{i}") for i, item in enumerate(node)]
        if not isinstance(node, dict):
            return node
        if self._depth >= MAX_SCHEMA_DEPTH:
            raise InvalidSpec(
                f"{self.origin}: {place}: the schema is nested deeper than {MAX_SCHEMA_DEPTH} levels "
                "(each $ref counting as one level and its target as the next)",
                details={"place": place},
            )
        self._depth += 1
        try:
            return self._convert(node, place)
        finally:
            self._depth -= 1

    def _convert(self, node: dict[str, Any], place: str) -> Any:
        if isinstance(node.get("$ref"), str):
            return {**self._keep(node), "$ref": f"#/$defs/{self._define(node['$ref'], place)}"}
        converted: dict[str, Any] = {}
        for key, value in node.items():
            if self.openapi_30 and key in _DROP_30:
                continue
            if key in _DATA:
                converted[key] = value
            elif key == "pattern" and isinstance(value, str):
                converted[key] = ecma_pattern(value)
            elif key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
                converted[key] = {k: self.convert(v, f"{place}{pointer(key, k)}") for k, v in (value or {}).items()}
            else:
                converted[key] = self.convert(value, f"{place}{pointer(key)}")
        return self._fix_30(node, converted) if self.openapi_30 else converted

    def _keep(self, node: dict[str, Any]) -> dict[str, Any]:
        """Siblings of a ``$ref`` that still mean something (3.1 allows them; descriptions are kept)."""
        return {k: v for k, v in node.items() if k in ("description", "title") or (not self.openapi_30 and k != "$ref")}

    def _define(self, ref: str, place: str) -> str:
        name = self._names.get(ref)
        if name is not None:
            return name
        if ref in self._failed:
            raise self._failed[ref]
        target = resolve(self.doc, ref, place)
        match = re.fullmatch(r"#/components/schemas/([^/]+)", ref)
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", unquote(match.group(1)) if match else ref[2:]) or "schema"
        name, n = base, 2
        while name in self.defs:
            name, n = f"{base}_{n}", n + 1
        self._names[ref] = name
        self.defs[name] = True  # a placeholder while converting: a recursive reference finds the name
        try:
            self.defs[name] = self.convert(target, ref[1:])
        except InvalidSpec as exc:  # every later reference to it fails the same way, never finds the placeholder
            del self._names[ref], self.defs[name]
            self._failed[ref] = exc
            raise
        return name

    @staticmethod
    def _fix_30(node: dict[str, Any], converted: dict[str, Any]) -> dict[str, Any]:
        if node.get("nullable") is True:
            kind = converted.get("type")
            if isinstance(kind, str):
                converted["type"] = [kind, "null"]
            elif "enum" in converted and None not in converted["enum"]:
                converted["enum"] = [*converted["enum"], None]
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if node.get(key) is True and bound in converted:
                converted[key] = converted.pop(bound)
            elif node.get(key) is False:
                converted.pop(key)
        return converted


#: An escaped backslash, or a backslash before punctuation with no meaning in a regex (an identity escape).
_IDENTITY_ESCAPE = re.compile(r"""\\\\|\\([:'"@#%&=!<>,;~` ])""")


def ecma_pattern(pattern: str) -> str:
    r"""``pattern`` with identity escapes of punctuation (``\:``, which PCRE and Python accept and
    ECMA-262's unicode mode refuses) written as the character itself: the same language.

    >>> ecma_pattern(r"^[a-z]\:[0-9]$"), ecma_pattern(r"a\\:b"), ecma_pattern(r"\d\.")
    ('^[a-z]:[0-9]$', 'a\\\\:b', '\\d\\.')
    """
    if "\\" not in pattern:
        return pattern
    return _IDENTITY_ESCAPE.sub(lambda match: match.group(1) or match.group(0), pattern)


def _def_refs(schema: Any) -> Iterator[str]:
    """The names of the ``#/$defs/<name>`` a converted schema refers to directly (its own ``$defs`` aside)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                yield ref[len("#/$defs/") :]
            stack.extend(value for key, value in node.items() if key != "$defs")
        elif isinstance(node, list):
            stack.extend(node)


def _mixes_keywords(schemas: list[Any]) -> bool:
    """Whether ``unevaluatedProperties`` and ``patternProperties`` may both be in ``schemas`` (a text search:
    an over-estimate, which only costs a whole check)."""
    import json

    text = json.dumps(schemas)
    return '"unevaluatedProperties"' in text and '"patternProperties"' in text
