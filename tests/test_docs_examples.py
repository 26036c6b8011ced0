"""Every Python and console block of README.md and docs/ runs, or says why it does not.

The rules of a block are in ``docs_blocks``. Each page runs in a work directory of
its own, with the tools it builds from source there, against the venv's
``glovebox`` (``PATH`` holds only the venv's ``bin`` and ``/usr/bin:/bin``).
README.md's set-up block (the install) is left out here: tests/test_docs_quickstart.py
runs the README whole in a fresh copy and from a built wheel.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .conftest import require_toolchain
from .docs_blocks import (
    ROOT,
    Block,
    Page,
    output_matches,
    page_blocks,
    pages,
    parse_blocks,
    parse_console,
    venv_bin,
)

RUNNABLE = {"python", "console"}


def zig_cache() -> str:
    """Zig's own cache (its wasm32-wasi libc takes minutes to build once); shared so each page need not."""
    explicit = os.environ.get("ZIG_GLOBAL_CACHE_DIR")
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return explicit or str(base / "zig")


#: Pages whose examples need a compiler ``make`` cannot install: skipped, with the reason, without it.
PAGE_TOOLCHAINS = {"tools-rust.md": "rust", "tools-go.md": "go"}


def project_toolchains(cache_root: Path) -> dict[str, str]:
    """What the Rust and Go pages need from this machine: cargo and go on PATH, rustup's own home (the page's
    HOME is a fresh one), and the crates and packages compiled once for every test (``guestcache``)."""
    from .guestcache import project_env

    folders = [str(Path(found).parent) for found in (shutil.which("cargo"), shutil.which("go")) if found]
    env = {**project_env(cache_root), "PATH": os.pathsep.join([venv_bin().as_posix(), *folders, "/usr/bin:/bin"])}
    rustup_home = os.environ.get("RUSTUP_HOME") or str(Path.home() / ".rustup")
    if Path(rustup_home).is_dir():
        env["RUSTUP_HOME"] = rustup_home
    return env


def _pages_with_blocks() -> list[Path]:
    return [path for path in pages() if any(block.runs for block in page_blocks(path))]


def test_every_runnable_block_runs_or_gives_a_reason() -> None:
    counts = {"executed": 0, "illustrative": 0}
    for path in pages():
        for block in page_blocks(path):
            if block.lang not in RUNNABLE:
                continue
            if "illustrative" in block.directives:
                assert block.directives["illustrative"].strip(), f"{block.where}: illustrative without a reason"
                counts["illustrative"] += 1
            else:
                counts["executed"] += 1
    assert counts["executed"] >= 25, counts
    assert counts["illustrative"] <= counts["executed"] // 2, counts


def test_no_other_language_claims_to_be_python_or_shell() -> None:
    """A block in ``sh``/``bash``/``py`` would escape the runner: those must be ``console`` or ``python``."""
    for path in pages():
        for block in page_blocks(path):
            assert block.lang not in {"sh", "bash", "shell", "py", "pycon", ""} or "file" in block.directives, (
                f"{block.where}: use ```console or ```python (or mark it with a file: directive)"
            )


@pytest.mark.slow  # each page's commands, builds and servers: 10-50 s a page
@pytest.mark.parametrize("path", _pages_with_blocks(), ids=lambda path: str(path.relative_to(ROOT)))
def test_page_blocks_run(path: Path, tmp_path: Path, cache_root: Path) -> None:
    if path.name in PAGE_TOOLCHAINS:
        require_toolchain(PAGE_TOOLCHAINS[path.name])
    page = Page(tmp_path / "work", venv_bin(), cache=cache_root / "docs-xdg")
    page.env["ZIG_GLOBAL_CACHE_DIR"] = zig_cache()
    page.env["GLOVEBOX_TOOLCHAINS"] = os.environ["GLOVEBOX_TOOLCHAINS"]  # QuickJS-NG compiled once per run
    page.env.update(project_toolchains(cache_root))
    assert page.run(page_blocks(path)) > 0


# -- the runner itself ----------------------------------------------------------------


