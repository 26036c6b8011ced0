"""The native invocation core (``glovebox_native``): chosen when built, the same answers as the Python path.

The hostile guests of ``test_sandbox.py`` and the capability tests run on both paths
(the ``sandbox_path`` fixture), and so do the JavaScript and Python hostile guests of
``tests/toolchains`` (``runtime_on``); these tests show which path a call took, that
``GLOVEBOX_NATIVE=0`` forces the Python one, that JavaScript and Python tools (which import
WASI 0.2) run natively and end every attack exactly as the Python path ends it, and that
what the native core leaves to the Python path (a ``files`` grant) still runs there.
A guest that sleeps (a WASI clock wait, which blocks in the host) ends at its deadline
natively, and on the Python path only when its sleep ends (the documented limit).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.engine._engine import get_engine
from glovebox.engine._settings import EngineSettings
from glovebox.sandbox._native import native_extension, native_fingerprint
from tests.conftest import call_on, runtime_on
from tests.guestcache import GUESTS

BuildGuest = Callable[[str], Path]
BuildTool = Callable[[Path], Path]
MIB = 1024 * 1024

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


def test_the_native_cache_key_changes_with_the_engine_configuration() -> None:
    codegen = dict(EngineSettings().codegen())
    key = native_fingerprint("48.0.10", "sync;wasi-p2=wasmtime-wasi-48.0.8;wasm-stack=3/2", codegen)
    assert key.startswith("native-")
    assert key != native_fingerprint("48.0.10", "async;wasi-p2=wasmtime-wasi-48.0.8;wasm-stack=3/2", codegen)
    assert key != native_fingerprint("48.0.10", "", codegen)  # a build without WASI
    assert key != native_fingerprint("48.0.11", "sync;wasi-p2=wasmtime-wasi-48.0.8;wasm-stack=3/2", codegen)
    assert key != native_fingerprint(
        "48.0.10", "sync;wasi-p2=wasmtime-wasi-48.0.8;wasm-stack=3/2", {**codegen, "max_wasm_stack_bytes": 1 << 20}
    )


@needs_native
def test_the_running_core_names_its_files_by_its_engine(runtime: glovebox.Runtime) -> None:
    extension = native_extension()
    core = runtime._wasm().sandbox.native_core
    assert extension is not None and core is not None
    assert "wasi-p2" in extension.engine_features()
    codegen = dict(runtime._wasm().shared.settings.codegen())
    assert core.fingerprint == native_fingerprint(extension.wasmtime_version(), extension.engine_features(), codegen)


@needs_native
def test_registration_compiles_for_the_native_core_so_the_first_call_does_not(
    _isolated_env: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        info = rt.register(build_guest("echo"), manifest={"name": "echo"})
    compiled = sorted(p.name for p in (_isolated_env / "cache" / "compiled").glob(f"{info.digest}-*.cwasm"))
    assert len(compiled) == 2 and "-native-" in compiled[1], compiled  # the Python path's, the native core's

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("the first call compiled: registration should have")

    monkeypatch.setattr("glovebox.registry._compiled.precompile", no_compile)
    get_engine().forget(info.digest)  # as a fresh process
    with glovebox.Runtime(home=_isolated_env) as rt:
        before = _calls(rt)
        assert rt.call("echo", 3).output == 3
        assert _calls(rt) == before + 1  # on the native core


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


#: Generous for the residue guest: its check reads 5 MiB byte by byte.
RESIDUE_LIMITS = {"memory_bytes": 16 * MIB, "fuel": 2_000_000_000, "timeout_ms": 20_000}


@pytest.mark.parametrize(
    ("flag", "kept"),
    [("1", 64 * 1024), ("1", None), ("1", 16 * MIB), ("0", None)],
    ids=["native-kept-64k", "native-kept-default", "native-kept-16m", "python-path"],
)
def test_a_reused_slot_holds_nothing_an_earlier_call_wrote(
    _isolated_env: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch, flag: str, kept: int | None
) -> None:
    """A call that writes hundreds of separate runs of pages, in the memory image and past it, leaves
    nothing for the next call in the same slot: whether the reset restores a page in place (the kernel's
    page scan, in batches, up to ``scan_resident_bytes``) or returns it to the kernel."""
    if flag == "1" and native_extension() is None:
        pytest.skip("glovebox_native is not built: `make native`")
    monkeypatch.setenv("GLOVEBOX_NATIVE", flag)
    engine = EngineSettings() if kept is None else EngineSettings(scan_resident_bytes=kept)
    with glovebox.Runtime(home=_isolated_env, engine=engine) as rt:
        rt.register(build_guest("residue"), manifest={"name": "residue", "limits": RESIDUE_LIMITS})
        before = _calls(rt)
        for _ in range(6):
            wrote = rt.call("residue", "dirty")
            assert wrote.ok and wrote.output == {"wrote": 640, "seen": 640}, wrote.to_dict()
            checked = rt.call("residue", "check")
            assert checked.ok and checked.output == {"residue": 0}, checked.to_dict()
        assert _calls(rt) == (before + 12 if flag == "1" else -1)


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


# -- WASI guests: JavaScript and Python tools -------------------------------------------------------

#: Every hostile case of the JavaScript and Python guests, with the limits that make its ending certain.
_JS_LIMITS = {"memory_bytes": 24 * MIB, "timeout_ms": 20_000, "fuel": 10_000_000_000}
_PY_LIMITS = {"memory_bytes": 48 * MIB, "timeout_ms": 500, "fuel": 10_000_000_000}
WASI_ATTACKS = [
    ("js", "loop", {**_JS_LIMITS, "timeout_ms": 300}, "timeout"),
    ("js", "loop", {**_JS_LIMITS, "fuel": 50_000_000}, "fuel_exhausted"),
    ("js", "bomb", _JS_LIMITS, "memory_limit"),
    ("js", "recursion", _JS_LIMITS, "guest_error"),
    ("js", "flood", _JS_LIMITS, None),
    ("js", "huge", _JS_LIMITS, "output_too_large"),
    ("js", "http_denied", _JS_LIMITS, "capability_denied"),
    ("py", "open", _PY_LIMITS, "guest_error"),
    ("py", "listdir", _PY_LIMITS, "guest_error"),
    ("py", "environ", _PY_LIMITS, None),
    ("py", "socket", _PY_LIMITS, "guest_error"),
    ("py", "connect", _PY_LIMITS, "guest_error"),
    ("py", "loop", _PY_LIMITS, "timeout"),
    ("py", "memory", _PY_LIMITS, "memory_limit"),
    ("py", "exit", _PY_LIMITS, "guest_trap"),
    ("py", "crash", _PY_LIMITS, "guest_error"),
    # 3,000 lines printed: on the Python path each is a host call, seconds on a loaded machine.
    ("py", "stdout", {**_PY_LIMITS, "timeout_ms": 10_000}, None),
    ("py", "stderr", _PY_LIMITS, None),
    ("py", "huge", _PY_LIMITS, "output_too_large"),
]


@pytest.fixture(scope="module")
def wasi_hostile(build_js: BuildTool, build_py: BuildTool, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Both hostile WASI guests registered in two Runtimes, one per path."""
    wasm = {"js": build_js(GUESTS / "js_hostile.js"), "py": build_py(GUESTS / "py_hostile.py")}
    runtimes = {path: runtime_on(path, tmp_path_factory.mktemp(f"wasi-{path}")) for path in ("native", "python")}
    names: dict[tuple[str, str, tuple[tuple[str, int], ...]], str] = {}

    def call(path: str, lang: str, what: str, limits: dict[str, int]) -> glovebox.CallResult:
        rt = runtimes[path]
        key = (path, lang, tuple(sorted(limits.items())))
        if key not in names:
            names[key] = f"{lang}-hostile-{len(names)}"
            rt.register(wasm[lang], manifest={"name": names[key], "limits": limits})
        return call_on(path, rt, names[key], {"what": what})

    yield call
    for rt in runtimes.values():
        rt.close()


