"""Trim GitHub's REST description to a few operations and the components they reach.

Usage: python trim.py package/generated/api.github.com.json api.github.com.trimmed.json
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

KEEP = {
    "/repos/{owner}/{repo}": ["get"],
    "/repos/{owner}/{repo}/contents/{path}": ["get"],
    "/repos/{owner}/{repo}/issues": ["get", "post"],
    "/markdown/raw": ["post"],
    "/repos/{owner}/{repo}/releases/{release_id}/assets": ["post"],
    "/organizations/{org}/actions/cache/retention-limit": ["get"],
    "/repos/{owner}/{repo}/actions/cache/retention-limit": ["get"],
    "/enterprises/{enterprise}/actions/cache/retention-limit": ["get"],
    "/orgs/{org}/actions/permissions/fork-pr-contributor-approval": ["get"],
    "/repos/{owner}/{repo}/actions/permissions/fork-pr-contributor-approval": ["get"],
}


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


def trim(doc: dict[str, Any]) -> dict[str, Any]:
    paths = {
        path: {key: value for key, value in doc["paths"][path].items() if key in methods or key == "parameters"}
        for path, methods in KEEP.items()
    }
    out = {key: doc[key] for key in ("openapi", "info", "servers", "externalDocs", "tags") if key in doc}
    out["paths"] = paths
    components: dict[str, dict[str, Any]] = {}
    todo, seen = list(refs(paths)), set()
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        seen.add(ref)
        _, _, kind, name = ref.split("/", 3)
        target = doc["components"][kind][name]
        components.setdefault(kind, {})[name] = target
        todo.extend(refs(target))
    out["components"] = {kind: dict(sorted(items.items())) for kind, items in sorted(components.items())}
    return out


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as source:
        trimmed = trim(json.load(source))
    with open(sys.argv[2], "w", encoding="utf-8") as target:
        json.dump(trimmed, target, indent=1, ensure_ascii=False)