def test_parser_reads_directives_languages_and_indented_fences() -> None:
    text = "x\n<!-- file: a/b.c -->\n```c\nint x;\n```\n\n- item\n\n    ```console\n    $ echo hi\n    hi\n    ```\n"
    first, second = parse_blocks(text, "p.md")
    assert (first.lang, first.text, first.directives) == ("c", "int x;\n", {"file": "a/b.c"})
    assert (second.lang, second.text, second.runs) == ("console", "$ echo hi\nhi\n", True)


def test_console_commands_outputs_continuations_and_exit_codes() -> None:
    commands = parse_console("$ a \\\n  --b\nout\n$ c   # exit 1: it fails\n")
    assert [(c.line, c.expected, c.exit_code) for c in commands] == [
        ("a \\\n  --b", ["out"], 0),
        ("c   # exit 1: it fails", [], 1),
    ]
    with pytest.raises(ValueError):
        parse_console("output first\n$ a\n")


@pytest.mark.parametrize(
    ("expected", "actual", "matches"),
    [
        (["a …", "b"], "a anything\nb\n", True),
        (["a", "…"], "a\nb\nc\n", True),
        (["a", "…", "d"], "a\nb\nc\nd\n", True),
        (["a"], "a\nb\n", False),
        (["a …"], "b x\n", False),
        (["x (y)"], "x (y)\n", True),
    ],
)
def test_output_matching(expected: list[str], actual: str, matches: bool) -> None:
    assert output_matches(expected, actual) is matches


def test_a_wrong_output_and_a_wrong_exit_code_fail(tmp_path: Path) -> None:
    page = Page(tmp_path, venv_bin(), link_checkout=False)
    page.run_console(Block("p.md", 1, "console", "$ echo hello\nhello\n"))
    with pytest.raises(AssertionError, match="printed"):
        page.run_console(Block("p.md", 1, "console", "$ echo hello\ngoodbye\n"))
    with pytest.raises(AssertionError, match="exited 1, not 0"):
        page.run_console(Block("p.md", 1, "console", "$ false\n"))
    with pytest.raises(AssertionError, match="printed"):
        page.run_python(Block("p.md", 1, "python", "print('x')\n"), Block("p.md", 3, "text", "y\n"))
    with pytest.raises(AssertionError, match="exited 1"):
        page.run_python(Block("p.md", 1, "python", "raise SystemExit(1)\n"), None)


def test_exports_carry_to_the_next_block_and_jobs_are_stopped(tmp_path: Path) -> None:
    page = Page(tmp_path, venv_bin(), link_checkout=False)
    page.run_console(Block("p.md", 1, "console", "$ export GREETING=hi\n$ sleep 600 &\n"))
    page.run_console(Block("p.md", 5, "console", '$ echo "$GREETING"\nhi\n'))


def test_the_documented_port_is_replaced_by_a_free_one(tmp_path: Path) -> None:
    page = Page(tmp_path, venv_bin(), link_checkout=False)
    with pytest.raises(AssertionError, match="printed"):
        page.run_console(Block("p.md", 1, "console", "$ echo 8080\n8080\n"))


# -- the journeys' examples -----------------------------------------------------------


def _run_example(name: str, *args: str) -> str:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.system  # builds and serves the example's tools
def test_sensitive_data_example_approves_hides_the_secret_and_verifies_the_chain() -> None:
    out = _run_example("sensitive_data.py")
    assert "1. agent asks:      approval_required" in out
    assert "2. after approval:  ok; status 200, seen_with=[REDACTED]" in out
    assert "3. the same again:  approval_required" in out
    assert "4. outside grant:   capability_denied" in out
    assert "5. unknown caller:  permission_denied" in out
    assert "token in any row: False" in out
    assert "audit verify: ok=True rows=5" in out


@pytest.mark.system  # builds the example's tool, starts processes
def test_dense_sandboxes_example_serves_every_call_and_audits_each() -> None:
    out = _run_example("dense_sandboxes.py", "--calls", "300", "--processes", "2")
    assert "outcomes:  {'ok': 300}" in out
    assert "workers:   2 ran calls" in out
    assert "audit:     301 rows, chain ok=True" in out  # the warm-up call and the 300
