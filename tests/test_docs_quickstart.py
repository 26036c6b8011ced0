"""The README's install and quick start, command by command, as a new user runs them.

Twice, each in a fresh venv with only its ``bin`` (and ``/usr/bin:/bin``) on ``PATH``:
in a fresh copy of the checkout (the README's set-up block creates ``.venv`` there),
and from the wheel built from that copy, installed in a venv outside it and run in
a directory that holds no checkout at all.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .docs_blocks import ROOT, Page, copy_checkout, page_blocks
from .test_docs_examples import zig_cache

pytestmark = pytest.mark.slow


def _page(work: Path, bin_dir: Path, cache_root: Path) -> Page:
    page = Page(work, bin_dir, link_checkout=False, cache=cache_root / "docs-xdg")
    page.env["ZIG_GLOBAL_CACHE_DIR"] = zig_cache()
    return page


def test_readme_quick_start_in_a_fresh_copy(tmp_path: Path, cache_root: Path) -> None:
    copy = tmp_path / "glovebox"
    copy_checkout(copy)
    assert not (copy / ".venv").exists()
    page = _page(copy, copy / ".venv" / "bin", cache_root)
    blocks = page_blocks(ROOT / "README.md")
    assert page.run(blocks, setup=True) >= 3
    assert (copy / ".venv" / "bin" / "glovebox").is_file()
    assert (copy / "greet.wasm").is_file()


def test_readme_quick_start_from_the_wheel_outside_the_repo(tmp_path: Path, cache_root: Path) -> None:
    copy = tmp_path / "src"
    copy_checkout(copy)
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(copy)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("glovebox_runtime-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", f"{wheel}[build]"], check=True, capture_output=True
    )
    work = tmp_path / "elsewhere"
    page = _page(work, venv / "bin", cache_root)
    # The quick starts and the warm call (the set-up is the checkout's).
    assert page.run(page_blocks(ROOT / "README.md")) == 3
    assert not (work / "guest").exists()
