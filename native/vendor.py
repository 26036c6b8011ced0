"""Make ``native/vendor/wasmtime``: the wasmtime crate of ``Cargo.lock``, checked, with glovebox's two changes.

Run by ``make native`` before maturin (``Cargo.toml`` patches crates.io's wasmtime with this
directory). The crate comes from cargo's own download cache when it holds it, else from
crates.io; its SHA-256 must be the checksum ``Cargo.lock`` recorded for it before the patch
(kept below), or nothing is written.

The first change (to ``src/runtime/vm/sys/unix/pagemap.rs``): when a pooled slot is reset, wasmtime
asks Linux's ``PAGEMAP_SCAN`` which pages the instance wrote, restores those in place (from the
image, or to zero) up to the bytes kept resident, and returns the rest to the kernel. It asked
once, for at most 32 runs of written pages, and returned everything past the 32nd run to the
kernel. A Python tool's call writes a few hundred pages of CPython's heap image in more runs
than that, so every call faulted ~120 of them in again (copy-on-write, ~2 µs each). Here the
scan goes on from where a full answer stopped until it reaches the end of the slot or the
bytes kept resident, so every written page within the bytes kept is restored in place.

The second (to ``src/runtime/instantiate.rs``): each ``ref.func`` a guest runs asks for its
function's two code ranges (body and array-to-wasm trampoline), each a binary search over
the component's function table. A Python tool's start code runs ~5,700 of them at every
instantiation (CPython's loader filling the function table): half of a bare call. Here
each module reads the two ranges of every defined function once, when it loads, into a
vector that ``function_range`` answers those two keys from; any other key, and any
function without a location, still goes through the search.

Idempotent: a stamp holding the digest of the crate and of the edits says the directory is
current; anything else is rebuilt from the crate. Nothing here needs more than the standard
library.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

NATIVE = Path(__file__).resolve().parent
VENDOR = NATIVE / "vendor"
CRATE, VERSION = "wasmtime", "48.0.10"
#: crates.io's checksum of wasmtime 48.0.10 (Cargo.lock's ``checksum`` before the crate was patched).
SHA256 = "8f47e5ae0d077a8415d626b028a1701fd4d4b3ed4d57e21a0b5daefe99ae81f1"
URL = f"https://static.crates.io/crates/{CRATE}/{CRATE}-{VERSION}.crate"
PAGEMAP = "src/runtime/vm/sys/unix/pagemap.rs"
INSTANTIATE = "src/runtime/instantiate.rs"

_SCAN_BEFORE = """    // For now use a fixed set of regions on the stack, but in the future this
    // may want to use a dynamically allocated vector for more regions for
    // example.
    const MAX_REGIONS: usize = 32;
    let mut storage = [MaybeUninit::uninit(); MAX_REGIONS];

    let scan_arg = PageMapScanBuilder::new(ptr::slice_from_raw_parts(ptr, len.byte_count()))
        .max_pages(keep_resident.byte_count() / host_page_size)
