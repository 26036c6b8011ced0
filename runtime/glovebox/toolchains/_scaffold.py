"""``glovebox new NAME --lang c|python|ts|rust|go``: a tool that builds, registers and answers on the first try.

:func:`scaffold` writes ``NAME/`` with the source (``tool.c``, ``tool.py`` or
``tool.ts``; for Rust a Cargo package, ``Cargo.toml``, ``src/lib.rs`` and the
``Cargo.lock`` of the guest crate, so its crates' versions are the ones glovebox
was tested with; for Go a module, ``go.mod`` and ``main.go``), its manifest
``glovebox.toml`` (name, version, description and, for C, TypeScript, Rust and Go,
both schemas; a Python tool's schemas come from its type hints), and ``input.json``,
a test input; it returns what it wrote and the commands that build, register and call the tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..model._manifest import NAME_PATTERN

__all__ = ["LANGUAGES", "Scaffold", "scaffold"]

LANGUAGES = ("c", "python", "ts", "rust", "go")

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

_RUST_CARGO = """\
[package]
name = "{name}"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
# Ships with glovebox (`glovebox sdk-path`, rust/glovebox-guest): a build with glovebox points cargo at it.
glovebox-guest = "0.1.0"
serde = {{ version = "1", features = ["derive"] }}

[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
panic = "abort"
strip = true
"""

_RUST_SOURCE = """\
//! {name}: greet someone by name. Build: glovebox build {name} -o {name}/{name}.wasm
use glovebox_guest::{{log, Level, ToolError}};
use serde::{{Deserialize, Serialize}};

#[derive(Deserialize)]
struct Input {{
    name: String,
}}

#[derive(Serialize)]
struct Output {{
    greeting: String,
}}

fn greet(input: Input) -> Result<Output, ToolError> {{
    if input.name.trim().is_empty() {{
        return Err(ToolError::new("name must not be empty"));
    }}
    log(Level::Info, "greeting someone");
    Ok(Output {{ greeting: format!("Hello, {{}}!", input.name) }})
}}

glovebox_guest::export_tool!(greet);
"""

_GO_MOD = """\
module {name}

go 1.24
"""

_GO_SOURCE = """\
// {name}: greet someone by name. Build: glovebox build {name} -o {name}/{name}.wasm
package main

import (
\t"errors"
\t"strings"

\t"glovebox/guest/glovebox"
)

type Input struct {{
\tName string `json:"name"`
}}

type Output struct {{
\tGreeting string `json:"greeting"`
}}

func greet(in Input) (Output, error) {{
\tif strings.TrimSpace(in.Name) == "" {{
\t\treturn Output{{}}, errors.New("name must not be empty")
\t}}
\tglovebox.Log(glovebox.Info, "greeting someone")
\treturn Output{{Greeting: "Hello, " + in.Name + "!"}}, nil
}}

func init() {{ glovebox.Tool(greet) }}

func main() {{}}
"""

# Go's runtime starts with ~2.6 MiB of memory and spends ~1.3 M fuel starting up in every fresh instance.
_GO_MANIFEST = _C_MANIFEST.replace("fuel = 10_000_000", "fuel = 100_000_000").replace(
    "memory_bytes = 1_048_576", "memory_bytes = 33_554_432"
)

_SOURCES = {
    "c": (".c", _C_SOURCE, _C_MANIFEST),
    "python": (".py", _PY_SOURCE, _PY_MANIFEST),
    "ts": (".ts", _TS_SOURCE, _TS_MANIFEST),
}

_INPUT = '{"name": "Ada"}\n'


def _texts(name: str, lang: str) -> dict[str, str]:
    """The files of a new tool, by their path in its folder: the source first."""
    if lang == "rust":
        from ._build import sdk_dir

        lock = sdk_dir() / "rust" / "glovebox-guest" / "Cargo.lock"
        return {
            "src/lib.rs": _RUST_SOURCE.format(name=name),
            "Cargo.toml": _RUST_CARGO.format(name=name),
            "Cargo.lock": lock.read_text(encoding="utf-8"),
            "glovebox.toml": _C_MANIFEST.format(name=name),
            "input.json": _INPUT,
        }
    if lang == "go":
        return {
            "main.go": _GO_SOURCE.format(name=name),
            "go.mod": _GO_MOD.format(name=name),
            "glovebox.toml": _GO_MANIFEST.format(name=name),
            "input.json": _INPUT,
        }
    suffix, source, manifest = _SOURCES[lang]
    return {
        f"tool{suffix}": source.format(name=name, function=name.replace("-", "_")),
        "glovebox.toml": manifest.format(name=name),
        "input.json": _INPUT,
    }


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
    texts = _texts(name, lang)
    directory.mkdir(parents=True)
    files = []
    for file_name, text in texts.items():
        path = directory / file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        files.append(path)
    wasm = directory / f"{name}.wasm"
    src = directory if lang in ("rust", "go") else directory / next(iter(texts))
    commands = (
        f"glovebox build {src} -o {wasm}",
        f"glovebox register {wasm}",
        f"glovebox call {name} --input - < {directory / 'input.json'}",
    )
    return Scaffold(directory, tuple(files), commands)
