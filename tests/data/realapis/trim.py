"""Trim a published API description to a few operations (their 2xx responses) and the components (or
definitions) they reach.

Usage: python trim.py SOURCE.json TARGET.json 'METHOD /path' ['METHOD /path' ...]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any


def refs(node: Any) -> Iterator[str]:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("$ref"), str):
                yield item["$ref"]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def trim(doc: dict[str, Any], keep: list[str]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for entry in keep:
        method, path = entry.split(" ", 1)
        item = doc["paths"][path]
        paths.setdefault(path, {k: v for k, v in item.items() if k in ("parameters", "servers")})
        operation = dict(item[method.lower()])
        if "responses" in operation:  # the successful answers only: error schemas reach half of some APIs
            operation["responses"] = {c: r for c, r in operation["responses"].items() if str(c).startswith("2")}
        paths[path][method.lower()] = operation
    head = ("openapi", "swagger", "info", "servers", "host", "basePath", "schemes", "consumes", "produces")
    out = {key: doc[key] for key in (*head, "security", "tags") if key in doc}
    out["paths"] = paths
    kept: dict[str, dict[str, Any]] = {}
    todo, seen = list(refs(paths)), set()
    for key in ("securitySchemes", "securityDefinitions"):
        scope = doc.get("components", {}) if key == "securitySchemes" else doc
        if key in scope:
            todo.extend(refs(scope[key]))
            kept.setdefault(key, {}).update(scope[key])
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        seen.add(ref)
        parts = ref[2:].split("/")
        kind, name = ("/".join(parts[:-1]), parts[-1])
        scope = doc
        for part in parts[:-1]:
            scope = scope[part]
        kept.setdefault(kind, {})[name] = scope[name]
        todo.extend(refs(scope[name]))
    for kind, items in sorted(kept.items()):
        if kind == "securitySchemes" or kind.startswith("components/"):
            out.setdefault("components", {})[kind.removeprefix("components/")] = dict(sorted(items.items()))
        else:
            out[kind] = dict(sorted(items.items()))
    return out


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as source:
        trimmed = trim(json.load(source), sys.argv[3:])
    with open(sys.argv[2], "w", encoding="utf-8") as target:
        json.dump(trimmed, target, indent=None, separators=(",", ":"), ensure_ascii=False)
