"""The engine: made on first need, sized to the address space, its ticker reference-counted."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import wasmtime
from click.testing import CliRunner
from wasmtime.component import Component

import glovebox
from glovebox import EngineSettings
from glovebox.cli._main import cli
from glovebox.engine._allocation import GIB, ON_DEMAND, plan_allocation, pool_reservation_bytes
from glovebox.engine._codegen import compile_config
from glovebox.engine._compile import precompile
from glovebox.engine._engine import SharedEngine, get_engine
from glovebox.model._manifest import HOST_MAXIMA
from glovebox.registry._compiled import file_sha256

BuildGuest = Callable[[str], Path]

#: A small pool, so that the engines these tests make reserve gigabytes, not terabytes.
SMALL_POOL = {"total_memories": 32, "total_tables": 64, "total_core_instances": 128, "total_component_instances": 32}
TEXT = {"text": "héllo wörld\n"}
TEXT_STATS = {"characters": 12, "words": 2, "lines": 1, "bytes": 14}


def small(**changes: Any) -> EngineSettings:
    return EngineSettings(**{**SMALL_POOL, **changes})


def shared_of(rt: glovebox.Runtime) -> SharedEngine:
    assert rt._wasm_parts is not None, "this Runtime has not made its engine yet"
    return rt._wasm_parts.shared


def vm_size_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


# -- settings ---------------------------------------------------------------------------------


def test_default_memory_slot_is_the_host_maximum() -> None:
    assert EngineSettings().memory_slot_bytes == HOST_MAXIMA.memory_bytes


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"total_memories": 0}, ValueError),
        ({"table_elements": -1}, ValueError),
        ({"memory_slot_bytes": 100_000}, ValueError),
        ({"memory_guard_bytes": 4096}, ValueError),
        ({"max_memories_per_component": 40}, ValueError),
        ({"max_core_instances_per_component": 200}, ValueError),
        ({"epoch_tick_ms": 0}, ValueError),
        ({"total_tables": 2.5}, TypeError),
        ({"total_tables": True}, TypeError),
        ({"pooling": 1}, TypeError),
    ],
)
def test_bad_settings_are_refused(changes: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        small(**changes)


def test_runtime_refuses_an_engine_that_is_not_settings(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="EngineSettings"):
        glovebox.Runtime(home=tmp_path, engine={"total_memories": 8})  # type: ignore[arg-type]


def test_fingerprint_ignores_pool_sizes_and_pooling() -> None:
    default = EngineSettings()
    assert small().fingerprint() == default.fingerprint()
    assert EngineSettings(pooling=False, epoch_tick_ms=5).fingerprint() == default.fingerprint()
    assert EngineSettings(memory_guard_bytes=128 * 1024).fingerprint() != default.fingerprint()
    assert EngineSettings(memory_slot_bytes=128 * 1024 * 1024).fingerprint() != default.fingerprint()


# -- sizing the pool --------------------------------------------------------------------------


def test_without_a_limit_the_whole_pool_is_reserved() -> None:
    settings = EngineSettings()
    plan = plan_allocation(settings, None)
    assert (plan.memories, plan.tables) == (settings.total_memories, settings.total_tables)
    assert plan.reserved_bytes > settings.total_memories * settings.memory_slot_bytes


def test_a_limit_shrinks_the_pool_to_fit() -> None:
    settings = EngineSettings()
    budget = 10 * GIB
    plan = plan_allocation(settings, budget)
    assert plan.pooled
    assert settings.max_memories_per_component <= plan.memories < settings.total_memories
    assert plan.reserved_bytes <= budget
    # The largest that fits: one more memory slot would not.
    assert pool_reservation_bytes(settings, plan.memories + 1, plan.tables + 2) > budget
    assert plan.tables == plan.memories * settings.total_tables // settings.total_memories


def test_a_limit_too_small_for_one_component_allocates_on_demand() -> None:
    settings = EngineSettings()
    smallest = pool_reservation_bytes(settings, settings.max_memories_per_component, 16)
    assert plan_allocation(settings, smallest - 1) == ON_DEMAND
    assert plan_allocation(settings, -GIB) == ON_DEMAND
    assert plan_allocation(EngineSettings(pooling=False), None) == ON_DEMAND


def test_the_reservation_matches_what_wasmtime_maps() -> None:
    settings = small(total_memories=24, total_tables=40, table_elements=30_000)
    plan = plan_allocation(settings, None)
    before = vm_size_bytes()
    shared = SharedEngine(settings)
    grown = vm_size_bytes() - before
    assert shared.allocation == plan
    # The pool, plus at most a few MiB of the engine's own bookkeeping.
    assert plan.reserved_bytes <= grown <= plan.reserved_bytes + 64 * 1024 * 1024


# -- made on first need -------------------------------------------------------------------------


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to make (or take) an engine fails the test."""

    def refuse(settings: EngineSettings) -> SharedEngine:
        raise AssertionError(f"an engine was requested: {settings}")

    monkeypatch.setattr("glovebox.runtime._wasmparts.acquire_engine", refuse)


