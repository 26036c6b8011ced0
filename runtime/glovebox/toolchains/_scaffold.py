"""``glovebox new NAME --lang c|python|ts``: a tool that builds, registers and answers on the first try.

:func:`scaffold` writes ``NAME/`` with the source (``tool.c``, ``tool.py`` or
``tool.ts``), its manifest ``glovebox.toml`` (name, version, description and, for C
and TypeScript, both schemas; a Python tool's schemas come from its type hints),
and ``input.json``, a test input; it returns what it wrote and the commands that
build, register and call the tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..model._manifest import NAME_PATTERN

__all__ = ["LANGUAGES", "Scaffold", "scaffold"]

LANGUAGES = ("c", "python", "ts")

_C_SOURCE = """\
/* {name}: greet someone by name. Build: glovebox build {name}/tool.c -o {name}/{name}.wasm */
#include "glovebox.h"

int gb_tool(const char *input, size_t input_len, gb_buf *out) {{
    const char *val;
    size_t val_len;
    gb_buf who = {{0}}, text = {{0}};
    if (gb_json_get(input, input_len, "name", &val, &val_len) != 0 || gb_json_string(val, val_len, &who) != 0)
        return gb_error(out, "input must have a string field \\"name\\"");
    gb_log(GB_INFO, "greeting someone");
    gb_buf_printf(&text, "Hello, %.*s!", (int)who.len, who.data);
    gb_buf_puts(out, "{{\\"greeting\\": ");
    gb_buf_json_string(out, text.data, text.len);
    gb_buf_puts(out, "}}");
    gb_buf_free(&who);
    gb_buf_free(&text);
    return GB_OK;
}}
"""

_C_MANIFEST = """\
# The manifest of {name}: what agents are told about it, and what it may use.
name = "{name}"
version = "0.1.0"
description = "Greet someone by name."

[input_schema]
type = "object"
required = ["name"]
additionalProperties = false
properties.name = {{ type = "string", description = "Who to greet.", maxLength = 256 }}

[output_schema]
type = "object"
required = ["greeting"]
properties.greeting = {{ type = "string" }}

[limits]
fuel = 10_000_000
memory_bytes = 1_048_576
timeout_ms = 1000
"""

_PY_SOURCE = '''\
"""{name}: greet someone by name. Build: glovebox build {name}/tool.py -o {name}/{name}.wasm"""

from glovebox_guest import ToolError, log, tool


@tool
def {function}(name: str) -> dict[str, str]:
    """Greet someone by name.

    Args:
        name: Who to greet.
    """
    if not name.strip():
        raise ToolError("name must not be empty")
    log("info", "greeting someone")
    return {{"greeting": f"Hello, {{name}}!"}}
'''

_PY_MANIFEST = """\
# Fields here override what glovebox build reads from tool.py (the schemas come from its type hints).
name = "{name}"
version = "0.1.0"
description = "Greet someone by name."
"""

_TS_SOURCE = """\
// {name}: greet someone by name. Build: glovebox build {name}/tool.ts -o {name}/{name}.wasm
import {{ ToolError, log }} from "glovebox";

interface Input {{
  name: string;
}}

export default function greet(input: Input): {{ greeting: string }} {{
  if (input.name.trim() === "") throw new ToolError("name must not be empty");
  log("info", "greeting someone");
  return {{ greeting: `Hello, ${{input.name}}!` }};
}}
"""

# A JavaScript engine starts with ~1.5 MiB of memory, and interpreted code needs more fuel than C.
_TS_MANIFEST = (
    _C_MANIFEST.replace("fuel = 10_000_000", "fuel = 500_000_000")
    .replace("memory_bytes = 1_048_576", "memory_bytes = 16_777_216")
    .replace("timeout_ms = 1000", "timeout_ms = 2000")
)

_SOURCES = {
    "c": (".c", _C_SOURCE, _C_MANIFEST),
    "python": (".py", _PY_SOURCE, _PY_MANIFEST),
    "ts": (".ts", _TS_SOURCE, _TS_MANIFEST),
}

_INPUT = '{"name": "Ada"}\n'


@dataclass(frozen=True)
class Scaffold:
    """What :func:`scaffold` wrote and the commands that take the tool from source to a call."""

    directory: Path
    files: tuple[Path, ...]
    commands: tuple[str, ...]


def scaffold(name: str, lang: str, parent: str | Path = ".") -> Scaffold:
    """Write a new tool ``name`` in ``lang`` into ``parent/name``; nothing is overwritten.

    Raises:
        ValueError: ``name`` is not a tool name (lowercase letters, digits, ``-``
            and ``_``, at most 64), ``lang`` is not one of :data:`LANGUAGES`, or
            ``parent/name`` already exists.
    """
    if not re.fullmatch(NAME_PATTERN.strip("^$"), name):
        raise ValueError(
            f"{name!r} is not a tool name: lowercase letters, digits, - and _, starting with a letter or digit"
        )
    if lang not in LANGUAGES:
        raise ValueError(f"--lang {lang!r} is not offered: choose {' or '.join(LANGUAGES)}")
    directory = Path(parent) / name
    if directory.exists():
        raise ValueError(f"{directory} already exists; choose another name or remove it")
    suffix, source, manifest = _SOURCES[lang]
    texts = {
        f"tool{suffix}": source.format(name=name, function=name.replace("-", "_")),
        "glovebox.toml": manifest.format(name=name),
        "input.json": _INPUT,
    }
    directory.mkdir(parents=True)
    files = []
    for file_name, text in texts.items():
        path = directory / file_name
        path.write_text(text, encoding="utf-8")
        files.append(path)
    wasm = directory / f"{name}.wasm"
    commands = (
        f"glovebox build {directory / f'tool{suffix}'} -o {wasm}",
        f"glovebox register {wasm}",
        f"glovebox call {name} --input - < {directory / 'input.json'}",
    )
    return Scaffold(directory, tuple(files), commands)