"""
_SCAN_AFTER = """    // Regions come back in batches of `MAX_REGIONS` (glovebox: the scan goes on from where a full
    // batch stopped, so that written pages past the first batch are restored in place too instead of
    // being decommitted and faulted in again by the next instance).
    const MAX_REGIONS: usize = 32;
    let mut storage = [MaybeUninit::uninit(); MAX_REGIONS];
    let end = ptr.wrapping_add(len.byte_count());
    let mut start = ptr;
    let mut pages_left = keep_resident.byte_count() / host_page_size;
    let mut bytes_resident = 0;
    loop {

    let scan_arg = PageMapScanBuilder::new(ptr::slice_from_raw_parts(start, end.addr() - start.addr()))
        .max_pages(pages_left)
"""
_FAILED_BEFORE = """        Err(err) => unsafe {
"""
_FAILED_AFTER = """        Err(err) if start == ptr => unsafe {
"""
_LATER_BEFORE = """        },
    };

    // For all regions that were written in the scan reset them manually, then
    // afterwards decommit everything else.
    let mut bytes_resident = 0;
    for region in result.regions() {
"""
_LATER_AFTER = """        },

        // A later batch failed: what it would have covered is decommitted.
        Err(err) => {
            log::warn!("failed pagemap scan {err}");
            decommit(start, end.addr() - start.addr());
            return bytes_resident;
        }
    };

    // For all regions that were written in the scan reset them manually, then
    // afterwards decommit everything else.
    let full = result.regions().len() == MAX_REGIONS;
    for region in result.regions() {
"""
_REST_BEFORE = """        bytes_resident += region.len();
    }

    // Report everything after `walk_end` to the end of memory as memory that
    // must be decommitted as the scan didn't reach it. Note that if `walk_end`
    // is already at the end of memory then the byte size of the decommitted
    // memory here will be 0 meaning that this is a noop.
    let scan_size = result.walk_end().addr() - ptr.addr();
    decommit(result.walk_end().cast_mut(), len.byte_count() - scan_size);

    bytes_resident
}
"""
_REST_AFTER = """        bytes_resident += region.len();
        pages_left = pages_left.saturating_sub(region.len() / host_page_size);
    }

    // A full batch with pages left to keep: scan on from where it stopped (the kernel returns no
    // more than `MAX_REGIONS` regions, and a `max_pages` of zero would mean no limit at all).
    let walk_end = result.walk_end().cast_mut();
    if full && pages_left > 0 && walk_end.addr() > start.addr() && walk_end.addr() < end.addr() {
        start = walk_end;
        continue;
    }

    // Report everything after `walk_end` to the end of memory as memory that
    // must be decommitted as the scan didn't reach it. Note that if `walk_end`
    // is already at the end of memory then the byte size of the decommitted
    // memory here will be 0 meaning that this is a noop.
    decommit(walk_end, end.addr() - walk_end.addr());

    return bytes_resident;
    }
}
"""
_FIELDS_BEFORE = """    /// Sorted list, by function index, of names we have for this module.
    func_names: Vec<FunctionName>,
}
"""
_FIELDS_AFTER = """    /// Sorted list, by function index, of names we have for this module.
    func_names: Vec<FunctionName>,
    /// glovebox: per defined function (by `DefinedFuncIndex`), the `(start, length)` in the text
    /// section of its body and of its array-to-wasm trampoline (`u32::MAX` where it has none), read
    /// once from `index` when the module loads: `function_range` answers these two keys from here.
    defined_locs: Vec<[(u32, u32); 2]>,
}
"""
_MADE_BEFORE = """            index,
            func_names: info.func_names,
        };
        ret.register_profiling(profiler)?;
"""
_MADE_AFTER = """            index,
            func_names: info.func_names,
            defined_locs: Vec::new(),
        };
        ret.defined_locs = ret.find_defined_locs();
        ret.register_profiling(profiler)?;
"""
_INDEX_BEFORE = """    fn module_index(&self) -> StaticModuleIndex {
        self.module.module_index
    }
"""
_INDEX_AFTER = """    fn module_index(&self) -> StaticModuleIndex {
        self.module.module_index
    }

    /// glovebox: see `defined_locs`.
    fn find_defined_locs(&self) -> Vec<[(u32, u32); 2]> {
        let module = self.module_index();
        let at = |key| self.index.func_loc(key).map_or((u32::MAX, 0), |loc| (loc.start, loc.length));
        self.module
            .defined_func_indices()
            .map(|i| {
                [
                    at(FuncKey::DefinedWasmFunction(module, i)),
                    at(FuncKey::ArrayToWasmTrampoline(module, i)),
                ]
            })
            .collect()
    }
