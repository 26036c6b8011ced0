"""The native invocation core (``glovebox_native``): chosen when built, the same answers as the Python path.

The hostile guests of ``test_sandbox.py`` and the capability tests run on both paths
(the ``sandbox_path`` fixture); these tests show which path a call took, that
``GLOVEBOX_NATIVE=0`` forces the Python one, and that what the native core cannot run
(a component importing WASI) still runs, on the Python path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.sandbox._native import native_extension

BuildGuest = Callable[[str], Path]

needs_native = pytest.mark.skipif(native_extension() is None, reason="glovebox_native is not built: `make native`")


def _calls(runtime: glovebox.Runtime) -> int:
    core = runtime._wasm().sandbox.native_core
    return -1 if core is None else int(core.calls)


@needs_native
def test_a_c_tool_runs_on_the_native_core(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    runtime.register(build_guest("echo"), manifest={"name": "echo"})
    before = _calls(runtime)
    result = runtime.call("echo", {"a": [1, "b"]})
    assert result.ok, result.to_dict()
    assert result.output == {"a": [1, "b"]}
    assert _calls(runtime) == before + 1


def test_glovebox_native_0_forces_the_python_path(
    runtime: glovebox.Runtime, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch, _isolated_env: Path
) -> None:
    monkeypatch.setenv("GLOVEBOX_NATIVE", "0")
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
        assert rt.call("echo", [1]).output == [1]
        assert rt._wasm().sandbox.native_core is None


@needs_native
def test_the_native_artifact_is_checked_before_it_is_loaded(
    _isolated_env: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
        assert rt.call("echo", 1).output == 1
    [native] = (_isolated_env / "cache" / "compiled").glob("*-native-*.cwasm")
    native.write_bytes(native.read_bytes()[:-16] + b"\0" * 16)  # changed on disk: never mapped
    with glovebox.Runtime(home=_isolated_env) as rt:
        before = _calls(rt)
        assert rt.call("echo", 2).output == 2
        assert _calls(rt) == before + 1
    assert native.read_bytes()[-16:] != b"\0" * 16  # rebuilt from the artifact


@needs_native
@pytest.mark.parametrize(
    ("guest", "value", "limits"),
    [
        ("loop_forever", None, {"timeout_ms": 200, "fuel": 10_000_000_000}),
        ("fuel_burner", None, {"fuel": 1_000_000}),
        ("grow_bomb", "sdk", {"memory_bytes": 4 * 1024 * 1024}),
        ("recursion", None, {}),
        ("output_flood", None, {}),
        ("trap_unreachable", None, {}),
        ("bad_utf8", None, {}),
        ("logger", None, {"fuel": 1_000_000_000, "timeout_ms": 60_000}),
    ],
)
def test_both_paths_end_a_hostile_guest_alike(
    _isolated_env: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch, guest: str, value: Any, limits: Any
) -> None:
    ends = []
    for flag in ("1", "0"):
        monkeypatch.setenv("GLOVEBOX_NATIVE", flag)
        with glovebox.Runtime(home=_isolated_env / flag) as rt:
            rt.register(build_guest(guest), manifest={"name": guest.replace("_", "-"), "limits": limits})
            before = _calls(rt)
            result = rt.call(guest.replace("_", "-"), value)
            ends.append((result.code, len(result.meta["logs"]), result.meta.get("logs_dropped")))
            assert _calls(rt) == (before + 1 if flag == "1" else -1)
    assert ends[0] == ends[1]


@pytest.mark.parametrize("pooling", [False, True], ids=["on-demand", "pool"])
def test_a_table_bomb_is_refused_on_both_paths_and_allocations(
    _isolated_env: Path, tmp_path: Path, sandbox_path: str, pooling: bool
) -> None:
    """``table.grow`` by 50 million elements (400 MB of host memory for a few units of fuel) is refused.

    A pool bounds a table by its slot; allocating on demand, only the store's caps do.
    """
    from glovebox.engine._settings import EngineSettings
    from tests.typedguests import wat_component

    guests = Path(__file__).resolve().parents[1] / "guests"
    wit = Path(__file__).resolve().parents[2] / "guest" / "wit" / "world.wit"
    wasm = wat_component(wit, "tool", guests / "wat" / "table_bomb.wat", tmp_path / "table_bomb.wasm")
    engine = EngineSettings(pooling=pooling, total_memories=20, total_component_instances=20)
    with glovebox.Runtime(home=_isolated_env, engine=engine) as rt:
        rt.register(wasm, manifest={"name": "table-bomb"})
        before = _calls(rt)
        result = rt.call("table-bomb", {})
        took_native = _calls(rt) == before + 1
    assert result.code == "guest_error" and result.error is not None, result.to_dict()
    assert "table.grow refused" in result.error.message
    assert took_native == (sandbox_path == "native")


def test_an_extension_built_for_another_interface_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys
    import types

    from glovebox.sandbox import _native

    stale = types.ModuleType("glovebox_native")
    stale.ABI = _native.NATIVE_ABI - 1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "glovebox_native", stale)
    monkeypatch.setenv("GLOVEBOX_NATIVE", "1")
    _native._warn_stale.cache_clear()
    with caplog.at_level("WARNING", logger=_native.logger.name):
        assert _native.native_extension() is None
    assert "rebuilt (make native)" in caplog.text
