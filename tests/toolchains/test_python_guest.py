"""Python tools: build (analysis, schema, manifest, cache), register, call, and hostile guests.

componentize-py builds take seconds and compiling an 18 MB component takes
more, so each Python component is built once per session into pytest's cache
directory (the build cache is keyed by source, helper, WIT and componentize-py
version) and compiled once into the process's engine cache.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import glovebox
from glovebox.model._manifest import parse_manifest
from glovebox.toolchains import _pybuild
from glovebox.toolchains._pyanalyze import analyse
from tests.conftest import call_on, runtime_on

ROOT = Path(__file__).resolve().parents[2]
GUESTS = ROOT / "tests" / "guests"
EXAMPLES = ROOT / "guest" / "examples"
MIB = 1024 * 1024

BuildPy = Callable[[Path], Path]  # the session fixture `build_py` (conftest.py)


@pytest.fixture
def slugify(runtime: glovebox.Runtime, build_py: BuildPy) -> str:
    runtime.register(build_py(EXAMPLES / "py-slugify" / "tool.py"))
    return "py-slugify"


@pytest.fixture(scope="module", params=["native", "python"])
def hostile(
    request: pytest.FixtureRequest, build_py: BuildPy, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., glovebox.CallResult]]:
    """Calls of the hostile guest, on the native core and on the Python path (each call checked to take it);
    one runtime per path for the module (every call is a fresh sandbox anyway)."""
    wasm = build_py(GUESTS / "py_hostile.py")
    # Fuel at the host maximum, so that the wall-clock deadline is what stops a loop.
    limits = {"memory_bytes": 48 * MIB, "timeout_ms": 500, "fuel": 10_000_000_000}
    path = request.param
    with runtime_on(path, tmp_path_factory.mktemp("hostile-home")) as runtime:
        runtime.register(wasm, manifest={"name": "py-hostile", "limits": limits})

        def _call(what: str) -> glovebox.CallResult:
            return call_on(path, runtime, "py-hostile", {"what": what})

        yield _call


def assert_reveals_nothing(result: glovebox.CallResult) -> None:
    """No host path, environment value or file content in the envelope."""
    text = json.dumps(result.to_dict())
    secrets = [str(ROOT), "root:x:0:0", "glovebox-pybuild", "/usr/lib/python", os.environ.get("PATH", "/usr/bin")]
    secrets += [value for key, value in os.environ.items() if len(value) >= 6 and key in ("HOME", "USER", "PWD")]
    for secret in secrets:
        assert secret not in text, f"{secret!r} leaked into {text}"


# -- build ----------------------------------------------------------------------


def test_build_writes_component_and_generated_manifest(build_py: BuildPy) -> None:
    wasm = build_py(EXAMPLES / "py-slugify" / "tool.py")
    assert wasm.read_bytes()[:8] == b"\0asm\x0d\x00\x01\x00"
    manifest = tomllib.loads(wasm.with_name("py-slugify.glovebox.toml").read_text())
    assert manifest["name"] == "py-slugify"  # explicit (glovebox.toml beside the source)
    assert manifest["version"] == "1.0.0"
    assert manifest["description"] == "Turn a text into a lowercase ASCII URL slug."  # docstring
    assert manifest["input_schema"] == {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The text to slugify."},
            "separator": {"type": "string", "description": "What joins the words.", "default": "-"},
            "max_length": {"type": "integer", "description": "The longest slug to return.", "default": 80},
        },
        "required": ["text"],
        "additionalProperties": False,
    }
    # Explicit limits win key by key; the rest are the Python defaults.
    assert manifest["limits"] == {**_pybuild.PYTHON_LIMITS, "memory_bytes": 32 * MIB}


def test_unchanged_source_is_not_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build_py: BuildPy, cache_root: Path
) -> None:
    src = EXAMPLES / "py-slugify" / "tool.py"
    build_py(src)
    monkeypatch.delenv("GLOVEBOX_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_root))
    calls: list[Path] = []
    monkeypatch.setattr(_pybuild, "_componentize", lambda src, *args: calls.append(src))
    out = glovebox.build(src, tmp_path / "again.wasm")
    assert calls == []
    assert out.read_bytes() == build_py(src).read_bytes()
    changed = tmp_path / "tool.py"
    changed.write_text(src.read_text() + "\n# changed\n")
    with pytest.raises(FileNotFoundError):  # the stub built nothing, so there is nothing to copy
        glovebox.build(changed, tmp_path / "changed.wasm")
    assert calls == [changed]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "from glovebox_guest import tool\n\n@tool\ndef f(x: str) -> str\n    return x\n",
            r"tool\.py:4:\d+: syntax error",
        ),
        ("import json\nimport socket\n", r"tool\.py:2: import of socket: the network is not available"),
        ("from threading import Thread\n", r"tool\.py:1: import of threading: threads and processes"),
        ("import subprocess as sp\n", r"tool\.py:1: import of subprocess: processes are not available"),
        ("import urllib.request\n", r"tool\.py:1: import of urllib\.request: the network"),
        ("import ctypes\n", r"tool\.py:1: import of ctypes: native code"),
        ("import os\n\n\ndef f():\n    os.system('id')\n", r"tool\.py:5: os\.system is not available"),
        ("def f(x: str) -> str:\n    return x\n", r"tool\.py:1: no tool function"),
        ("@tool\ndef f(x: str): ...\n@tool\ndef g(x: str): ...\n", r"tool\.py:4: a second @tool function \(g\)"),
        ("@tool\ndef f(x: set[int, str]): ...\n", r"tool\.py:2: cannot turn the annotation `set\[int, str\]`"),
        ("@tool\ndef f(x: bytes): ...\n", r"tool\.py:2: cannot turn the annotation `bytes` into a JSON Schema"),
        ("@tool\ndef f(*args: str): ...\n", r"tool\.py:2: the tool's arguments come by name"),
    ],
)
def test_build_refuses_with_file_and_line(tmp_path: Path, source: str, message: str) -> None:
    src = tmp_path / "tool.py"
    src.write_text(source)
    with pytest.raises(glovebox.BuildError, match=message) as info:
        glovebox.build(src, tmp_path / "tool.wasm")
    assert str(src) in str(info.value)
    assert not (tmp_path / "tool.wasm").exists()


@pytest.mark.slow  # componentize-py runs every time: a failed build is not cached
def test_errors_while_importing_the_tool_name_the_file_and_line(tmp_path: Path) -> None:
    # componentize-py imports the module at build time (its state is snapshotted into the component).
    src = tmp_path / "failing.py"
    src.write_text(
        "from glovebox_guest import tool\n\n\n@tool\ndef f(x: str) -> str:\n    return x\n\n\nundefined_name\n"
    )
    with pytest.raises(glovebox.BuildError) as info:
        glovebox.build(src, tmp_path / "failing.wasm")
    message = str(info.value)
    assert f'File "{src}", line 9' in message
    assert "NameError: name 'undefined_name' is not defined" in message
    assert "Stack backtrace" not in message


def test_schema_from_signature() -> None:
    source = '''
from typing import Any, Literal, Optional
import glovebox_guest

@glovebox_guest.tool
def search(
    query: str,
    tags: list[str],
    weights: dict[str, float],
    mode: Literal["fast", "exact"] = "fast",
    limit: Optional[int] = None,
    near: "int | str | None" = None,
    *,
    strict: bool = False,
    extra: Any = None,
) -> list[dict[str, Any]]:
    """Search the things.

    More words that are not the description.

    Args:
        query: What to look for.
        tags (list): Tags to filter on.
    """
'''
    spec = analyse(Path("search.py"), source)
    assert spec.function == "search"
    assert spec.description == "Search the things."
    assert spec.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags to filter on."},
            "weights": {"type": "object", "additionalProperties": {"type": "number"}},
            "mode": {"enum": ["fast", "exact"], "default": "fast"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "near": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
            "strict": {"type": "boolean", "default": False},
            "extra": {},
        },
        "required": ["query", "tags", "weights"],
        "additionalProperties": False,
    }
    assert spec.output_schema == {"type": "array", "items": {"type": "object", "additionalProperties": {}}}


def test_kwargs_allow_extra_fields_and_no_return_annotation_accepts_anything() -> None:
    spec = analyse(Path("t.py"), "from glovebox_guest import tool\n@tool\ndef f(**options: Any):\n    pass\n")
    assert spec.input_schema == {"type": "object", "properties": {}, "additionalProperties": True}
    assert spec.output_schema is True
    assert spec.description == ""


_TOML_SCALARS = (
    st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.floats(allow_nan=False) | st.text()
)
# What a manifest holds: scalars, arrays and tables of them at any depth (no null in TOML).
_TOML_VALUES = st.recursive(
    _TOML_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4)
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(), _TOML_VALUES, max_size=6))
@example({"0\n": {}, "a\n": [], "\U0001f600": {"\x7f": "\U0001f389\u2028"}})  # a key ending in a newline is not bare
def test_generated_toml_round_trips(document: dict[str, Any]) -> None:
    assert tomllib.loads(_pybuild.dump_toml(document)) == document


def test_generated_toml_keeps_characters_outside_the_basic_plane() -> None:
    document = {"description": 'rocket \U0001f680, quote " and tab \t', "input_schema": {"\U0001f600": [1.5]}}
    text = _pybuild.dump_toml(document)
    assert "\U0001f680" in text and tomllib.loads(text) == document


def test_a_value_toml_cannot_spell_is_a_build_error() -> None:
    with pytest.raises(glovebox.BuildError, match="TOML"):
        _pybuild.dump_toml({"name": "x", "limits": {"fuel": None}})


def test_a_docstring_with_an_emoji_gives_a_manifest_that_registers(tmp_path: Path) -> None:
    src = tmp_path / "tool.py"
    src.write_text(
        'from glovebox_guest import tool\n@tool\ndef party(n: int) -> int:\n    """Celebrate \U0001f389 n times."""\n'
        "    return n\n",
        encoding="utf-8",
    )
    manifest = _pybuild._manifest(src, analyse(src, src.read_text(encoding="utf-8")))
    parsed = parse_manifest(tomllib.loads(_pybuild.dump_toml(manifest)))
    assert parsed.description == "Celebrate \U0001f389 n times."


# -- register and call ----------------------------------------------------------------


def test_slugify_call(runtime: glovebox.Runtime, slugify: str) -> None:
    result = runtime.call(slugify, {"text": "Héllo, Wörld! Ça va?", "separator": "_"})
    assert result.ok, result.to_dict()
    assert result.output == {"slug": "hello_world_ca_va", "words": 4}
    assert result.meta["logs"] == [{"level": "debug", "message": "4 words, slug of 17 characters"}]
    assert result.meta["fuel_used"] > 0
    info = runtime.tools()[0]
    assert info.manifest.description == "Turn a text into a lowercase ASCII URL slug."


def test_slugify_tool_error(runtime: glovebox.Runtime, slugify: str) -> None:
    result = runtime.call(slugify, {"text": "!!!"})
    assert result.code == "guest_error"
    assert result.error is not None
    assert result.error.message == "the text has no letters or digits to make a slug from"


def test_slugify_input_checked_against_the_generated_schema(runtime: glovebox.Runtime, slugify: str) -> None:
    result = runtime.call(slugify, {"text": "a", "colour": "red"})
    assert result.code == "invalid_input"
    result = runtime.call(slugify, {"max_length": 3})
    assert result.code == "invalid_input"
    assert '"text" is a required property' in result.error.message  # type: ignore[union-attr]


def test_python_tools_use_the_wasi_linker_and_c_tools_the_lean_one(
    runtime: glovebox.Runtime, slugify: str, build_guest: Callable[[str], Path]
) -> None:
    runtime.register(build_guest("echo"), manifest={"name": "echo"})
    sandbox = runtime._sandbox
    python = runtime._component(runtime._registry.resolve(slugify))
    native = runtime._component(runtime._registry.resolve("echo"))
    assert sandbox._linker_for(native) is sandbox._linker
    assert sandbox._linker_for(python) is not sandbox._linker
    assert runtime.call("echo", {"a": 1}).output == {"a": 1}


def _private_dirty_bytes() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Private_Dirty:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("/proc/self/smaps_rollup has no Private_Dirty line")


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="reads /proc/self/smaps_rollup")
def test_live_python_instances_share_the_cpython_heap_image(runtime: glovebox.Runtime, slugify: str) -> None:
    """CPython's 12 MiB initial heap is mapped copy-on-write from the compiled file, not copied per instance."""
    info = runtime._registry.resolve(slugify)
    component = runtime._component(info)
    sandbox = runtime._sandbox

    def live() -> tuple[Any, Any]:
        store = sandbox._store(component, info.manifest.limits)
        instance = sandbox._linker_for(component).instantiate(store, component)
        func = instance.get_func(store, "call")
        assert func is not None
        func(store, json.dumps({"text": "Héllo, Wörld"}))
        func.post_return(store)
        return store, instance

    live()
    before = _private_dirty_bytes()
    held = [live() for _ in range(4)]
    grown = _private_dirty_bytes() - before
    # A copied image alone would be 12 MiB each; a shared one leaves the pages the call wrote (< 1 MiB).
    assert grown / len(held) < 3 * MIB


