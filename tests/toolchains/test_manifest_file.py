"""``glovebox build`` never overwrites a manifest file it did not write (issue: a person's count.glovebox.toml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import glovebox
from glovebox.toolchains._build import GENERATED

ROOT = Path(__file__).resolve().parents[2]
COUNT_JS = 'export default function (input) {\n  return { count: String(input.text ?? "").length };\n}\n'
MINE = '# My own manifest.\nname = "count"\ndescription = "Count the characters of a text."\n'


def glovebox_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real ``glovebox`` command (stderr is a pipe, not a terminal)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "runtime"), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "glovebox", *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def test_a_persons_manifest_beside_the_output_is_refused_then_replaced_on_request(
    tmp_path: Path, build_js: object
) -> None:
    (tmp_path / "count.js").write_text(COUNT_JS)
    mine = tmp_path / "count.glovebox.toml"
    mine.write_text(MINE)
    refused = glovebox_cli("build", "count.js", "-o", "count.wasm", cwd=tmp_path)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        "error [build_failed]: refusing to overwrite count.glovebox.toml: glovebox build did not write it (its first"
        f' line does not say "{GENERATED}"). Move it away, or make it glovebox.toml beside the source, which the'
        " build reads; to replace it, build again with --overwrite-manifest (overwrite_manifest=True in Python)\n"
    )
    assert mine.read_text() == MINE and not (tmp_path / "count.wasm").exists()
    with pytest.raises(glovebox.BuildError, match="refusing to overwrite .*count.glovebox.toml"):
        glovebox.build(tmp_path / "count.js", tmp_path / "count.wasm")
    assert mine.read_text() == MINE

    replaced = glovebox_cli("build", "count.js", "-o", "count.wasm", "--overwrite-manifest", cwd=tmp_path)
    assert (replaced.returncode, replaced.stdout) == (0, "count.wasm\n"), replaced.stderr
    first = mine.read_text().splitlines()[0]
    assert first == f"# {GENERATED}; edit glovebox.toml beside the source instead."
    again = glovebox_cli("build", "count.js", "-o", "count.wasm", cwd=tmp_path)  # its own file: rewritten freely
    assert (again.returncode, again.stdout) == (0, "count.wasm\n"), again.stderr


def test_a_c_build_without_a_manifest_of_its_own_leaves_the_file_alone(tmp_path: Path) -> None:
    pytest.importorskip("ziglang")
    shutil.copyfile(ROOT / "guest" / "examples" / "calc" / "tool.c", tmp_path / "calc.c")
    (tmp_path / "other.c").write_text("")  # two sources: the folder's glovebox.toml is nobody's
    mine = tmp_path / "calc.glovebox.toml"
    mine.write_text(MINE)
    assert glovebox.build(tmp_path / "calc.c", tmp_path / "calc.wasm") == tmp_path / "calc.wasm"
    assert mine.read_text() == MINE


def test_a_copy_an_older_build_wrote_is_replaced_with_the_line(tmp_path: Path) -> None:
    """Older builds copied a C tool's glovebox.toml verbatim: the same text is not a person's work to keep."""
    pytest.importorskip("ziglang")
    folder = tmp_path / "calc"
    shutil.copytree(ROOT / "guest" / "examples" / "calc", folder)
    copy = tmp_path / "calc.glovebox.toml"
    shutil.copyfile(folder / "glovebox.toml", copy)
    glovebox.build(folder / "tool.c", tmp_path / "calc.wasm")
    assert (
        copy.read_text()
        == f"# {GENERATED}; edit glovebox.toml beside the source instead.\n" + (folder / "glovebox.toml").read_text()
    )
    edited = copy.read_text().replace(f"# {GENERATED}", "# mine now")
    copy.write_text(edited)
    with pytest.raises(glovebox.BuildError, match="--overwrite-manifest"):
        glovebox.build(folder / "tool.c", tmp_path / "calc.wasm")
    assert copy.read_text() == edited
    glovebox.build(folder / "tool.c", tmp_path / "calc.wasm", overwrite_manifest=True)
    assert copy.read_text().startswith(f"# {GENERATED}")