@needs_native
@pytest.mark.parametrize(("lang", "what", "limits", "code"), WASI_ATTACKS)
def test_wasi_guests_end_every_attack_alike_on_both_paths(
    wasi_hostile: Any, lang: str, what: str, limits: dict[str, int], code: str | None
) -> None:
    ends = []
    for path in ("native", "python"):
        result = wasi_hostile(path, lang, what, limits)
        assert result.code == code, (path, result.to_dict())
        ends.append((result.code, result.meta["logs"], result.meta.get("logs_dropped")))
    assert ends[0] == ends[1]


@needs_native
def test_the_guest_sees_no_environment_no_file_and_no_socket_natively(wasi_hostile: Any) -> None:
    assert wasi_hostile("native", "py", "environ", _PY_LIMITS).output == {"environ": {}, "home": None, "cwd": "/"}
    opened = wasi_hostile("native", "py", "open", _PY_LIMITS)
    assert opened.error is not None
    assert opened.error.message == "FileNotFoundError: [Errno 44] No such file or directory: '/etc/passwd'"
    for what in ("socket", "connect"):
        refused = wasi_hostile("native", "py", what, _PY_LIMITS)
        assert refused.code == "guest_error" and refused.error is not None
        assert refused.error.message.startswith(("OSError", "PermissionError", "ImportError", "ModuleNotFoundError"))


