"""Check that a .wasm artifact is a component of the glovebox world (or, typed, imports only what it may).

The checks run before anything is stored: the bytes are wasm; they are a
component, not a core module; they compile (in a child process, see
``_compile``); the component exports
``call: func(input: string) -> result<string, string>``; and it imports
nothing but the interfaces of the host (``glovebox:tool/host@0.1.0`` and those of every
registered capability: ``sql``, ``kv``, ...) and, for guests built on
a WASI libc (Python), the WASI 0.2.x interfaces in ``_world.WASI_INTERFACES``, which
the sandbox links with nothing granted (see ``_sandbox``), and ``wasi:http/types`` and
``outgoing-handler``, linked through the HTTP capability (see ``_wasihttp``). Each refusal says
which check failed and what to do about it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import wasmtime
from wasmtime.component import Component, ComponentInstanceType, FuncType, ResultType, String

from ..core._errors import InvalidArtifact
from ..core._world import EXPORT_NAME, is_wasi_import
from ._host import host_functions

__all__ = [
    "MAX_ARTIFACT_BYTES",
    "check_component",
    "check_header",
    "check_imports",
    "imports_wasi",
]

MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
#: The wasi:http interfaces a tool may import: requests go through the ``http`` capability.
_WASI_HTTP = re.compile(r"^wasi:http/(types|outgoing-handler)@0\.2\.\d+$")
_MAGIC = b"\0asm"
_CORE_VERSION = b"\x01\x00\x00\x00"
_COMPONENT_LAYER = b"\x0d\x00\x01\x00"


def check_header(data: bytes, source: str) -> None:
    """Refuse what is not a wasm component by its first eight bytes and size."""
    if len(data) > MAX_ARTIFACT_BYTES:
        raise InvalidArtifact(f"{source} is {len(data)} bytes, over the {MAX_ARTIFACT_BYTES}-byte artifact limit")
    if data[:4] != _MAGIC:
        raise InvalidArtifact(f"{source} is not a WebAssembly file (no \\0asm magic number)")
    if data[4:8] == _CORE_VERSION:
        raise InvalidArtifact(
            f"{source} is a core wasm module, not a component: build it with `glovebox build SRC -o OUT.wasm`, "
            "or wrap it with `wasm-tools component new`"
        )
    if data[4:8] != _COMPONENT_LAYER:
        raise InvalidArtifact(f"{source} has an unsupported wasm version/layer {data[4:8].hex()}")


def check_component(engine: wasmtime.Engine, component: Component, source: str) -> None:
    """Check a compiled component's exports and imports against the glovebox world."""
    ctype = component.type
    _check_exports(ctype.exports(engine), engine, source)
    _check_imports(ctype.imports(engine), engine, source)


def check_imports(engine: wasmtime.Engine, component: Component, source: str) -> None:
    """Check a compiled component's imports alone (a typed component exports what it likes)."""
    _check_imports(component.type.imports(engine), engine, source)


def _check_exports(exports: Mapping[str, object], engine: wasmtime.Engine, source: str) -> None:
    item = exports.get(EXPORT_NAME)
    if item is None:
        found = ", ".join(sorted(exports)) or "nothing"
        raise InvalidArtifact(
            f"{source} does not export `call` (it exports {found}); a tool exports "
            "`call: func(input: string) -> result<string, string>`"
        )
    ty = item.ty  # type: ignore[attr-defined]
    if not isinstance(ty, FuncType) or not _is_call_type(ty):
        raise InvalidArtifact(
            f"{source} exports `call` with the wrong type; expected `func(input: string) -> result<string, string>`"
        )


def _is_call_type(ty: FuncType) -> bool:
    params, result = ty.params, ty.result
    if len(params) != 1 or not isinstance(params[0][1], String):
        return False
    return isinstance(result, ResultType) and isinstance(result.ok, String) and isinstance(result.err, String)


def imports_wasi(engine: wasmtime.Engine, component: Component) -> bool:
    """Whether the component imports any WASI interface (and so needs the WASI linker)."""
    return any(name.startswith("wasi:") for name in component.type.imports(engine))


def _provided() -> dict[str, frozenset[str]]:
    """The functions of each interface a tool may import (the host's and every registered capability's)."""
    return {interface: frozenset(f.name for f in functions) for interface, functions in host_functions().items()}


def _check_imports(imports: Mapping[str, object], engine: wasmtime.Engine, source: str) -> None:
    provided_by = _provided()
    for name, item in imports.items():
        if is_wasi_import(name):
            continue
        if name.startswith("wasi:http/"):
            if _WASI_HTTP.match(name):
                continue  # linked through the http capability (``_wasihttp``)
            raise InvalidArtifact(
                f"{source} imports `{name}`: of wasi:http, glovebox links only `wasi:http/types` and "
                "`wasi:http/outgoing-handler` (0.2.x), through its HTTP capability; a component serving HTTP "
                "is not a tool"
            )
        provided = provided_by.get(name)
        if provided is None:
            named = [f"`{interface}`" for interface in provided_by]
            allowed = ", ".join(named[:-1]) + f" and {named[-1]}" if len(named) > 1 else named[0]
            raise InvalidArtifact(
                f"{source} imports `{name}`, which is outside the glovebox world (a tool may import only {allowed})"
            )
        ty = item.ty  # type: ignore[attr-defined]
        if not isinstance(ty, ComponentInstanceType):
            raise InvalidArtifact(f"{source} imports `{name}` as something other than an interface")
        funcs = {fname for fname, f in ty.exports(engine).items() if isinstance(f.ty, FuncType)}
        unknown = sorted(funcs - provided)
        if unknown:
            raise InvalidArtifact(
                f"{source} imports `{name}#{unknown[0]}`, which the host does not provide "
                f"(it provides {', '.join(sorted(provided))})"
            )