@pytest.fixture
def stats_home(tmp_path: Path, build_example: BuildGuest) -> Path:
    home = tmp_path / "stats"
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_example("text-stats"))
    return home


def test_reading_the_registry_makes_no_engine(stats_home: Path, no_engine: None) -> None:
    with glovebox.Runtime(home=stats_home) as rt:
        assert [info.name for info in rt.tools()] == ["text-stats"]
        assert rt.tool("text-stats").version == "1.0.0"
        assert [info.name for info in rt.visible_tools()] == ["text-stats"]
        assert rt.explain("text-stats").action == "allow"
        assert rt.live_instances == 0
        assert rt.deprecate("text-stats", "old")[0].deprecated == "old"
        assert rt._wasm_parts is None
        # The guard does guard: a call needs the engine, and is refused one here.
        assert rt.call("text-stats", TEXT).code == "internal_error"
    assert rt._wasm_parts is None


@pytest.mark.parametrize(
    "args",
    [
        ["tools", "--json"],
        ["show", "text-stats"],
        ["policy", "explain", "--principal", "p", "--tool", "text-stats"],
        ["audit", "tail"],
        ["audit", "verify"],
        ["export", "--format", "openai"],
    ],
)
def test_read_only_commands_make_no_engine(stats_home: Path, no_engine: None, args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["--home", str(stats_home), *args])
    assert result.exit_code == 0, result.output
    assert result.exception is None


# -- one engine per settings, and its ticker ------------------------------------------------------


def test_equal_settings_share_an_engine_and_different_ones_do_not(tmp_path: Path, build_guest: BuildGuest) -> None:
    echo = build_guest("echo")
    with (
        glovebox.Runtime(home=tmp_path / "a", engine=small(total_memories=30)) as a,
        glovebox.Runtime(home=tmp_path / "b", engine=small(total_memories=30)) as b,
        glovebox.Runtime(home=tmp_path / "c", engine=small(total_memories=31)) as c,
    ):
        for rt in (a, b, c):
            rt.register(echo, manifest={"name": "echo"})
            assert rt.call("echo", {"x": 1}).output == {"x": 1}
        assert shared_of(a) is shared_of(b)
        assert shared_of(c) is not shared_of(a)
        assert shared_of(c).allocation.memories == 31


def test_ticker_stops_with_the_last_runtime_and_starts_again(tmp_path: Path, build_guest: BuildGuest) -> None:
    settings = small(total_memories=29)
    echo = build_guest("echo")
    a = glovebox.Runtime(home=tmp_path / "h", engine=settings)
    b = glovebox.Runtime(home=tmp_path / "h", engine=settings)
    a.register(echo, manifest={"name": "echo"})
    shared = shared_of(a)
    first = shared.ticker
    assert first is not None and first.running
    assert b.call("echo", 1).output == 1
    a.close()
    assert shared.ticker is first and first.running
    b.close()
    assert shared.ticker is None
    assert not first.running
    with glovebox.Runtime(home=tmp_path / "h", engine=settings) as c:
        assert c.call("echo", 2).output == 2
        second = shared.ticker
        assert second is not None and second is not first and second.running
    assert not second.running
    assert shared.ticker is None