"""
_RANGE_BEFORE = """    pub fn function_range(&self, key: FuncKey) -> Range<usize> {
        let loc = self.func_loc(key);
"""
_RANGE_AFTER = """    pub fn function_range(&self, key: FuncKey) -> Range<usize> {
        // glovebox: a funcref's two keys from `defined_locs` (each made with the same `func_loc`
        // below); any other key, or one with no location, goes the published way.
        let found = match key {
            FuncKey::DefinedWasmFunction(module, i) if module == self.module_index() => {
                self.defined_locs.get(i.as_u32() as usize).map(|locs| locs[0])
            }
            FuncKey::ArrayToWasmTrampoline(module, i) if module == self.module_index() => {
                self.defined_locs.get(i.as_u32() as usize).map(|locs| locs[1])
            }
            _ => None,
        };
        if let Some((start, length)) = found.filter(|&(start, _)| start != u32::MAX) {
            let start = usize::try_from(start).unwrap();
            return start..start + usize::try_from(length).unwrap();
        }
        let loc = self.func_loc(key);
"""
#: (file, text as published, text here): each published text must occur exactly once.
EDITS = [
    (PAGEMAP, _SCAN_BEFORE, _SCAN_AFTER),
    (PAGEMAP, _FAILED_BEFORE, _FAILED_AFTER),
    (PAGEMAP, _LATER_BEFORE, _LATER_AFTER),
    (PAGEMAP, _REST_BEFORE, _REST_AFTER),
    (INSTANTIATE, _FIELDS_BEFORE, _FIELDS_AFTER),
    (INSTANTIATE, _MADE_BEFORE, _MADE_AFTER),
    (INSTANTIATE, _INDEX_BEFORE, _INDEX_AFTER),
    (INSTANTIATE, _RANGE_BEFORE, _RANGE_AFTER),
]


def _digest() -> str:
    h = hashlib.sha256(SHA256.encode())
    for path, before, after in EDITS:
        for part in (path, before, after):
            h.update(part.encode())
            h.update(b"\0")
    return h.hexdigest()


def _cached() -> Path | None:
    """The crate in cargo's download cache, when there."""
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    for found in sorted((home / "registry" / "cache").glob(f"*/{CRATE}-{VERSION}.crate")):
        return found
    return None


def _download() -> bytes:
    for attempt in range(4):
        try:
            with urllib.request.urlopen(URL, timeout=60) as answer:  # noqa: S310 (a fixed https URL)
                return bytes(answer.read())
        except OSError as exc:
            if attempt == 3:
                raise SystemExit(f"vendor.py: cannot download {URL}: {exc}") from exc
            time.sleep(2**attempt)
    raise AssertionError("unreachable")


def _crate() -> bytes:
    cached = _cached()
    data = cached.read_bytes() if cached is not None else b""
    if hashlib.sha256(data).hexdigest() != SHA256:
        data = _download()
    got = hashlib.sha256(data).hexdigest()
    if got != SHA256:
        raise SystemExit(f"vendor.py: {CRATE}-{VERSION}.crate has SHA-256 {got}, not Cargo.lock's {SHA256}")
    return data


def _extract(archive: tarfile.TarFile, into: Path) -> None:
    """Unpack regular files and directories only, each inside ``into`` (the ``data`` filter, or its checks
    where this Python predates it)."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(into, filter="data")
        return
    for member in archive.getmembers():
        inside = (into / member.name).resolve().is_relative_to(into.resolve())
        if not inside or not (member.isfile() or member.isdir()):
            raise SystemExit(f"vendor.py: {CRATE}-{VERSION}.crate holds {member.name!r}, which is not unpacked")
    archive.extractall(into)  # noqa: S202 (every member checked above)


def main() -> None:
    target = VENDOR / CRATE
    stamp = target / ".glovebox-vendored"
    want = _digest()
    if stamp.is_file() and stamp.read_text().strip() == want:
        return
    data = _crate()
    VENDOR.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=VENDOR) as tmp:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            _extract(archive, Path(tmp))
        unpacked = Path(tmp) / f"{CRATE}-{VERSION}"
        for path, before, after in EDITS:
            file = unpacked / path
            text = file.read_text()
            if text.count(before) != 1:
                raise SystemExit(f"vendor.py: {path} of {CRATE} {VERSION} does not hold the text to change once")
            file.write_text(text.replace(before, after))
        (unpacked / stamp.name).write_text(want + "\n")
        if target.exists():
            shutil.rmtree(target)
        unpacked.rename(target)
    where = target.relative_to(NATIVE.parent)
    print(f"vendor.py: {where} is {CRATE} {VERSION} with glovebox's changes", file=sys.stderr)


if __name__ == "__main__":
    main()
