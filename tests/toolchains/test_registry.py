"""Toolchains register as entry points: the built-ins, and a package's through the group ``glovebox.toolchains``."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli
from glovebox.toolchains._c import CToolchain
from glovebox.toolchains._registry import DEFAULT_TOOLCHAINS, GROUP, _load, registered, toolchain_for

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = '''
from pathlib import Path

import glovebox


class Hello(glovebox.Toolchain):
    """C under another suffix: the built-in C toolchain on a copy named .c."""

    name = "hello"
    suffixes = (".hello",)

    def build(self, src: Path, out: Path, context: glovebox.BuildContext) -> None:
        from glovebox.toolchains._c import CToolchain

        copy = out.with_name(src.stem + "-hello.c")
        copy.write_text(src.read_text())
        CToolchain().build(copy, out, context)
'''


def test_the_built_ins_are_entry_points_loaded_first() -> None:
    assert [(t.name, t.suffixes, t.project_files) for t in registered()[:5]] == [
        ("c", (".c",), ()),
        ("python", (".py",), ()),
        ("js", (".js", ".mjs", ".ts", ".mts"), ()),
        ("rust", (".rs",), ("Cargo.toml",)),
        ("go", (".go",), ("go.mod",)),
    ]
    assert all(":" in value and value.startswith("glovebox.toolchains.") for _, value in DEFAULT_TOOLCHAINS)


def test_an_unknown_suffix_names_the_registered_ones(tmp_path: Path) -> None:
    src = tmp_path / "tool.zig"
    src.write_text("pub fn main() void {}\n")
    result = CliRunner().invoke(cli, ["build", str(src), "-o", str(tmp_path / "tool.wasm")])
    assert result.exit_code == 1
    assert result.output == (
        f"error [build_failed]: cannot build {src}: no toolchain builds .zig sources; the registered toolchains"
        " build c: .c; python: .py; js: .js, .mjs, .ts, .mts; rust: .rs; go: .go\n"
    )
    assert not (tmp_path / "tool.wasm").exists()


def test_two_toolchains_for_one_suffix_are_named() -> None:
    class Other(CToolchain):
        name = "other"

    with pytest.raises(glovebox.BuildError, match=r"more than one toolchain builds \.c sources: c \(.*\), other"):
        toolchain_for(Path("x.c"), [CToolchain(), Other()])


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("no_such_module_here:Thing", "cannot load toolchain 'x' (no_such_module_here:Thing, entry point group "),
        ("pathlib:Path", "is not a subclass of glovebox.toolchains Toolchain"),
    ],
)
def test_a_broken_entry_point_is_named(value: str, says: str) -> None:
    with pytest.raises(glovebox.BuildError) as raised:
        _load(EntryPoint("x", value, GROUP))
    assert says in raised.value.message


def test_a_package_adds_a_language_through_its_entry_point(tmp_path: Path) -> None:
    """An installed package (a module and its dist-info) builds a new suffix through the real CLI."""
    pytest.importorskip("ziglang")
    site = tmp_path / "site"
    (site / "hello_toolchain-1.0.dist-info").mkdir(parents=True)
    (site / "hello_toolchain.py").write_text(PLUGIN)
    info = site / "hello_toolchain-1.0.dist-info"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-toolchain\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\nhello = hello_toolchain:Hello\n")
    src = tmp_path / "greet.hello"
    src.write_text((ROOT / "guest" / "examples" / "calc" / "tool.c").read_text())
    path = os.pathsep.join([str(site), str(ROOT / "runtime"), os.environ.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "glovebox", "build", str(src), "-o", str(tmp_path / "greet.wasm")]
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path}, timeout=600)
    assert (done.returncode, done.stdout) == (0, f"{tmp_path / 'greet.wasm'}\n"), done.stderr
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        rt.register(tmp_path / "greet.wasm", {"name": "calc"})
        assert rt.call("calc", {"expression": "6 * 7"}).output == {"value": 42}
    (tmp_path / "x.zz").write_text("")
    unknown = subprocess.run(
        [*argv[:4], str(tmp_path / "x.zz")], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path}
    )
    assert unknown.stderr.endswith("js: .js, .mjs, .ts, .mts; rust: .rs; go: .go; hello: .hello\n"), unknown.stderr
