"""``native/vendor.py``: the wasmtime crate the native core builds on, checked and changed, or nothing written.

The changes themselves are attacked where they act (``test_native.py``: the residue guest
for the slot reset; every native tool test for the function ranges). Here: a crate whose
SHA-256 is not the lock's is refused before anything is unpacked, a crate whose text does
not hold what a change expects is refused without replacing the directory, and a second
run over a current directory does nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

VENDOR_PY = Path(__file__).resolve().parents[2] / "native" / "vendor.py"


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """vendor.py, loaded afresh, writing under ``tmp_path`` instead of ``native/vendor``."""
    spec = importlib.util.spec_from_file_location("glovebox_vendor_under_test", VENDOR_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "VENDOR", tmp_path / "vendor")
    monkeypatch.setattr(module, "NATIVE", tmp_path)
    return module


def _crate(files: dict[str, str], prefix: str = "wasmtime-48.0.10") -> bytes:
    """A .crate (gzipped tar) holding ``files`` under ``prefix``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{prefix}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _serve(module: ModuleType, monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    """Make ``data`` the crate vendor.py finds (no cache, this download) and the checksum it expects."""
    monkeypatch.setattr(module, "_cached", lambda: None)
    monkeypatch.setattr(module, "_download", lambda: data)
    monkeypatch.setattr(module, "SHA256", hashlib.sha256(data).hexdigest())


def test_a_crate_that_is_not_the_locked_one_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vendor = _module(tmp_path, monkeypatch)
    monkeypatch.setattr(vendor, "_cached", lambda: None)
    monkeypatch.setattr(vendor, "_download", lambda: b"not the crate")
    with pytest.raises(SystemExit, match="has SHA-256 .* not Cargo.lock's"):
        vendor.main()
    assert not (tmp_path / "vendor").exists()


def test_a_crate_without_the_text_to_change_is_refused_and_nothing_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor = _module(tmp_path, monkeypatch)
    current = tmp_path / "vendor" / "wasmtime"
    current.mkdir(parents=True)
    (current / "kept").write_text("the directory a failed run must leave alone")
    files = {path: "fn unrelated() {}\n" for path, _before, _after in vendor.EDITS}
    _serve(vendor, monkeypatch, _crate(files))
    with pytest.raises(SystemExit, match="does not hold the text to change once"):
        vendor.main()
    assert (current / "kept").read_text() == "the directory a failed run must leave alone"
    assert [p.name for p in (tmp_path / "vendor").iterdir()] == ["wasmtime"]


def test_a_crate_holding_a_link_out_is_not_unpacked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vendor = _module(tmp_path, monkeypatch)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        link = tarfile.TarInfo("wasmtime-48.0.10/escape")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    _serve(vendor, monkeypatch, out.getvalue())
    with pytest.raises((SystemExit, tarfile.TarError)):
        vendor.main()
    assert not (tmp_path / "vendor" / "wasmtime").exists()


def test_the_changes_apply_once_and_a_current_directory_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor = _module(tmp_path, monkeypatch)
    files: dict[str, str] = {}
    for path, before, _after in vendor.EDITS:
        files[path] = files.get(path, "// published\n") + before
    _serve(vendor, monkeypatch, _crate(files))
    vendor.main()
    target = tmp_path / "vendor" / "wasmtime"
    for path, before, after in vendor.EDITS:
        text = (target / path).read_text()
        assert text.count(after) == 1 and (before in after or before not in text)
    stamp = target / ".glovebox-vendored"
    marker = target / "marker"
    marker.write_text("left alone")
    monkeypatch.setattr(vendor, "_download", lambda: pytest.fail("a current directory is not made again"))
    vendor.main()
    assert marker.read_text() == "left alone" and stamp.is_file()
