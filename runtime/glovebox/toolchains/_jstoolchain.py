"""The JavaScript toolchain: QuickJS-NG compiled once into the engine, and esbuild, both cached.

Everything here is per user and per version, not per home (as Zig's own cache
is), in :func:`~glovebox.core._settings.toolchain_cache_dir`:

- ``quickjs-ng-VERSION/``: the C sources of QuickJS-NG, taken from the PyPI
  sdist ``quickjs-ng`` (``pip download``; its SHA-256 is pinned below).
- ``js-engine-KEY.wasm``: those sources compiled by Zig for wasm32-wasi (about
  30 s, once) and linked with ``guest/js/engine.c`` (the glue, on
  ``glovebox.h``); KEY digests the sources, the glue, the flags and Zig's
  version, so a change to any of them builds a new engine and nothing stale
  is used. The compiled objects are kept beside it, so a change to the glue
  only relinks (well under a second). The code runner of ``Runtime.run`` has
  its own engine, the same objects linked with the glue built with
  ``GB_CODE_RUNNER`` (``js_engine(runner=True)``).
- ``js-engine-KEY-wasmtime-VERSION.cwasm``: the engine compiled by wasmtime,
  for the build-time initialisation (``_snapshot``) of every tool.
- ``esbuild-KEY/``: esbuild and the TypeScript compiler from npm, installed by
  ``npm ci`` from ``guest/js/package-lock.json`` (versions and integrity hashes
  pinned). esbuild bundles; the TypeScript compiler only reads a tool's input
  type when its manifest gives no input schema (``_jstypes``).

A file lock serialises two builds that fill the same cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import wasmtime

from ..core._errors import BuildError
from ..core._settings import toolchain_cache_dir
from ._base import ONCE, Progress, announce
from ._binaries import require_module, run_tool, tool_env

__all__ = ["ESBUILD_HINT", "QUICKJS_NG", "STACK_BYTES", "JsEngine", "esbuild_binary", "js_engine", "typescript_dir"]

#: The QuickJS-NG release whose C sources the engine is compiled from (the PyPI sdist).
QUICKJS_NG = "0.17.0.2"
QUICKJS_NG_SHA256 = "43d2e48272208721a7aaea8e3f02d4b9318f12ef20cc4f5421b59d9a470706ef"
_UNITS = ("quickjs_unit", "dtoa", "libregexp", "libunicode")
#: The C stack of a JavaScript tool (engine.c lets JavaScript use 160 KiB of it).
STACK_BYTES = 256 * 1024
_CFLAGS = ("-target", "wasm32-wasi", "-O2", "-Wno-everything")
_LDFLAGS = ("-target", "wasm32-wasi", "-O2", "-s", "-mexec-model=reactor", f"-Wl,-z,stack-size={STACK_BYTES}")
#: How the code runner's glue is compiled (``js_engine(runner=True)``).
_RUNNER_DEFINES = ("-DGB_CODE_RUNNER",)
ESBUILD_HINT = "JavaScript and TypeScript tools are bundled by esbuild from npm: install Node.js and npm"


class JsEngine:
    """The engine core module and its wasmtime compilation (for build-time initialisation)."""

    def __init__(self, wasm: Path, key: str) -> None:
        self.wasm = wasm
        self.key = key

    def module(self, engine: wasmtime.Engine) -> wasmtime.Module:
        """The engine compiled for ``engine`` (cached on disk per wasmtime version)."""
        version = importlib.metadata.version("wasmtime")
        cached = self.wasm.with_name(f"{self.wasm.stem}-wasmtime-{version}.cwasm")
        if cached.is_file():
            try:
                return wasmtime.Module.deserialize_file(engine, str(cached))
            except wasmtime.WasmtimeError:
                cached.unlink(missing_ok=True)  # another engine's settings: compile again
        module = wasmtime.Module.from_file(engine, str(self.wasm))
        _write_atomically(cached, bytes(module.serialize()))
        return module


def js_engine(sdk: Path, *, runner: bool = False, progress: Progress | None = None) -> JsEngine:
    """The QuickJS-NG engine linked with the glue in ``sdk/js``, built on first use.

    With ``runner``, the code runner's engine: the same objects, the glue compiled
    with ``GB_CODE_RUNNER`` (it imports the run's ``host-call``, see ``runner.wit``).
    Compiling QuickJS-NG, once, is told before it starts (:func:`~._base.announce`).
    """
    require_module("ziglang")
    root = toolchain_cache_dir()
    glue = [sdk / "js" / "engine.c", sdk / "c" / "glovebox.h"]
    unit = sdk / "js" / "quickjs_unit.c"
    objects_key = _digest([QUICKJS_NG, _zig_version(), *_CFLAGS], [unit])
    defines = _RUNNER_DEFINES if runner else ()
    key = _digest([objects_key, *_LDFLAGS, *defines], glue)
    wasm = root / f"js-engine-{key}.wasm"
    if wasm.is_file():
        return JsEngine(wasm, key)
    with _locked(root):
        if not wasm.is_file():
            objects = _objects(root, objects_key, unit, progress)
            _link(sdk, objects, wasm, defines)
    return JsEngine(wasm, key)


def _objects(root: Path, key: str, unit: Path, progress: Progress | None) -> list[Path]:
    out = root / f"quickjs-ng-objects-{key}"
    objects = [out / f"{name}.o" for name in _UNITS]
    if all(path.is_file() for path in objects):
        return objects
    announce(f"QuickJS-NG: compiling the JavaScript engine into {root}, {ONCE}", progress, slow=True)
    src = _quickjs_sources(root)
    with tempfile.TemporaryDirectory(prefix="glovebox-quickjs-", dir=root) as tmp:
        staged = Path(tmp)
        inputs = [unit, *(src / f"{name}.c" for name in _UNITS[1:])]
        # quickjs.c is most of the work: it compiles beside the three small units.
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "ziglang", "cc", *_CFLAGS, f"-I{src}", "-c", str(path), "-o",
                 str(staged / f"{name}.o")],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=tool_env(_zig_env(root)),
            )
            for name, path in zip(_UNITS, inputs, strict=True)
        ]  # fmt: skip
        outputs = [proc.communicate(timeout=900)[0] for proc in procs]
        failures = [output for proc, output in zip(procs, outputs, strict=True) if proc.returncode != 0]
        if failures:
            raise BuildError("compiling QuickJS-NG failed:\n" + "\n".join(failures))
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(staged, out)
        staged.mkdir()  # TemporaryDirectory removes what it made
    return objects


def _zig_env(root: Path) -> dict[str, str]:
    """Zig's caches (its libc, its objects) inside the toolchain directory, never in ``~/.cache/zig``."""
    cache = str(root / "zig")
    return {"ZIG_GLOBAL_CACHE_DIR": cache, "ZIG_LOCAL_CACHE_DIR": cache}


def _link(sdk: Path, objects: list[Path], wasm: Path, defines: tuple[str, ...] = ()) -> None:
    src = _quickjs_sources(wasm.parent)
    with tempfile.TemporaryDirectory(prefix="glovebox-jsengine-") as tmp:
        glue = Path(tmp) / "engine.o"
        flags = ("-target", "wasm32-wasi", "-O2", "-Wall", "-Wno-unused-function")
        zig = [sys.executable, "-m", "ziglang", "cc"]
        inc = [f"-I{sdk / 'c'}", f"-I{src}"]
        env = _zig_env(wasm.parent)
        run_tool(
            [*zig, *flags, *defines, *inc, "-c", str(sdk / "js" / "engine.c"), "-o", str(glue)],
            "zig cc (engine.c)",
            env=env,
        )
        linked = Path(tmp) / "engine.wasm"
        run_tool([*zig, *_LDFLAGS, str(glue), *map(str, objects), "-o", str(linked)], "zig cc (link)", env=env)
        _write_atomically(wasm, linked.read_bytes())


def _quickjs_sources(root: Path) -> Path:
    """The QuickJS-NG C sources (``upstream-quickjs/`` of the pinned sdist), fetched with pip once."""
    src = root / f"quickjs-ng-{QUICKJS_NG}"
    if (src / "quickjs.c").is_file():
        return src
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="glovebox-sdist-", dir=root) as tmp:
        argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        run_tool([*argv, "--dest", tmp, f"quickjs-ng=={QUICKJS_NG}"], "pip download quickjs-ng")
        sdist = Path(tmp) / f"quickjs_ng-{QUICKJS_NG}.tar.gz"
        digest = hashlib.sha256(sdist.read_bytes()).hexdigest() if sdist.is_file() else "missing"
        if digest != QUICKJS_NG_SHA256:
            raise BuildError(
                f"the quickjs-ng {QUICKJS_NG} sdist has SHA-256 {digest}, not the pinned {QUICKJS_NG_SHA256}"
            )
        staged = Path(tmp) / "src"
        staged.mkdir()
        prefix = f"quickjs_ng-{QUICKJS_NG}/upstream-quickjs/"
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.startswith(prefix) and "/" not in member.name[len(prefix) :]:
                    (staged / member.name[len(prefix) :]).write_bytes(archive.extractfile(member).read())  # type: ignore[union-attr]
        os.replace(staged, src)
    return src


