"""``glovebox build tool.js|tool.ts``: a JavaScript or TypeScript tool into a component.

1. esbuild (from npm, pinned) bundles the module and what it imports, the guest
   helper ``glovebox`` included, into one ES module, transpiling TypeScript on the
   way; its errors are shown as it prints them (file:line:column).
2. The module is handed to the engine (QuickJS-NG compiled by Zig with
   ``guest/js/engine.c``, see ``_jstoolchain``), which runs its top level once,
   at build time, in wasmtime; the memory it leaves becomes the component's
   initial memory (``_snapshot``). A call starts from there: no engine start-up,
   no parsing.
3. ``wasm-tools`` makes the component of the ``js-tool`` world: the glovebox
   world plus the WASI wall clock and random numbers.

The component is cached by the digest of the bundle, the engine and the WIT, so
rebuilding unchanged source costs the bundling only. The manifest written beside
the output (``js_manifest``): a ``glovebox.toml`` beside the source (as for C),
with the limits JavaScript needs filled in where it says nothing, and, when it
gives no ``input_schema``, the schema of the default export's parameter type
(TypeScript or JSDoc, read by the TypeScript checker: ``_jstypes``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import wasmtime

from ..core._errors import BuildError
from ..model._manifest import MIB, parse_manifest
from ._base import BuildContext, Progress
from ._binaries import BUILD_HINT, find_tool, read_source, run_tool
from ._jstoolchain import esbuild_binary, js_engine
from ._jstypes import input_types
from ._pybuild import dump_toml
from ._snapshot import initialise, rewrite

__all__ = ["JS_LIMITS", "build_js", "js_manifest"]

#: Limits for JavaScript tools unless their manifest says otherwise: the engine
#: starts with ~1.5 MiB of memory, and interpreted code burns ~10 G fuel per CPU
#: second (a C tool's loop runs ~100x further on the same fuel).
JS_LIMITS: dict[str, int] = {"memory_bytes": 32 * MIB, "fuel": 5_000_000_000, "timeout_ms": 5_000}
_ESBUILD_FLAGS = (
    "--bundle", "--format=esm", "--platform=neutral", "--target=es2023",
    "--charset=utf8", "--legal-comments=none", "--log-level=error", "--color=false",
)  # fmt: skip
_NO_NODE = (
    "(glovebox: a tool runs in a sandbox without Node.js built-ins, so no files, processes or sockets; "
    'it reaches the network through `http` from "glovebox", as far as its grants allow)'
)
_DROPPED_EXPORTS = frozenset({"_initialize", "gb_init", "gb_init_runner"})


def js_manifest(src: Path, sdk: Path, cache_dir: Path, progress: Progress | None = None) -> str:
    """The manifest TOML of the JavaScript or TypeScript tool ``src`` (esbuild's errors first, verbatim)."""
    read_source(src)
    _bundle(src, sdk, progress)
    return dump_toml(_manifest(src, sdk, cache_dir))


def build_js(src: Path, out: Path, context: BuildContext) -> None:
    """Build the JavaScript or TypeScript tool ``src`` into ``out``, from the cache when the bundle is unchanged."""
    sdk = context.sdk
    bundle = _bundle(src, sdk, context.progress)
    engine = js_engine(sdk, progress=context.progress)
    wit = [*sorted((sdk / "wit").glob("*.wit")), *sorted((sdk / "js" / "wit").rglob("*.wit"))]
    key = _cache_key(engine.key, bundle, wit)
    cached = context.cache_dir / f"js-{key}.wasm"
    if not cached.is_file():
        context.step(f"QuickJS-NG: running the top level of {src.name} and making the component")
        _componentize(src, bundle, sdk, engine.wasm, engine.module, cached)
    else:
        context.step(f"{src.name} is unchanged since its last build: from the cache in {context.cache_dir}")
    shutil.copyfile(cached, out)


def _bundle(src: Path, sdk: Path, progress: Progress | None = None) -> str:
    """The tool and its imports as one ES module (the engine evaluates it as a module: top-level ``await`` works)."""
    esbuild = esbuild_binary(sdk, progress)
    helper = sdk / "js" / "glovebox.js"
    argv = [str(esbuild), src.name, *_ESBUILD_FLAGS, f"--alias:glovebox={helper}"]
    with tempfile.TemporaryDirectory(prefix="glovebox-jsbuild-") as tmp:
        bundled = Path(tmp) / "bundle.js"
        try:
            run_tool([*argv, f"--outfile={bundled}"], "esbuild", cwd=src.parent, rename={src.name: str(src)})
        except BuildError as exc:
            if "is built into node" in exc.message:
                raise BuildError(f"{exc.message}\n{_NO_NODE}") from None
            raise
        return bundled.read_text(encoding="utf-8")


def _cache_key(engine_key: str, bundle: str, wit: list[Path]) -> str:
    digest = hashlib.sha256(f"{engine_key}\0{bundle}".encode())
    for path in wit:
        digest.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    digest.update(Path(__file__).with_name("_snapshot.py").read_bytes())
    return digest.hexdigest()[:32]


def _componentize(
    src: Path,
    bundle: str,
    sdk: Path,
    engine_wasm: Path,
    module: Any,
    cached: Path,
    init: str = "gb_init",
    world: str = "js-tool",
    extra_wit: tuple[Path, ...] = (),
) -> None:
    wasm_engine = wasmtime.Engine(_init_config())
    snapshot = initialise(wasm_engine, module(wasm_engine), init, [bundle.encode(), src.name.encode()])
    if snapshot.error is not None:
        raise BuildError(f"{src}: the tool's top level failed when the build ran it:\n{snapshot.error}")
    core_bytes = rewrite(engine_wasm.read_bytes(), snapshot.memory, _DROPPED_EXPORTS)
    tools = find_tool("wasm-tools", BUILD_HINT)
    with tempfile.TemporaryDirectory(prefix="glovebox-jsbuild-") as tmp:
        stage = Path(tmp)
        wit = _stage_wit(sdk, stage / "wit")
        for path in extra_wit:
            shutil.copyfile(path, wit / path.name)
        core = stage / "core.wasm"
        core.write_bytes(core_bytes)
        embedded = stage / "embedded.wasm"
        run_tool([tools, "component", "embed", str(wit), "--world", world, str(core), "-o", str(embedded)], "embed")
        component = stage / "component.wasm"
        run_tool([tools, "component", "new", str(embedded), "-o", str(component)], "wasm-tools component new")
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.tmp{os.getpid()}")
        shutil.copyfile(component, partial)
        os.replace(partial, cached)


def _init_config() -> wasmtime.Config:
    config = wasmtime.Config()
    config.consume_fuel = True
    return config


def _stage_wit(sdk: Path, wit: Path) -> Path:
    """The glovebox world and the JavaScript world (with its WASI dependencies) in one package directory."""
    shutil.copytree(sdk / "js" / "wit", wit)
    for path in (sdk / "wit").glob("*.wit"):
        shutil.copyfile(path, wit / path.name)
    return wit


def _manifest(src: Path, sdk: Path, cache_dir: Path) -> dict[str, Any]:
    stem = src.resolve().parent.name if src.stem == "tool" else src.stem  # `tool.ts` in the working directory too
    generated: dict[str, Any] = {"name": stem.replace("_", "-").lower(), "limits": dict(JS_LIMITS)}
    explicit_path = src.with_name("glovebox.toml")
    if explicit_path.is_file():
        try:
            explicit = tomllib.loads(explicit_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise BuildError(f"{explicit_path}: {exc}") from exc
        limits = {**generated["limits"], **explicit.get("limits", {})}
        generated = {**generated, **explicit, "limits": limits}
    if "input_schema" not in generated:  # no schema given: the default export's parameter type, if it has one
        schema, description = input_types(src, sdk, cache_dir)
        if schema is not None:
            generated["input_schema"] = schema
        if description and "description" not in generated:
            generated["description"] = description
    parse_manifest(generated, str(explicit_path if explicit_path.is_file() else src))
    return generated
