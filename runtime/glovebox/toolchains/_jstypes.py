"""A JavaScript or TypeScript tool's input schema, read from its types when its manifest gives none.

esbuild strips types without reading them, so the TypeScript compiler's own
checker (npm ``typescript``, pinned in ``guest/js/package-lock.json`` beside
esbuild) reads them: ``guest/js/schema.cjs`` runs under Node, takes the type of
the default export's first parameter — a TypeScript annotation, or in a
``.js`` file a JSDoc ``@param {...}`` — and turns it into a JSON Schema:

- ``string``, ``number``, ``boolean``, ``null``, literal types (``const``),
  unions of literals (``enum``), other unions (``anyOf``);
- arrays (``items``), tuples (``prefixItems``);
- object types and interfaces: ``properties`` (a property's doc comment is its
  ``description``), ``required`` for the properties not marked optional, and
  ``additionalProperties`` false, or the type of a string index signature
  (``Record<string, T>``);
- ``any``/``unknown`` accept anything.

A type JSON cannot carry (a function, a ``Date``, a ``bigint``, a recursive
type) is a build error naming file:line:column. With no parameter, or an
untyped one, there is nothing to go on and the tool accepts any input (its
registration warns, as before). The doc comment's first paragraph becomes the
manifest's description when it has none. The answer is cached by the source
text (and its sibling sources') and the toolchain, so an unchanged tool does not
start Node again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from ..core._errors import BuildError
from ._binaries import run_tool
from ._jstoolchain import ESBUILD_HINT, typescript_dir

__all__ = ["input_types"]


def input_types(src: Path, sdk: Path, cache_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """The input schema that the default export's parameter type gives (None: no type), and its description."""
    script = sdk / "js" / "schema.cjs"
    helper = sdk / "js" / "glovebox.d.ts"
    key = _cache_key(src, script, helper, sdk / "js" / "package-lock.json")
    cached = cache_dir / f"jstypes-{key}.json"
    if cached.is_file():
        answer = json.loads(cached.read_text(encoding="utf-8"))
    else:
        node = shutil.which("node")
        if node is None:
            raise BuildError(f"node is not installed; {ESBUILD_HINT}")
        typescript = typescript_dir(sdk)
        printed = run_tool([node, str(script), str(typescript), str(helper), str(src)], "the TypeScript checker")
        try:
            answer = json.loads(printed)
        except json.JSONDecodeError as exc:
            raise BuildError(f"the TypeScript checker answered no JSON: {printed[:200]!r}") from exc
        if "error" not in answer:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(answer), encoding="utf-8")
    if "error" in answer:
        raise BuildError(
            f"{answer['error']}\n(glovebox: the input schema is read from this type; give input_schema"
            " in glovebox.toml beside the source to set it yourself)"
        )
    return answer.get("schema"), str(answer.get("description") or "")


#: The files beside a tool whose types it may import: a change to any of them reads the types again.
_SOURCES = (".ts", ".mts", ".cts", ".js", ".mjs", ".cjs")


def _cache_key(src: Path, *files: Path) -> str:
    digest = hashlib.sha256(str(src.resolve()).encode())
    beside = sorted(p for p in src.parent.iterdir() if p.is_file() and p.suffix in _SOURCES)
    for path in (*beside, *files):
        digest.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]
