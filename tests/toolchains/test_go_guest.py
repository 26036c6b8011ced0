"""Go tools: ``glovebox build`` on a Go module (GOOS=wasip1, the WASI preview-1 adapter), built and called for real."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from wasmtime.component import Component

import glovebox
from glovebox.cli._main import cli
from glovebox.core._world import is_wasi_import
from glovebox.engine._engine import get_engine

from ..conftest import require_toolchain
from ..guestcache import EXAMPLES
from .projects import granted_runtime, json_server, shared_caches

__all__ = ["shared_caches"]  # the fixture, used by name

BuildProject = Callable[[Path], Path]
FETCH = EXAMPLES / "go-fetch-json"


@pytest.mark.usefixtures("sandbox_path")  # the native core (WASI linked there) and the Python path
def test_the_tool_fetches_from_a_granted_local_server(tmp_path: Path, build_project: BuildProject) -> None:
    wasm = build_project(FETCH)
    with json_server() as server, granted_runtime(tmp_path / "home", server, wasm) as rt:
        first = rt.call("go-fetch-json", {"url": server.url("/a")})
        second = rt.call("go-fetch-json", {"url": server.url("/b")})  # a fresh instance: the runtime starts again
    assert first.ok, first.to_dict()
    assert first.output == {"status": 200, "json": {"items": [1, 2, 3], "path": "/a"}}
    assert first.meta["logs"] == [{"level": "info", "message": f"{server.url('/a')} answered 200"}]
    assert second.ok and second.output["json"]["path"] == "/b"


@pytest.mark.usefixtures("sandbox_path")  # the native core (WASI linked there) and the Python path
def test_without_the_grant_the_fetch_is_denied(runtime: glovebox.Runtime, build_project: BuildProject) -> None:
    runtime.register(build_project(FETCH))
    result = runtime.call("go-fetch-json", {"url": "http://127.0.0.1:9/x"})
    assert result.error is not None and result.error.code == "capability_denied"
    assert result.error.details["guest_message"] == "http denied: the http capability is not granted to this call"


def test_the_component_imports_the_host_and_wasi_only(build_project: BuildProject) -> None:
    engine = get_engine().engine
    imports = set(Component.from_file(engine, str(build_project(FETCH))).type.imports(engine))
    assert "glovebox:tool/host@0.1.0" in imports
    assert all(is_wasi_import(name) for name in imports - {"glovebox:tool/host@0.1.0"}), imports
    assert not any(name.startswith(("wasi:sockets", "wasi:http")) for name in imports)


@pytest.mark.slow
@pytest.mark.usefixtures("shared_caches")
def test_a_main_package_without_the_guest_package_is_refused(tmp_path: Path) -> None:
    require_toolchain("go")
    project = tmp_path / "plain"
    project.mkdir()
    (project / "go.mod").write_text("module plain\n\ngo 1.24\n")
    (project / "main.go").write_text("package main\n\nfunc main() {}\n")
    with pytest.raises(glovebox.BuildError) as raised:
        glovebox.build(project / "main.go", tmp_path / "plain.wasm")
    assert raised.value.message == (
        f'{project.resolve()}: the main package does not use the guest package: import "glovebox/guest/glovebox" '
        "and call glovebox.Tool(fn) from init"
    )


@pytest.mark.slow
@pytest.mark.usefixtures("shared_caches")
def test_a_compile_error_names_the_file_and_line(tmp_path: Path) -> None:
    require_toolchain("go")
    project = tmp_path / "broken"
    shutil.copytree(FETCH, project, ignore=shutil.ignore_patterns("*.wasm", "*.glovebox.toml"))
    source = project / "main.go"
    source.write_text(source.read_text().replace("out.Status = resp.Status", "out.Status = resp.Statu"))
    with pytest.raises(glovebox.BuildError) as raised:
        glovebox.build(project, tmp_path / "broken.wasm")
    assert raised.value.message.startswith("go build failed:\n")
    assert "main.go:" in raised.value.message and "Statu" in raised.value.message


@pytest.mark.slow
@pytest.mark.usefixtures("shared_caches")
def test_new_lang_go_builds_registers_and_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_toolchain("go")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    made = runner.invoke(cli, ["new", "greeter", "--lang", "go"])
    assert made.exit_code == 0, made.output
    assert "glovebox build greeter -o greeter/greeter.wasm" in made.output
    built = runner.invoke(cli, ["build", "greeter", "-o", "greeter/greeter.wasm"])
    assert built.exit_code == 0, built.output
    assert runner.invoke(cli, ["register", "greeter/greeter.wasm"]).exit_code == 0
    called = runner.invoke(cli, ["call", "greeter", "--input", '{"name": "Ada"}'])
    assert called.exit_code == 0, called.output
    assert '"greeting": "Hello, Ada!"' in called.output
    refused = runner.invoke(cli, ["call", "greeter", "--input", '{"name": " "}'])
    assert refused.exit_code == 1 and '"message": "name must not be empty"' in refused.output


def test_the_tool_is_named_after_the_module_path_s_last_element(tmp_path: Path) -> None:
    from glovebox.toolchains._base import BuildContext
    from glovebox.toolchains._build import sdk_dir
    from glovebox.toolchains._go import GoToolchain

    project = tmp_path / "m"
    project.mkdir()
    (project / "go.mod").write_text("module example.com/tools/word-count\n\ngo 1.24\n")
    context = BuildContext(sdk=sdk_dir(), cache_dir=tmp_path / "cache")
    assert GoToolchain().generated_manifest(project / "main.go", context) == 'name = "word-count"\n'


def test_the_vendored_adapter_is_the_one_glovebox_ships(tmp_path: Path) -> None:
    from glovebox.toolchains._build import sdk_dir
    from glovebox.toolchains._go import _adapter

    assert _adapter(sdk_dir()).name == "wasi_snapshot_preview1.reactor.wasm"
    fake = tmp_path / "go" / "adapter"
    fake.mkdir(parents=True)
    (fake / "wasi_snapshot_preview1.reactor.wasm").write_bytes(b"\0asm\1\0\0\0")
    with pytest.raises(glovebox.BuildError) as raised:
        _adapter(tmp_path)
    assert raised.value.message.endswith("is missing or not the one glovebox ships")