def test_a_runtime_that_never_called_holds_no_ticker(tmp_path: Path) -> None:
    settings = small(total_memories=28)
    shared = get_engine(settings)
    with glovebox.Runtime(home=tmp_path, engine=settings) as rt:
        assert rt.tools() == []
        assert shared.ticker is None


def test_closing_one_runtime_keeps_the_deadline_of_anothers_running_call(
    tmp_path: Path, build_guest: BuildGuest
) -> None:
    # Fuel at the host maximum: only the epoch deadline (so, a running ticker) stops the loop early.
    settings = small(total_memories=27)
    limits = {"timeout_ms": 300, "fuel": HOST_MAXIMA.fuel}
    a = glovebox.Runtime(home=tmp_path / "h", engine=settings)
    a.register(build_guest("loop_forever"), manifest={"name": "loop", "limits": limits})
    results: list[glovebox.CallResult] = []
    with glovebox.Runtime(home=tmp_path / "h", engine=settings) as b:
        caller = threading.Thread(target=lambda: results.append(b.call("loop", None)))
        caller.start()
        while b.live_instances == 0 and caller.is_alive():
            time.sleep(0.001)
        a.close()
        caller.join()
    [result] = results
    assert result.code == "timeout"


def test_a_closed_runtime_cannot_make_an_engine(tmp_path: Path) -> None:
    rt = glovebox.Runtime(home=tmp_path, engine=small(total_memories=26))
    rt.close()
    with pytest.raises(ValueError, match="closed"):
        rt.register(tmp_path / "missing.wasm")
    assert rt._wasm_parts is None


# -- under an address-space limit ---------------------------------------------------------------