def esbuild_binary(sdk: Path, progress: Progress | None = None) -> Path:
    """esbuild, installed by ``npm ci`` from ``sdk/js/package-lock.json`` into the toolchain cache once
    (told before it starts: :func:`~._base.announce`)."""
    lock = sdk / "js" / "package-lock.json"
    root = toolchain_cache_dir()
    prefix = root / f"esbuild-{_digest([], [sdk / 'js' / 'package.json', lock])}"
    found = _find_esbuild(prefix)
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise BuildError(f"npm is not installed; {ESBUILD_HINT}")
    with _locked(root):
        found = _find_esbuild(prefix)
        if found is not None:
            return found
        announce(f"npm ci: installing esbuild and TypeScript into {root}, {ONCE}", progress, slow=True)
        with tempfile.TemporaryDirectory(prefix="glovebox-npm-", dir=root) as tmp:
            staged = Path(tmp) / "esbuild"
            staged.mkdir()
            shutil.copyfile(sdk / "js" / "package.json", staged / "package.json")
            shutil.copyfile(lock, staged / "package-lock.json")
            argv = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
            run_tool(argv, "npm ci (esbuild)", cwd=staged)
            shutil.rmtree(prefix, ignore_errors=True)
            os.replace(staged, prefix)
    found = _find_esbuild(prefix)
    if found is None:
        raise BuildError(f"npm installed esbuild into {prefix} without a binary for this platform")
    return found


def typescript_dir(sdk: Path) -> Path:
    """The TypeScript compiler (its JavaScript API), installed by ``npm ci`` beside esbuild."""
    esbuild = esbuild_binary(sdk)
    found = esbuild.parents[3] / "typescript"  # PREFIX/node_modules/@esbuild/PLATFORM/bin/esbuild
    if not (found / "package.json").is_file():
        raise BuildError(f"npm installed the JavaScript toolchain into {found.parent} without typescript")
    return found


def _find_esbuild(prefix: Path) -> Path | None:
    # The platform package (@esbuild/linux-x64, ...) holds the native binary; npm installs only the one that fits.
    for candidate in sorted((prefix / "node_modules" / "@esbuild").glob("*/bin/esbuild")):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _digest(parts: list[str], files: list[Path]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def _zig_version() -> str:
    try:
        return importlib.metadata.version("ziglang")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.tmp{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)
