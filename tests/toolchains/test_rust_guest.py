"""Rust tools: ``glovebox build`` on a Cargo package and ``glovebox new --lang rust``, built and called for real."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from wasmtime.component import Component

import glovebox
from glovebox.cli._main import cli
from glovebox.engine._engine import get_engine
from glovebox.toolchains._base import BuildContext
from glovebox.toolchains._build import sdk_dir
from glovebox.toolchains._rust import RustToolchain

from ..conftest import require_toolchain
from ..guestcache import EXAMPLES
from .projects import granted_runtime, json_server, shared_caches

__all__ = ["shared_caches"]  # the fixture, used by name

BuildProject = Callable[[Path], Path]
FETCH = EXAMPLES / "rust-fetch-json"


def test_the_tool_fetches_from_a_granted_local_server(tmp_path: Path, build_project: BuildProject) -> None:
    wasm = build_project(FETCH)
    with json_server() as server, granted_runtime(tmp_path / "home", server, wasm) as rt:
        result = rt.call("rust-fetch-json", {"url": server.url("/items?page=1")})
    assert result.ok, result.to_dict()
    assert result.output == {"status": 200, "json": {"items": [1, 2, 3], "path": "/items?page=1"}}
    assert result.meta["logs"] == [{"level": "info", "message": f"{server.url('/items?page=1')} answered 200"}]


def test_without_the_grant_the_fetch_is_denied(runtime: glovebox.Runtime, build_project: BuildProject) -> None:
    runtime.register(build_project(FETCH))
    result = runtime.call("rust-fetch-json", {"url": "http://127.0.0.1:9/x"})
    assert result.error is not None and result.error.code == "capability_denied"
    assert result.error.details["guest_message"] == "http denied: the http capability is not granted to this call"


def test_the_component_imports_the_host_and_no_wasi(build_project: BuildProject) -> None:
    engine = get_engine().engine
    component = Component.from_file(engine, str(build_project(FETCH)))
    assert set(component.type.imports(engine)) == {"glovebox:tool/host@0.1.0"}
    assert list(component.type.exports(engine)) == ["call"]


def test_the_manifest_names_the_package_when_glovebox_toml_does_not(tmp_path: Path) -> None:
    project = tmp_path / "bare"
    shutil.copytree(FETCH, project, ignore=shutil.ignore_patterns("*.wasm", "glovebox.toml", "*.glovebox.toml"))
    (project / "Cargo.toml").write_text(
        (project / "Cargo.toml").read_text().replace('"rust-fetch-json"', '"bare-tool"')
    )
    context = BuildContext(sdk=sdk_dir(), cache_dir=tmp_path / "cache")
    assert RustToolchain().generated_manifest(project / "src" / "lib.rs", context) == (
        'name = "bare-tool"\nversion = "0.1.0"\n'
    )


def test_a_library_that_is_not_a_cdylib_is_refused_with_the_fix(tmp_path: Path) -> None:
    project = tmp_path / "lib"
    (project / "src").mkdir(parents=True)
    (project / "Cargo.toml").write_text('[package]\nname = "lib"\nversion = "0.1.0"\nedition = "2021"\n')
    (project / "src" / "lib.rs").write_text("")
    with pytest.raises(glovebox.BuildError) as raised:
        glovebox.build(project, tmp_path / "lib.wasm")
    assert raised.value.message == (
        f"{project.resolve() / 'Cargo.toml'}: a tool is a library built as a cdylib; add\n"
        '[lib]\ncrate-type = ["cdylib"]'
    )


def test_a_folder_without_a_project_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(glovebox.BuildError) as raised:
        glovebox.build(tmp_path)
    assert raised.value.message == f"cannot build the folder {tmp_path}: it holds none of Cargo.toml, go.mod"


@pytest.mark.slow
@pytest.mark.usefixtures("shared_caches")
def test_a_compile_error_names_the_file_and_line(tmp_path: Path) -> None:
    require_toolchain("rust")
    project = tmp_path / "broken"
    shutil.copytree(FETCH, project, ignore=shutil.ignore_patterns("*.wasm", "*.glovebox.toml"))
    source = project / "src" / "lib.rs"
    source.write_text(source.read_text().replace("Ok(Output {", "Ok(Outptu {"))
    with pytest.raises(glovebox.BuildError) as raised:
        glovebox.build(project, tmp_path / "broken.wasm")
    assert "cargo build failed:" in raised.value.message
    assert "src/lib.rs:" in raised.value.message and "Outptu" in raised.value.message
    assert not (tmp_path / "broken.wasm").exists()


@pytest.mark.slow
@pytest.mark.usefixtures("shared_caches")
def test_new_lang_rust_builds_registers_and_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_toolchain("rust")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    made = runner.invoke(cli, ["new", "greeter", "--lang", "rust"])
    assert made.exit_code == 0, made.output
    assert "glovebox build greeter -o greeter/greeter.wasm" in made.output
    assert (tmp_path / "greeter" / "Cargo.lock").read_text() == (
        sdk_dir() / "rust" / "glovebox-guest" / "Cargo.lock"
    ).read_text()
    built = runner.invoke(cli, ["build", "greeter", "-o", "greeter/greeter.wasm"])
    assert built.exit_code == 0, built.output
    assert runner.invoke(cli, ["register", "greeter/greeter.wasm"]).exit_code == 0
    called = runner.invoke(cli, ["call", "greeter", "--input", '{"name": "Ada"}'])
    assert called.exit_code == 0, called.output
    assert '"greeting": "Hello, Ada!"' in called.output
    refused = runner.invoke(cli, ["call", "greeter", "--input", '{"name": " "}'])
    assert refused.exit_code == 1 and '"message": "name must not be empty"' in refused.output


def test_a_source_file_deep_in_the_package_names_its_package(tmp_path: Path) -> None:
    from glovebox.toolchains._project import project_root

    (tmp_path / "pkg" / "src" / "bin").mkdir(parents=True)
    (tmp_path / "pkg" / "Cargo.toml").write_text('[package]\nname = "pkg"\n')
    deep = tmp_path / "pkg" / "src" / "bin" / "x.rs"
    deep.write_text("")
    assert project_root(deep, "Cargo.toml") == (tmp_path / "pkg").resolve()
    assert project_root(tmp_path / "pkg" / "Cargo.toml", "Cargo.toml") == (tmp_path / "pkg").resolve()
    lone = tmp_path / "lone.rs"
    lone.write_text("")
    with pytest.raises(glovebox.BuildError) as raised:
        project_root(lone, "Cargo.toml")
    assert raised.value.message.endswith("no Cargo.toml in its folder or above (a project's sources are built whole)")


def test_a_project_folder_builds_to_a_component_named_after_it_by_default() -> None:
    from glovebox.toolchains._build import _default_output

    assert _default_output(FETCH, ("Cargo.toml",)) == FETCH.resolve() / "rust-fetch-json.wasm"
    assert _default_output(FETCH / "Cargo.toml", ("Cargo.toml",)) == FETCH.resolve() / "rust-fetch-json.wasm"
    assert _default_output(FETCH / "src" / "lib.rs", ("Cargo.toml",)) == FETCH / "src" / "lib.wasm"


def test_glovebox_toml_wins_over_cargo_toml_field_by_field(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    (project / "Cargo.toml").write_text(
        '[package]\nname = "p"\nversion = "2.0.0"\ndescription = "From Cargo."\n[lib]\ncrate-type = ["cdylib"]\n'
    )
    (project / "glovebox.toml").write_text('description = "From glovebox.toml."\n[limits]\nfuel = 5\n')
    context = BuildContext(sdk=sdk_dir(), cache_dir=tmp_path / "cache")
    assert RustToolchain().generated_manifest(project, context) == (
        'name = "p"\nversion = "2.0.0"\ndescription = "From glovebox.toml."\n\n[limits]\nfuel = 5\n'
    )