def limited(kib: int, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` under ``ulimit -v kib`` (soft and hard)."""
    return subprocess.run(
        ["sh", "-c", f'ulimit -v {kib} && exec "$@"', "sh", *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )


def glovebox_cli(kib: int, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return limited(kib, sys.executable, "-m", "glovebox", "--home", str(home), *args)


def test_cli_registers_lists_and_calls_under_a_16_gb_limit(tmp_path: Path, build_example: BuildGuest) -> None:
    home, kib = tmp_path / "limited", 16_000_000
    registered = glovebox_cli(kib, home, "register", str(build_example("text-stats")))
    assert registered.returncode == 0, registered.stderr
    listed = glovebox_cli(kib, home, "tools", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [tool["name"] for tool in json.loads(listed.stdout)] == ["text-stats"]
    called = glovebox_cli(kib, home, "call", "text-stats", "--input", json.dumps(TEXT))
    assert called.returncode == 0, called.stderr
    envelope = json.loads(called.stdout)
    assert envelope["ok"] is True
    assert envelope["output"] == TEXT_STATS
    assert envelope["meta"]["tool"] == "text-stats"


ALLOCATION_PROBE = """
import json, sys
import glovebox
with glovebox.Runtime(home=sys.argv[1]) as rt:
    rt.register(sys.argv[2])
    result = rt.call("text-stats", json.loads(sys.argv[3]))
    allocation = rt._wasm_parts.shared.allocation
print(json.dumps({"envelope": result.to_dict(), "memories": allocation.memories}))
"""


@pytest.mark.parametrize(("kib", "pooled"), [(16_000_000, True), (2_500_000, False)])
def test_the_engine_fits_the_limit(tmp_path: Path, build_example: BuildGuest, kib: int, pooled: bool) -> None:
    """16 GB holds a shrunken pool; 2.5 GB holds no pool at all, so instances come on demand."""
    wasm = str(build_example("text-stats"))
    proc = limited(kib, sys.executable, "-c", ALLOCATION_PROBE, str(tmp_path / "h"), wasm, json.dumps(TEXT))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["envelope"]["ok"] is True, report
    assert report["envelope"]["output"] == TEXT_STATS
    if pooled:
        assert 0 < report["memories"] < EngineSettings().total_memories
    else:
        assert report["memories"] == 0
        assert "allocating instances on demand" in proc.stderr


def test_a_component_compiled_for_the_pool_runs_on_demand(stats_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The wasmtime-py compile cache; the native core's is tests/sandbox/test_native.py's.
    monkeypatch.setenv("GLOVEBOX_NATIVE", "0")

    def no_compile(*args: object) -> None:
        raise AssertionError("the compiled component from registration should have loaded")

    monkeypatch.setattr("glovebox.registry._compiled.precompile", no_compile)
    with glovebox.Runtime(home=stats_home, engine=EngineSettings(pooling=False)) as rt:
        result = rt.call("text-stats", TEXT)
        assert shared_of(rt).allocation == ON_DEMAND
    assert result.output == TEXT_STATS


def test_the_cache_key_covers_copy_on_write_images() -> None:
    settings = EngineSettings()
    assert settings.codegen()["memory_init_cow"] is True
    assert compile_config(**settings.codegen()) is not None


def test_a_cache_made_under_another_key_is_compiled_again(
    tmp_path: Path, build_example: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wasmtime-py compile cache; the native core's is tests/sandbox/test_native.py's.
    monkeypatch.setenv("GLOVEBOX_NATIVE", "0")
    home = tmp_path / "home"
    # Pool sizes no other test uses: a fresh engine holds no component in memory.
    with monkeypatch.context() as patched:
        patched.setattr(EngineSettings, "fingerprint", lambda self: "0123456789abcdef")
        with glovebox.Runtime(home=home, engine=small(total_memories=23)) as rt:
            rt.register(build_example("text-stats"))
    compiles: list[object] = []
    real = precompile

    def counting(*args: Any) -> None:
        compiles.append(args)
        real(*args)

    monkeypatch.setattr("glovebox.registry._compiled.precompile", counting)
    with glovebox.Runtime(home=home, engine=small(total_memories=22)) as rt:
        assert rt.call("text-stats", TEXT).output == TEXT_STATS
        fingerprint = shared_of(rt).fingerprint
    assert len(compiles) == 1
    names = sorted(path.name.split("-")[-1] for path in (home / "cache" / "compiled").glob("*.cwasm"))
    assert names == sorted(["0123456789abcdef.cwasm", f"{fingerprint}.cwasm"])


def test_a_verified_compiled_file_the_engine_refuses_is_rebuilt(stats_home: Path) -> None:
    """A cache entry whose key missed a setting (here: no copy-on-write images) is compiled again, not an error."""
    settings = small(total_memories=21)  # a fresh engine: nothing in memory yet
    with glovebox.Runtime(home=stats_home, engine=settings) as rt:
        digest = rt.tool("text-stats").digest
        cache = rt._compiled
        target = cache.path(digest)
        copying = wasmtime.Engine(compile_config(**{**settings.codegen(), "memory_init_cow": False}))
        staged = target.with_name("planted.cwasm")
        staged.write_bytes(Component(copying, cache.registry.blob_path(digest).read_bytes()).serialize())
        assert cache.registry.adopt_compiled(digest, cache.staged(digest, staged))
        with pytest.raises(wasmtime.WasmtimeError, match="CoW"):
            shared_of(rt).load(target)
        planted = file_sha256(target)
        result = rt.call("text-stats", TEXT)
        assert result.output == TEXT_STATS, result.to_dict()
        assert file_sha256(target) != planted
        assert cache.registry.compiled_hash(digest, cache.shared.fingerprint) == file_sha256(target)


@pytest.mark.parametrize("field", [field.name for field in dataclasses.fields(EngineSettings)])
def test_engine_setting_documented(field: str) -> None:
    limits = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "limits.md").read_text()
    assert f"| `{field}` |" in limits