def test_fetch_json_reports_the_denial(runtime: glovebox.Runtime, build_py: BuildPy) -> None:
    runtime.register(build_py(EXAMPLES / "py-fetch-json" / "tool.py"))
    url = "https://api.example.com/items.json"
    result = runtime.call("py-fetch-json", {"url": url, "pointer": "/items/0"})
    assert result.code == "capability_denied"
    assert result.error is not None
    assert result.error.message == (
        f"the tool failed after the host refused http access (GET {url}): "
        "the http capability is not granted to this call"
    )
    assert result.error.details["guest_code"] == "guest_error"
    assert result.error.details["guest_message"] == (
        f"cannot fetch {url}: denied: the http capability is not granted to this call"
    )
    assert result.meta["denials"] == [
        {"capability": "http", "method": "GET", "url": url, "reason": "the http capability is not granted to this call"}
    ]
    assert result.meta["logs"] == [{"level": "warn", "message": "fetch refused: denied"}]


# -- hostile guests -----------------------------------------------------------------------


def test_reading_a_host_file_fails_inside_the_guest(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("open")
    assert result.code == "guest_error"
    assert result.error is not None
    assert result.error.message == "FileNotFoundError: [Errno 44] No such file or directory: '/etc/passwd'"
    assert_reveals_nothing(result)


def test_the_filesystem_root_is_empty(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("listdir")
    assert result.code == "guest_error"
    assert result.error is not None
    assert result.error.message.startswith("FileNotFoundError")
    assert_reveals_nothing(result)


def test_the_environment_is_empty(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("environ")
    assert result.ok, result.to_dict()
    assert result.output == {"environ": {}, "home": None, "cwd": "/"}
    assert_reveals_nothing(result)


@pytest.mark.parametrize("what", ["socket", "connect"])
def test_sockets_fail(hostile: Callable[..., glovebox.CallResult], what: str) -> None:
    result = hostile(what)
    assert result.code == "guest_error"
    assert result.error is not None
    assert result.error.message.startswith(("OSError", "PermissionError", "ImportError", "ModuleNotFoundError"))
    assert_reveals_nothing(result)


def test_infinite_loop_times_out(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("loop")
    assert result.code == "timeout"
    assert result.error is not None
    assert result.error.details == {"timeout_ms": 500}
    assert_reveals_nothing(result)


def test_memory_bomb_hits_the_memory_limit(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("memory")
    assert result.code == "memory_limit"
    assert result.error is not None
    assert result.error.details == {"memory_bytes": 48 * MIB}
    logs = result.meta["logs"]
    assert logs[0] == {"level": "error", "message": "glovebox: out of memory"}
    # Then what CPython wrote to stderr (its traceback): WASI stderr goes to the logs at level warn.
    assert {entry["level"] for entry in logs[1:]} <= {"warn"}
    assert_reveals_nothing(result)


def test_exit_is_a_trap(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("exit")
    assert result.code == "guest_trap"
    assert_reveals_nothing(result)


def test_a_stdout_flood_is_kept_within_the_log_budget(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("stdout")
    assert result.output == "flooded"
    logs = result.meta["logs"]
    assert logs[:2] == [{"level": "info", "message": "line 0"}, {"level": "info", "message": "line 1"}]
    assert sum(len(entry["message"].encode()) for entry in logs) <= 16 * 1024  # the default log_bytes
    assert len(logs) + result.meta["logs_dropped"] == 3_000  # one entry per line written


def test_a_long_stderr_write_gives_one_entry_of_one_stdio_write(hostile: Callable[..., glovebox.CallResult]) -> None:
    # One WASI stdio write takes 8 KiB at most (wasmtime-wasi's stdio, and the native core's streams alike);
    # CPython's stderr does not write the rest of its 12,001 bytes. The entry keeps whole characters.
    result = hostile("stderr")
    assert result.output == "written"
    assert result.meta["logs"] == [{"level": "warn", "message": "é" * 4096}]


def test_a_huge_output_is_output_too_large(hostile: Callable[..., glovebox.CallResult]) -> None:
    result = hostile("huge")
    assert result.code == "output_too_large"
    assert result.error is not None and result.error.details["limit"] == 1024 * 1024


def test_uncaught_exception_is_a_guest_error(
    runtime: glovebox.Runtime, hostile: Callable[..., glovebox.CallResult]
) -> None:
    result = hostile("crash")
    assert result.code == "guest_error"
    assert result.error is not None
    assert result.error.message == "ZeroDivisionError: division by zero"
    # The host lives on, and the next call is a fresh instance.
    assert hostile("environ").ok
