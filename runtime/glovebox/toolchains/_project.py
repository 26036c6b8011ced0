"""What the project toolchains (Rust's Cargo packages, Go modules) share: the project's folder, its manifest,
the digest of its sources, and the core module made a component.

A project is built whole: its folder, the file that marks it (``Cargo.toml``,
``go.mod``) or any file inside it names it (:func:`project_root`). Its manifest
(:func:`project_manifest`) is the folder's ``glovebox.toml`` over what the
project's own file says (name, version, description), so a bare project still
registers under its package's name.
"""

from __future__ import annotations

import fcntl
import hashlib
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core._errors import BuildError
from ._base import BuildContext
from ._binaries import find_tool, read_source, run_tool
from ._build import _check_core_imports
from ._pybuild import dump_toml

__all__ = ["digest_tree", "find_binary", "locked", "project_manifest", "project_root", "wrap_component"]


def project_root(src: Path, marker: str) -> Path:
    """The folder of the project ``src`` names: ``src`` itself, the folder of ``marker``, or the nearest
    folder above a source file that holds ``marker``.

    Raises:
        BuildError: no folder from ``src`` up holds ``marker``.
    """
    start = src.resolve()
    if start.is_dir():
        if (start / marker).is_file():
            return start
        raise BuildError(f"cannot build {src}: the folder holds no {marker}")
    for folder in start.parents:
        if (folder / marker).is_file():
            return folder
    raise BuildError(f"cannot build {src}: no {marker} in its folder or above (a project's sources are built whole)")


def project_manifest(root: Path, defaults: dict[str, Any]) -> str:
    """The manifest TOML of the project at ``root``: its ``glovebox.toml`` over ``defaults`` (name, version,
    description from the project's own file), ``limits`` merged key by key."""
    document = dict(defaults)
    own = root / "glovebox.toml"
    if own.is_file():
        try:
            fields = tomllib.loads(read_source(own))
        except tomllib.TOMLDecodeError as exc:
            raise BuildError(f"{own}: not valid TOML: {exc}") from exc
        limits = {**document.get("limits", {}), **fields.get("limits", {})}
        document.update(fields)
        if limits:
            document["limits"] = limits
    return dump_toml(document)


def digest_tree(root: Path, suffixes: tuple[str, ...], *extra: str) -> str:
    """The SHA-256 of the files under ``root`` ending in ``suffixes`` (names and contents) and ``extra``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith(suffixes)):
        if any(part.startswith(".") or part == "target" for part in path.relative_to(root).parts[:-1]):
            continue
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    for text in extra:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (created if missing) across processes, until the block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".glovebox-build.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when the file closes
        yield


def find_binary(name: str, fallbacks: tuple[Path, ...], install: str) -> str:
    """A toolchain binary: beside this Python, on PATH, else in one of ``fallbacks`` (where its installer puts it).

    Raises:
        BuildError: it is nowhere; the message says how to install it.
    """
    try:
        return find_tool(name, install)
    except BuildError:
        for folder in fallbacks:
            if (folder / name).is_file():
                return str(folder / name)
        raise


def wrap_component(core: Path, src: Path, out: Path, context: BuildContext, adapter: Path | None = None) -> None:
    """Make the core module ``core`` a component at ``out``: its imports checked against the glovebox world
    (none but the host's, unless a WASI ``adapter`` turns WASI preview 1 into WASI 0.2), then
    ``wasm-tools component new``, which reads the world from the module's component-type section."""
    from ._build import check_wasm_tools

    tools = check_wasm_tools()
    if adapter is None:
        _check_core_imports(core, src)
    context.step("wasm-tools: wrapping the module into a component")
    staged = out.with_name(f".{out.name}.staged")
    argv = [tools, "component", "new", str(core), "-o", str(staged)]
    if adapter is not None:
        argv += ["--adapt", f"wasi_snapshot_preview1={adapter}"]
    try:
        run_tool(argv, "wasm-tools component new")
        staged.replace(out)
    finally:
        staged.unlink(missing_ok=True)
