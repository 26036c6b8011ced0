"""Go tools: a Go module built by Go itself (``GOOS=wasip1``, a reactor) and made a component with the WASI
preview-1 adapter.

The module's main package imports the guest package ``glovebox/guest/glovebox``
(shipped in the SDK, ``go/``: JSON in and out, ``Fetch``/``Get``, ``Log``, the
canonical ABI written by hand as the C SDK's is); the build puts both modules in
one workspace (a ``go.work`` of its own), so the tool's ``go.mod`` names nothing.

Why Go's own compiler and not TinyGo: Go is installed here and TinyGo is not
(neither Debian nor the Go proxy carry it), and Go 1.24+ exports functions to the
host (``//go:wasmexport``) from a reactor (``-buildmode=c-shared``). Its runtime
imports WASI preview 1 (clocks, random, ``fd_write``, ``proc_exit``, ...), so the
build turns the module into a component with the Bytecode Alliance's preview-1
adapter (vendored in ``go/adapter``, checked by its SHA-256): the component then
imports WASI 0.2, which the sandbox links with nothing granted: clocks and
randomness work, stdout and stderr go to the call's logs, no file, no
environment, no socket.

One fix-up makes the two live together. The adapter allocates its state on the
first WASI call, which Go's runtime makes while it initializes, before any Go
function may run; memory the adapter grew for itself, Go's allocator would
hand out again (it counts the pages it grew, not the memory's size). So the
guest package reserves an array Go never touches, the build asks the module
where it is (running its initialization once in wasmtime, with nothing
granted), and adds a ``cabi_realloc_adapter`` that hands out that array, which
``wasm-tools`` gives the adapter instead of Go's allocator.

Go keeps compiled packages in ``HOME/cache/go/build`` and downloaded modules in
``HOME/cache/go/mod`` (``GOCACHE`` and ``GOMODCACHE`` override). ``go`` is looked
up beside this Python, on PATH, then in ``/usr/local/go/bin`` (where Go's
installer puts it); ``GOTOOLCHAIN=local``: the build never downloads another Go.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

import wasmtime

from ..core._errors import BuildError
from ..core._settings import go_cache_dirs
from ._base import ONCE, BuildContext, Toolchain
from ._binaries import read_source, run_tool
from ._build import check_wasm_tools
from ._project import find_binary, project_manifest, project_root, wrap_component

__all__ = ["ADAPTER_SHA256", "GUEST_MODULE", "GoToolchain", "find_go"]

#: The guest package's module path, as tools import it (``glovebox/guest/glovebox``).
GUEST_MODULE = "glovebox/guest"
#: The SHA-256 of the vendored WASI preview-1 adapter (``go/adapter``).
ADAPTER_SHA256 = "6d52112df28f0caee9018f911f279f94f848230b2f0ed02138290363e925671f"
_ADAPTER = "wasi_snapshot_preview1.reactor.wasm"
_ARENA_EXPORT = "glovebox_adapter_arena"
_PREVIEW1 = "wasi_snapshot_preview1"
_INSTALL = "install Go 1.24 or later (https://go.dev/doc/install)"
_GO_LINE = re.compile(r"^go\s+(\d+\.\d+)", re.MULTILINE)
_MODULE_LINE = re.compile(r"^module\s+(\S+)", re.MULTILINE)


class GoToolchain(Toolchain):
    """Go, as a module whose main package imports the guest package ``glovebox/guest/glovebox``."""

    name = "go"
    suffixes = (".go",)
    project_files = ("go.mod",)

    def build(self, src: Path, out: Path, context: BuildContext) -> None:
        root = project_root(src, "go.mod")
        module = _module(root)
        go = find_go()
        adapter = _adapter(context.sdk)
        gocache, gomodcache = go_cache_dirs(context.home)
        line = f"go build: {module} for wasip1"
        if not gocache.is_dir():
            context.slow_step(f"{line}; first build with this cache ({gocache}): Go compiles its runtime, {ONCE}")
        else:
            context.step(line)
        with tempfile.TemporaryDirectory(prefix="glovebox-build-") as tmp:
            work = Path(tmp) / "go.work"
            version = max((_go_version(root), "1.24"), key=lambda v: tuple(int(p) for p in v.split(".")))
            work.write_text(f"go {version}\n\nuse (\n\t{_quote(root)}\n\t{_quote(context.sdk / 'go')}\n)\n")
            core = Path(tmp) / "core.wasm"
            env = {
                "GOOS": "wasip1", "GOARCH": "wasm", "GOWORK": str(work), "GOTOOLCHAIN": "local",
                "GOCACHE": str(gocache), "GOMODCACHE": str(gomodcache), "CGO_ENABLED": "0",
            }  # fmt: skip
            argv = [go, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s", "-o", str(core), "."]
            run_tool(argv, "go build", cwd=root, env=env)
            _check_imports(core, root)
            context.step("adding the adapter's allocator (cabi_realloc_adapter)")
            fixed = _give_adapter_its_arena(core, Path(tmp))
            embedded = Path(tmp) / "embedded.wasm"
            tools = check_wasm_tools()
            run_tool([tools, "component", "embed", str(context.sdk / "wit"), "--world", "tool", str(fixed), "-o",
                      str(embedded)], "embed")  # fmt: skip
            wrap_component(embedded, root, out, context, adapter=adapter)

    def generated_manifest(self, src: Path, context: BuildContext) -> str:
        root = project_root(src, "go.mod")
        return project_manifest(root, {"name": _module(root).rsplit("/", 1)[-1]})


def find_go() -> str:
    """The ``go`` to build with: beside this Python, on PATH, else ``/usr/local/go/bin/go``.

    Raises:
        BuildError: none is installed; the message says how to install Go.
    """
    return find_binary("go", (Path("/usr/local/go/bin"),), _INSTALL)


def _quote(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _module(root: Path) -> str:
    match = _MODULE_LINE.search(read_source(root / "go.mod"))
    if match is None:
        raise BuildError(f"{root / 'go.mod'} has no module line")
    return match.group(1)


def _go_version(root: Path) -> str:
    match = _GO_LINE.search(read_source(root / "go.mod"))
    return match.group(1) if match else "1.24"


def _adapter(sdk: Path) -> Path:
    adapter = sdk / "go" / "adapter" / _ADAPTER
    if not adapter.is_file() or hashlib.sha256(adapter.read_bytes()).hexdigest() != ADAPTER_SHA256:
        raise BuildError(f"the WASI preview-1 adapter {adapter} is missing or not the one glovebox ships")
    return adapter


def _check_imports(core: Path, root: Path) -> None:
    """The module uses the guest package, and imports the host's interfaces and WASI preview 1 (the adapter's)
    and nothing else."""
    from ..core._world import HOST_INTERFACE
    from ..model._capability import registered

    module = wasmtime.Module(wasmtime.Engine(), core.read_bytes())
    if _ARENA_EXPORT not in {export.name for export in module.exports}:
        raise BuildError(
            f'{root}: the main package does not use the guest package: import "{GUEST_MODULE}/glovebox" '
            "and call glovebox.Tool(fn) from init"
        )
    interfaces = {HOST_INTERFACE, _PREVIEW1, *(capability.interface for capability in registered())}
    foreign = sorted({f"{imp.module}.{imp.name}" for imp in module.imports if imp.module not in interfaces})
    if foreign:
        raise BuildError(f"{root}: the tool imports {', '.join(foreign)}, which no sandbox provides")


def _arena(core: Path) -> tuple[int, int]:
    """Where the guest package's adapter arena is: run the module's initialization once, nothing granted."""
    engine = wasmtime.Engine(_bounded())
    module = wasmtime.Module(engine, core.read_bytes())
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    for imp in module.imports:
        if imp.module != _PREVIEW1 and isinstance(imp.type, wasmtime.FuncType):
            linker.define_func(imp.module, imp.name or "", imp.type, _refuse)
    store = wasmtime.Store(engine)
    store.set_wasi(wasmtime.WasiConfig())
    store.set_fuel(5_000_000_000)
    try:
        exports = linker.instantiate(store, module).exports(store)
        exports["_initialize"](store)  # type: ignore[operator]
        packed = exports[_ARENA_EXPORT](store)  # type: ignore[operator]
    except (wasmtime.WasmtimeError, wasmtime.Trap, KeyError) as exc:
        raise BuildError(f"the module's initialization failed at build time: {exc}") from exc
    return int(packed) >> 32, int(packed) & 0xFFFFFFFF


def _bounded() -> wasmtime.Config:
    config = wasmtime.Config()
    config.consume_fuel = True
    return config


def _refuse(*args: object) -> None:
    """A host function during the build's initialization run: does nothing (the tool's init must not call one)."""


def _give_adapter_its_arena(core: Path, tmp: Path) -> Path:
    """``core`` with a ``cabi_realloc_adapter`` export that bump-allocates in the guest package's arena."""
    start, size = _arena(core)
    tools = check_wasm_tools()
    text = tmp / "core.wat"
    run_tool([tools, "print", str(core), "-o", str(text)], "wasm-tools print")
    wat = text.read_text(encoding="utf-8")
    end = wat.rstrip().rfind(")")
    text.write_text(wat[:end] + _ALLOCATOR.format(start=start, end=start + size) + ")\n", encoding="utf-8")
    fixed = tmp / "core-fixed.wasm"
    run_tool([tools, "parse", str(text), "-o", str(fixed)], "wasm-tools parse")
    return fixed


#: The adapter's allocator: bump allocation in [start, end); it traps when the arena is spent.
_ALLOCATOR = """
  (global $glovebox_adapter_next (mut i32) (i32.const {start}))
  (func $glovebox_cabi_realloc_adapter (param i32 i32 i32 i32) (result i32) (local i32)
    global.get $glovebox_adapter_next
    local.get 2
    i32.add
    i32.const 1
    i32.sub
    i32.const 0
    local.get 2
    i32.sub
    i32.and
    local.tee 4
    local.get 3
    i32.add
    i32.const {end}
    i32.gt_u
    if
      unreachable
    end
    local.get 4
    local.get 3
    i32.add
    global.set $glovebox_adapter_next
    local.get 4)
  (export "cabi_realloc_adapter" (func $glovebox_cabi_realloc_adapter))
"""
