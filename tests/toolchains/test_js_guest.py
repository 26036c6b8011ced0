"""JavaScript and TypeScript tools: build (esbuild, the engine, the snapshot), register, call, hostile guests.

Every guest here is real JavaScript, bundled by esbuild and run by QuickJS-NG
compiled from its C sources. The toolchain is compiled once per checkout into
pytest's cache directory (``GLOVEBOX_TOOLCHAINS``, see conftest.py); each
component is built once per session and compiled once into the engine cache.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import glovebox
from glovebox.toolchains import _jsbuild, _snapshot
from tests.conftest import call_on, runtime_on

ROOT = Path(__file__).resolve().parents[2]
GUESTS = ROOT / "tests" / "guests"
EXAMPLES = ROOT / "guest" / "examples"
MIB = 1024 * 1024

BuildJs = Callable[[Path], Path]  # the session fixture `build_js` (conftest.py)


@pytest.fixture(scope="module", params=["native", "python"])
def hostile(
    request: pytest.FixtureRequest, build_js: BuildJs, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., glovebox.CallResult]]:
    """Calls of the hostile guest: ``timed`` at the host's fuel maximum (the deadline stops a loop), ``fuel``
    with little fuel and ``roomy`` with both large (so that only memory stops a bomb, however slow the machine).
    On the native core and on the Python path, each call checked to take it."""
    wasm = build_js(GUESTS / "js_hostile.js")
    path = request.param
    with runtime_on(path, tmp_path_factory.mktemp("js-hostile-home")) as runtime:
        limits = {"memory_bytes": 24 * MIB, "timeout_ms": 500, "fuel": 10_000_000_000}
        runtime.register(wasm, manifest={"name": "timed", "limits": limits})
        runtime.register(wasm, manifest={"name": "fuel", "limits": {**limits, "fuel": 50_000_000, "timeout_ms": 5000}})
        runtime.register(wasm, manifest={"name": "roomy", "limits": {**limits, "timeout_ms": 20_000}})

        def _call(what: str, tool: str = "timed", **more: object) -> glovebox.CallResult:
            return call_on(path, runtime, tool, {"what": what, **more})

        yield _call


def error_of(result: glovebox.CallResult) -> tuple[str, str]:
    assert result.error is not None, result.to_dict()
    return result.error.code, result.error.message


# -- the sandbox: each hostile case answers its exact code ---------------------------


def test_an_infinite_loop_is_stopped_by_fuel(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("loop", tool="fuel")
    assert error_of(result)[0] == "fuel_exhausted"
    assert result.meta["fuel_used"] == 50_000_000


def test_an_infinite_loop_is_stopped_by_the_deadline(hostile: Callable[..., glovebox.CallResult]) -> None:
    assert error_of(hostile("loop"))[0] == "timeout"


@pytest.mark.parametrize("what", ["bomb", "object_bomb"])
def test_a_memory_bomb_is_memory_limit(hostile: Callable[..., glovebox.CallResult], what: str) -> None:
    result = hostile(what, tool="roomy")
    assert error_of(result) == ("memory_limit", f"the tool needed more than its {24 * MIB} bytes of memory")


def test_deep_recursion_is_the_tools_range_error(hostile: Callable[..., glovebox.CallResult]) -> None:
    assert error_of(hostile("recursion")) == ("guest_error", "RangeError: Maximum call stack size exceeded")


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("throw_string", "the disk is full"),
        ("throw_number", "42"),
        ("throw_object", '{"code":7,"why":"no"}'),
        ("throw_error", "TypeError: bad type"),
        ("tool_error", "city is empty"),
        ("reject", "RangeError: later"),
        (
            "never",
            "the tool's Promise never settled: it awaits something that never resolves "
            "(there are no timers or events in a sandbox)",
        ),
    ],
)
def test_what_the_tool_throws_is_a_guest_error_with_its_text(
    hostile: Callable[..., glovebox.CallResult], what: str, message: str
) -> None:
    assert error_of(hostile(what)) == ("guest_error", message)


@pytest.mark.parametrize(
    ("what", "excerpt"),
    [
        ("undefined", "undefined (the tool returned no JSON value)"),
        ("function", "undefined (the tool returned no JSON value)"),
        ("bigint", "not JSON: TypeError: BigInt are forbidden in JSON.stringify"),
        ("cycle", "not JSON: TypeError: circular reference"),
    ],
)
def test_output_that_is_not_json_is_invalid_output(
    hostile: Callable[..., glovebox.CallResult], what: str, excerpt: str
) -> None:
    result = hostile(what)
    assert error_of(result)[0] == "invalid_output"
    assert result.error is not None and result.error.details["excerpt"] == excerpt


@pytest.mark.parametrize("what", ["eval", "function_constructor"])
def test_strings_from_the_input_cannot_be_evaluated(hostile: Callable[..., glovebox.CallResult], what: str) -> None:
    assert error_of(hostile(what, code="globalThis.leak = 1")) == ("guest_error", "TypeError: eval is not supported")


def test_no_host_objects_are_reachable(hostile: Callable[..., glovebox.CallResult]) -> None:
    # No std/os (quickjs-libc is not linked), no require/process, no fetch but the helper's, and the
    # natives the helper is built on are gone from the global object once the build has run it.
    result = hostile("globals")
    assert result.ok, result.to_dict()
    assert result.output == []


def test_http_without_a_grant_is_capability_denied(hostile: Callable[..., glovebox.CallResult]) -> None:
    code, message = error_of(hostile("http_denied"))
    assert code == "capability_denied"
    assert "GET https://example.com/" in message


def test_the_clock_and_randomness_come_from_the_host(hostile: Callable[..., glovebox.CallResult]) -> None:
    first, second = hostile("clock"), hostile("clock")
    assert first.ok and second.ok, (first.to_dict(), second.to_dict())
    assert abs(first.output["now"] - time.time() * 1000) < 60_000  # the host's wall clock, not the build's
    assert first.output["random"] != second.output["random"]  # not a seed frozen into the snapshot
    assert 0 <= first.output["random"] < 1


def test_log_and_console_reach_meta_logs(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("log")
    assert result.output == "logged"
    assert result.meta["logs"] == [
        {"level": "warn", "message": 'careful {"n":1}'},
        {"level": "info", "message": "from console"},
    ]


def test_a_console_flood_is_kept_within_the_log_budget(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("flood", tool="roomy")
    assert result.output == "flooded"
    logs = result.meta["logs"]
    assert logs[:2] == [{"level": "info", "message": "line 0"}, {"level": "info", "message": "line 1"}]
    assert sum(len(entry["message"].encode()) for entry in logs) <= 16 * 1024  # the default log_bytes
    assert len(logs) + result.meta["logs_dropped"] == 20_000


def test_a_huge_output_is_output_too_large(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("huge", tool="roomy")
    assert error_of(result)[0] == "output_too_large"


def test_each_call_starts_from_the_snapshot(tmp_path: Path, build_js: BuildJs) -> None:
    src = tmp_path / "counter.js"
    src.write_text("let calls = 0;\nexport default () => ({ calls: ++calls });\n")
    with glovebox.Runtime(home=tmp_path / "home") as runtime:
        runtime.register(build_js(src))
        assert [runtime.call("counter", {}).output for _ in range(3)] == [{"calls": 1}] * 3


# -- build -------------------------------------------------------------------------


def test_build_writes_a_component_and_its_manifest(build_js: BuildJs) -> None:
    wasm = build_js(GUESTS / "js_hostile.js")
    assert wasm.read_bytes()[:8] == b"\0asm\x0d\x00\x01\x00"
    manifest = tomllib.loads(wasm.with_name("js_hostile.glovebox.toml").read_text())
    assert manifest == {"name": "js-hostile", "limits": _jsbuild.JS_LIMITS}


def test_a_second_build_reuses_the_toolchain_and_the_cache(tmp_path: Path, build_js: BuildJs) -> None:
    build_js(GUESTS / "js_hostile.js")  # the toolchain exists
    src = tmp_path / "small.ts"
    src.write_text("export default (input: { n: number }): number => input.n * 2;\n")
    first = glovebox.build(src, tmp_path / "a.wasm", home=tmp_path / "home")
    again = glovebox.build(src, tmp_path / "b.wasm", home=tmp_path / "home")
    assert first.read_bytes() == again.read_bytes()
    cached = list((tmp_path / "home" / "cache" / "build").glob("js-*.wasm"))
    assert len(cached) == 1


def test_the_same_source_builds_the_same_bytes(tmp_path: Path, build_js: BuildJs) -> None:
    # The build-time run sees a clock at 0 and random numbers of 0: a build is reproducible.
    build_js(GUESTS / "js_hostile.js")
    src = tmp_path / "stamp.js"
    src.write_text("const built = [Date.now(), Math.random()];\nexport default () => built;\n")
    one = glovebox.build(src, tmp_path / "one.wasm", home=tmp_path / "h1")
    two = glovebox.build(src, tmp_path / "two.wasm", home=tmp_path / "h2")
    assert one.read_bytes() == two.read_bytes()
    with glovebox.Runtime(home=tmp_path / "home") as runtime:
        runtime.register(one)
        assert runtime.call("stamp", {}).output == [0, 0]


@pytest.mark.system  # a real JavaScript build
@pytest.mark.parametrize(
    ("name", "source", "message"),
    [
        (
            "tool.js",
            "export default function (input) {\n  return input +;\n}\n",
            r"(?s)\[ERROR\] Unexpected.*tool\.js:2:16:",
        ),
        (
            "tool.ts",
            "export default function (input: {a: number}) {\n  const x: number = ;\n}\n",
            r"(?s)\[ERROR\] Unexpected.*tool\.ts:2:20:",
        ),
        (
            "tool.js",
            'import fs from "fs";\nexport default () => fs;\n',
            r'(?s)\[ERROR\] Could not resolve "fs".*tool\.js:1:15:.*a sandbox without Node\.js built-ins',
        ),
    ],
)
def test_compile_errors_are_shown_with_file_and_line(tmp_path: Path, name: str, source: str, message: str) -> None:
    src = tmp_path / name
    src.write_text(source)
    with pytest.raises(glovebox.BuildError, match=message) as info:
        glovebox.build(src, tmp_path / "tool.wasm")
    assert str(src) in str(info.value)
    assert not (tmp_path / "tool.wasm").exists()


@pytest.mark.system  # a real JavaScript build
@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("export const f = () => 1;\n", "the module has no default export that is a function"),
        ('throw new Error("configured wrong");\nexport default () => 1;\n', "Error: configured wrong"),
        ("for (;;) {}\nexport default () => 1;\n", "the tool's top-level code did not finish at build time"),
        (
            "await new Promise(() => {});\nexport default () => 1;\n",
            "the tool's top level awaits something that never settles at build time",
        ),
        ('await Promise.reject(new Error("no table"));\nexport default () => 1;\n', "Error: no table"),
    ],
)
def test_a_top_level_that_fails_at_build_time_is_a_build_error(tmp_path: Path, source: str, message: str) -> None:
    src = tmp_path / "tool.js"
    src.write_text(source)
    with pytest.raises(glovebox.BuildError, match=message):
        glovebox.build(src, tmp_path / "tool.wasm")


@pytest.mark.system  # a real JavaScript build
def test_top_level_http_fails_the_build(tmp_path: Path) -> None:
    src = tmp_path / "tool.js"
    src.write_text('import { http } from "glovebox";\nhttp.get("https://example.com/");\nexport default () => 1;\n')
    with pytest.raises(glovebox.BuildError, match="glovebox:tool/host@0.1.0#http-fetch is not available at build time"):
        glovebox.build(src, tmp_path / "tool.wasm")


# -- the snapshot writer -------------------------------------------------------------


def test_the_snapshot_keeps_only_pages_that_hold_data() -> None:
    memory = bytearray(2 * _snapshot.PAGE)
    memory[10] = 1
    memory[3 * 4096 + 5] = 2
    memory[4 * 4096] = 3
    segments = list(_snapshot._segments(bytes(memory)))
    assert [(offset, len(data)) for offset, data in segments] == [(0, 4096), (3 * 4096, 2 * 4096)]


def test_the_rewritten_module_starts_from_the_snapshot() -> None:
    import wasmtime

    wat = """(module (memory (export "memory") 1) (data (i32.const 0) "ab")
      (func (export "_initialize")) (func (export "peek") (param i32) (result i32) local.get 0 i32.load8_u))"""
    module = wasmtime.wat2wasm(wat)
    memory = bytearray(2 * _snapshot.PAGE)
    memory[70_000] = 42
    rewritten = _snapshot.rewrite(bytes(module), bytes(memory), frozenset({"_initialize"}))
    store = wasmtime.Store()
    instance = wasmtime.Instance(store, wasmtime.Module(store.engine, rewritten), [])
    exports = instance.exports(store)
    assert "_initialize" not in {export.name for export in wasmtime.Module(store.engine, rewritten).exports}
    assert exports["peek"](store, 70_000) == 42  # type: ignore[operator]
    assert exports["peek"](store, 0) == 0  # type: ignore[operator]  # the old data is gone
    memory_export = exports["memory"]
    assert isinstance(memory_export, wasmtime.Memory) and memory_export.size(store) == 2


def test_error_envelopes_reveal_no_host_path(hostile: Callable[..., glovebox.CallResult]) -> None:
    for what in ("throw_error", "recursion", "bomb", "eval"):
        text = json.dumps(hostile(what, tool="roomy").to_dict())
        assert str(ROOT) not in text and "glovebox-jsbuild" not in text


@pytest.mark.system  # a real JavaScript build
def test_a_top_level_await_runs_at_build_time_and_calls_start_from_its_result(
    _isolated_env: Path, tmp_path: Path
) -> None:
    src = tmp_path / "lookup.ts"
    src.write_text(
        "const table: Record<string, number> = await Promise.resolve({ a: 1, b: 2 });\n"
        "export default async (input: { key: string }) => table[input.key] ?? null;\n"
    )
    out = glovebox.build(src, tmp_path / "lookup.wasm")
    with glovebox.Runtime() as rt:
        rt.register(out)
        answers = [rt.call("lookup", {"key": key}).output for key in ("b", "a", "z")]
    assert answers == [2, 1, None]