@needs_native
def test_a_files_grant_keeps_the_python_path(tmp_path: Path, build_py: BuildTool) -> None:
    policy = glovebox.Policy.model_validate(
        {
            "version": 1,
            "defaults": {"action": "allow"},
            "grants": [{"tool": "py-files", "files": [{"directory": "work", "access": "read"}]}],
        }
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GLOVEBOX_NATIVE", "1")
        rt = glovebox.Runtime(home=tmp_path / "home", policy=policy)
        assert rt._wasm().sandbox.native_core is not None
    with rt:
        manifest = {"name": "py-files", "capabilities": {"files": {"access": "read"}}, "limits": _PY_LIMITS}
        rt.register(build_py(GUESTS / "py_hostile.py"), manifest=manifest)
        rt.register(build_py(GUESTS / "py_hostile.py"), manifest={"name": "py-plain", "limits": _PY_LIMITS})
        (tmp_path / "home" / "files" / "work").mkdir(parents=True, exist_ok=True)
        assert call_on("python", rt, "py-files", {"what": "environ"}).ok  # its directory: the Python path's
        assert call_on("native", rt, "py-plain", {"what": "environ"}).ok  # the same artifact without it


# -- a guest that sleeps: a WASI clock wait blocks in the host, where no epoch check runs ----------------

_SLEEP_LIMITS = {**_PY_LIMITS, "timeout_ms": 300}


@pytest.fixture(scope="module")
def sleeper(build_py: BuildTool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, glovebox.Runtime]]:
    """The hostile Python guest under a 300 ms timeout, in one Runtime per path."""
    wasm = build_py(GUESTS / "py_hostile.py")
    runtimes = {path: runtime_on(path, tmp_path_factory.mktemp(f"sleep-{path}")) for path in ("native", "python")}
    for path, rt in runtimes.items():
        rt.register(wasm, manifest={"name": "py-sleeper", "limits": _SLEEP_LIMITS})
        assert call_on(path, rt, "py-sleeper", {"what": "environ"}).ok  # compiled and loaded before any clock runs
    yield runtimes
    for rt in runtimes.values():
        rt.close()


def _sleep_in_a_thread(path: str, rt: glovebox.Runtime, seconds: float, bound_s: float) -> tuple[Any, float]:
    """Call the guest's ``sleep`` on a thread of its own; (its result, seconds taken), or a failure when the
    thread is still held after ``bound_s``."""
    got: list[glovebox.CallResult] = []
    value = {"what": "sleep", "seconds": seconds}
    started = time.monotonic()
    caller = threading.Thread(target=lambda: got.append(call_on(path, rt, "py-sleeper", value)), daemon=True)
    caller.start()
    caller.join(bound_s)
    assert not caller.is_alive(), f"a {seconds} s sleep under a 300 ms timeout held its thread past {bound_s} s"
    return got[0], time.monotonic() - started


@needs_native
@pytest.mark.parametrize("seconds", [30, 10**9])
def test_a_sleep_past_the_deadline_ends_timeout_at_the_deadline_natively(
    sleeper: dict[str, glovebox.Runtime], seconds: float
) -> None:
    rt = sleeper["native"]
    # A liveness bound, not a benchmark: the sleep is cut at the 300 ms deadline, far before its end.
    result, took = _sleep_in_a_thread("native", rt, seconds, bound_s=10.0)
    assert result.code == "timeout", result.to_dict()
    assert result.error is not None and result.error.details == {"timeout_ms": 300}
    assert took >= 0.3  # never before the deadline
    assert rt.live_instances == 0  # the instance is gone with the call
    assert call_on("native", rt, "py-sleeper", {"what": "environ"}).ok  # and the host goes on


@needs_native
@pytest.mark.parametrize("path", ["native", "python"])
def test_a_sleep_within_the_deadline_sleeps_its_whole_time(sleeper: dict[str, glovebox.Runtime], path: str) -> None:
    result, took = _sleep_in_a_thread(path, sleeper[path], 0.1, bound_s=10.0)
    assert result.ok, result.to_dict()
    assert result.output == "slept"
    assert took >= 0.1


@needs_native
def test_a_sleep_holds_its_call_to_its_end_on_the_python_path(sleeper: dict[str, glovebox.Runtime]) -> None:
    # The documented limit (docs/reference/limits.md): wasmtime-py's WASI waits in the host, where neither the
    # epoch nor glovebox can cut the wait; the call ends `timeout` only when the sleep is over.
    rt = sleeper["python"]
    result, took = _sleep_in_a_thread("python", rt, 1.5, bound_s=30.0)
    assert result.code == "timeout", result.to_dict()
    assert took >= 1.5
    assert rt.live_instances == 0
