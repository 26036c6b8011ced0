"""Leftovers under a home: a SIGKILLed registration's staged files, blobs no tool uses,
files a removal set aside; ``Runtime.gc`` / ``glovebox gc`` remove them and never
touch a registration in progress."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli

BuildGuest = Callable[[str], Path]

#: Registers argv[2] as argv[3] in home argv[1], stopping after the compile until a line arrives on stdin.
STALLED_REGISTRATION = """
import sys
import glovebox
from glovebox.registry import _registration

compile = _registration.precompile

def compile_then_wait(*args):
    compile(*args)
    print("staged", flush=True)
    sys.stdin.readline()

_registration.precompile = compile_then_wait
with glovebox.Runtime(home=sys.argv[1]) as rt:
    print("registered", rt.register(sys.argv[2], {"name": sys.argv[3], "version": "1.0.0"}).name, flush=True)
"""


@pytest.fixture
def stalled(tmp_path: Path) -> Iterator[Callable[[Path, Path, str], subprocess.Popen[str]]]:
    """Start registrations that stop after compiling (killed at the end of the test)."""
    procs: list[subprocess.Popen[str]] = []

    def start(home: Path, wasm: Path, name: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", STALLED_REGISTRATION, str(home), str(wasm), name]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "staged\n"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


Stalled = Callable[[Path, Path, str], subprocess.Popen[str]]


def staged(home: Path) -> set[Path]:
    compiled, blobs = home / "cache" / "compiled", home / "blobs" / "sha256"
    return {*compiled.glob(".register-*"), *compiled.glob("*.cwasm.*"), *blobs.glob("*.part")}


def orphans(home: Path) -> set[Path]:
    """A blob and a compiled component no tool uses, and a file a removal set aside."""
    digest = "sha256:" + "0" * 64
    made = {
        home / "blobs" / "sha256" / f"{'0' * 64}.wasm",
        home / "blobs" / "sha256" / f".removed-1234-{'1' * 64}.wasm",
        home / "cache" / "compiled" / f"{digest}-fingerprint.cwasm",
    }
    for path in made:
        path.write_bytes(b"\0asm")
    return made


def test_gc_removes_a_killed_registration_and_spares_a_live_one(
    tmp_path: Path, build_guest: BuildGuest, stalled: Stalled
) -> None:
    home = tmp_path / "h"
    glovebox.Runtime(home=home).close()
    live = stalled(home, build_guest("echo"), "live")
    live_files = staged(home)
    assert live_files
    dead = stalled(home, build_guest("guest_error"), "dead")
    dead.kill()
    dead.wait()
    leftovers = staged(home) - live_files
    assert {path.suffix for path in leftovers} >= {".part"} and any(p.name.startswith(".register-") for p in leftovers)
    unused = orphans(home)
    with glovebox.Runtime(home=home) as rt:
        assert set(rt.gc()) == unused  # staged files wait: a registration is live
        assert not any(path.exists() for path in unused)
        assert staged(home) == leftovers | live_files
        out, _ = live.communicate("go\n", timeout=120)
        assert live.returncode == 0 and out.endswith("registered live\n")

        result = CliRunner().invoke(cli, ["--home", str(home), "gc"])
        assert result.exit_code == 0, result.output
        assert {line.removeprefix("removed ") for line in result.output.splitlines()[:-1]} == {
            str(path) for path in leftovers
        }
        assert result.output.endswith(f"{len(leftovers)} leftover file(s) removed\n")
        assert staged(home) == set()
        assert [info.name for info in rt.tools()] == ["live"]
        assert rt.call("live", {"n": 2}).output == {"n": 2}
        assert rt.gc() == []


def test_a_runtime_sweeps_dead_staging_when_its_engine_starts(
    tmp_path: Path, build_guest: BuildGuest, stalled: Stalled
) -> None:
    home = tmp_path / "h"
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_guest("echo"), {"name": "echo", "version": "1.0.0"})
    dead = stalled(home, build_guest("guest_error"), "dead")
    dead.kill()
    dead.wait()
    assert staged(home)
    with glovebox.Runtime(home=home) as rt:
        assert staged(home)  # opening a home does not touch the engine or the caches
        assert rt.call("echo", {"n": 1}).ok
        assert staged(home) == set()


def test_removal_deletes_the_blob_and_leaves_nothing_aside(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    info = runtime.register(build_guest("echo"), {"name": "echo", "version": "1.0.0"})
    runtime.remove("echo", all_versions=True)
    home = runtime.home
    assert not runtime._registry.blob_path(info.digest).exists()
    assert not list((home / "blobs" / "sha256").iterdir())
    assert not list((home / "cache" / "compiled").iterdir())
    assert runtime.gc() == []
