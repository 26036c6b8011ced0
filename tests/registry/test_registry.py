"""The registry: versions, removal, deprecation, signatures, the compile cache,
hot registration, concurrency and hostile artifacts."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.engine import _compile
from glovebox.engine._engine import get_engine
from glovebox.model._result import ToolInfo
from glovebox.registry._registry import Registry, version_key

BuildGuest = Callable[[str], Path]


def manifest(name: str = "tool", version: str = "1.0.0", **extra: object) -> dict[str, object]:
    return {"name": name, "version": version, **extra}


# -- versions and resolution ------------------------------------------------------


def test_versions_resolve_newest_and_exact(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    for version in ("1.2.0", "1.10.0", "1.10.1-rc1", "0.9.0"):
        runtime.register(build_guest("echo"), manifest(version=version))
    assert runtime.tool("tool").version == "1.10.1-rc1"
    assert runtime.tool("tool@1.2.0").version == "1.2.0"
    assert [i.version for i in runtime.tools()] == ["1.10.1-rc1", "1.10.0", "1.2.0", "0.9.0"]
    assert runtime.call("tool@0.9.0", {"x": 1}).meta["version"] == "0.9.0"
    with pytest.raises(glovebox.ToolNotFound, match=r"tool@2\.0\.0"):
        runtime.tool("tool@2.0.0")


def test_an_older_version_warns_which_version_a_bare_name_resolves_to(
    runtime: glovebox.Runtime, build_guest: BuildGuest
) -> None:
    described = {"description": "echo", "input_schema": {"type": "object", "properties": {"q": {"type": "integer"}}}}
    runtime.register(build_guest("echo"), manifest(version="1.0.0", **described))
    with pytest.warns(glovebox.ManifestWarning) as caught:
        runtime.register(build_guest("echo"), manifest(version="0.0.0", **described))
    assert [str(w.message) for w in caught] == [
        "tool@0.0.0 is older than tool@1.0.0, which a bare 'tool' still resolves to: call tool@0.0.0 by its "
        "version, or give this tool a name of its own or a higher version"
    ]
    assert runtime.tool("tool").version == "1.0.0"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", glovebox.ManifestWarning)
        runtime.register(build_guest("echo"), manifest(version="2.0.0", **described))  # newer: no word
        runtime.register(build_guest("echo"), manifest(name="other", version="0.0.1", **described))


def test_pre_releases_order_by_semver_precedence(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    # semver.org item 11: numeric identifiers compare as numbers, build metadata is not precedence.
    for version in ("1.0.0-alpha.2", "1.0.0-alpha.10", "1.0.0-alpha.beta", "1.0.0-rc.1", "0.9.0+build-9"):
        runtime.register(build_guest("echo"), manifest(version=version))
    assert runtime.tool("tool").version == "1.0.0-rc.1"
    assert [i.version for i in runtime.tools()] == [
        "1.0.0-rc.1",
        "1.0.0-alpha.beta",
        "1.0.0-alpha.10",
        "1.0.0-alpha.2",
        "0.9.0+build-9",
    ]
    runtime.register(build_guest("echo"), manifest(version="1.0.0+build-7"))
    assert runtime.tool("tool").version == "1.0.0+build-7"  # a release, above its pre-releases


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.0.0-alpha.2", "1.0.0-alpha.10"),
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-beta.11", "1.0.0-rc.1"),
        ("1.0.0-rc.1", "1.0.0+build-7"),
        ("1.0.0+build-7", "1.0.1"),
        ("1.9.0", "1.10.0"),
    ],
)
def test_version_key_follows_semver_precedence(lower: str, higher: str) -> None:
    assert version_key(lower) < version_key(higher)
    assert sorted([higher, lower], key=version_key) == [lower, higher]


def test_build_metadata_is_not_precedence() -> None:
    assert version_key("1.0.0+build-7")[0] == version_key("1.0.0")[0] == version_key("1.0.0+other")[0]
    # Equal precedence still sorts one way: by the text.
    assert sorted(["1.0.0+b", "1.0.0", "1.0.0+a"], key=version_key) == ["1.0.0", "1.0.0+a", "1.0.0+b"]


def test_version_key_orders_every_version_a_manifest_accepts() -> None:
    # The manifest's pattern is looser than semver (leading zeros, empty identifiers, a second "+"):
    # such versions, in homes already, still sort beside their release instead of failing.
    versions = ["1.0.0+a+b", "1.0.0", "1.0.0-a..b", "01.0.0-01", "0.9.0"]
    assert sorted(versions, key=version_key) == ["0.9.0", "01.0.0-01", "1.0.0-a..b", "1.0.0", "1.0.0+a+b"]


def test_list_filters(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    runtime.register(build_guest("echo"), manifest("alpha-one"))
    runtime.register(build_guest("echo"), manifest("alpha-two"))
    runtime.register(build_guest("echo"), manifest("beta"))
    runtime.deprecate("alpha-two@1.0.0", "use alpha-one")
    assert [i.name for i in runtime.tools("alpha-*")] == ["alpha-one", "alpha-two"]
    assert [i.name for i in runtime.tools("alpha-*", include_deprecated=False)] == ["alpha-one"]
    assert runtime.tools(signed=True) == []
    assert len(runtime.tools(signed=False)) == 3


def test_remove_version_and_collect_blob(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    a = runtime.register(build_guest("echo"), manifest(version="1.0.0"))
    b = runtime.register(build_guest("guest_error"), manifest(version="2.0.0"))
    assert runtime.tool("tool").version == "2.0.0"
    [removed] = runtime.remove("tool@2.0.0")
    assert removed.version == "2.0.0"
    assert runtime.tool("tool").version == "1.0.0"
    assert not runtime._registry.blob_path(b.digest).exists()
    assert not list((runtime.home / "cache" / "compiled").glob(f"{b.digest}-*"))
    assert runtime._registry.blob_path(a.digest).exists()
    runtime.remove("tool", all_versions=True)
    assert runtime.call("tool", {}).code == "tool_not_found"
    with pytest.raises(glovebox.ToolNotFound):
        runtime.remove("tool", all_versions=True)


def test_a_bare_name_removes_nothing_unless_every_version_is_asked_for(
    runtime: glovebox.Runtime, build_guest: BuildGuest
) -> None:
    runtime.register(build_guest("echo"), manifest(version="1.0.0"))
    runtime.register(build_guest("echo"), manifest(version="2.0.0"))
    with pytest.raises(ValueError, match="names every version; give NAME@VERSION or pass all_versions=True"):
        runtime.remove("tool")
    assert [info.version for info in runtime.tools("tool")] == ["2.0.0", "1.0.0"]
    assert sorted(info.version for info in runtime.remove("tool", all_versions=True)) == ["1.0.0", "2.0.0"]


def test_shared_blob_survives_removal_of_one_name(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    first = runtime.register(build_guest("echo"), manifest("one"))
    runtime.register(build_guest("echo"), manifest("two"))
    runtime.remove("one@1.0.0")
    assert runtime._registry.blob_path(first.digest).exists()
    assert runtime.call("two", {"k": 1}).output == {"k": 1}


def test_deprecated_versions(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    runtime.register(build_guest("echo"), manifest(version="1.0.0"))
    runtime.register(build_guest("echo"), manifest(version="2.0.0"))
    [marked] = runtime.deprecate("tool@2.0.0", "broken, use 1.0.0")
    assert marked.deprecated == "broken, use 1.0.0"
    assert runtime.tool("tool").version == "1.0.0"
    pinned = runtime.call("tool@2.0.0", {"a": 1})
    assert pinned.ok and pinned.meta["deprecated"] == "broken, use 1.0.0"
    runtime.deprecate("tool")
    result = runtime.call("tool", {"a": 1})
    assert result.ok and result.meta["version"] == "2.0.0" and result.meta["deprecated"] == "deprecated"


# -- hot registration and concurrency ---------------------------------------------


def test_hot_registration_seen_by_a_live_runtime(tmp_path: Path, build_guest: BuildGuest) -> None:
    home = tmp_path / "shared-home"
    with glovebox.Runtime(home=home) as serving:
        assert serving.call("tool", {}).code == "tool_not_found"
        script = (
            "import glovebox, sys\n"
            "rt = glovebox.Runtime(home=sys.argv[1])\n"
            "rt.register(sys.argv[2], {'name': 'tool', 'version': '1.0.0'})\n"
        )
        subprocess.run([sys.executable, "-c", script, str(home), str(build_guest("echo"))], check=True)
        assert serving.call("tool", {"n": 1}).output == {"n": 1}
        subprocess.run(
            [sys.executable, "-c", f"import glovebox; glovebox.Runtime(home={str(home)!r}).deprecate('tool', 'old')"],
            check=True,
        )
        assert serving.tool("tool").deprecated == "old"
        subprocess.run(
            [
                sys.executable,
                "-c",
                f"import glovebox; glovebox.Runtime(home={str(home)!r}).remove('tool', all_versions=True)",
            ],
            check=True,
        )
        assert serving.call("tool", {}).code == "tool_not_found"


def _deprecate_behind_its_back(home: Path, note: str) -> None:
    """Another writer (a plain SQLite connection, as another process would be) changes the index."""
    with sqlite3.connect(home / "registry.sqlite") as db:
        db.execute("UPDATE tools SET deprecated = ?", (note,))


def test_an_unchanged_index_answers_without_a_database_read(
    tmp_path: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The native core's first call of a tool reads its artifact's recorded hash from the index.
    monkeypatch.setenv("GLOVEBOX_NATIVE", "0")
    with glovebox.Runtime(home=tmp_path) as rt:
        rt.register(build_guest("echo"), manifest())
        registry = rt._registry
        assert registry.resolve("tool").deprecated is None

        def no_read() -> Any:
            raise AssertionError("read the database although nothing committed")

        with monkeypatch.context() as patch:
            patch.setattr(registry._database, "connection", no_read)
            assert registry.resolve("tool").deprecated is None
            assert rt.call("tool", {"n": 1}).output == {"n": 1}
        _deprecate_behind_its_back(tmp_path, "gone")  # the wal-index header changes with the commit
        assert registry.resolve("tool@1.0.0").deprecated == "gone"
        assert registry.resolve("tool").deprecated == "gone"


def test_without_a_readable_wal_index_every_lookup_reads_the_database(tmp_path: Path, build_guest: BuildGuest) -> None:
    with glovebox.Runtime(home=tmp_path) as rt:
        rt.register(build_guest("echo"), manifest())
        rt._registry._wal_index.close()
        assert rt._registry._wal_index.stamp() is None
        assert rt.tool("tool").deprecated is None
        _deprecate_behind_its_back(tmp_path, "gone")
        assert rt.tool("tool").deprecated == "gone"


def _register_versions(home: str, wasm: str, offset: int) -> None:
    with glovebox.Runtime(home=home) as rt:
        for index in range(6):
            rt.register(wasm, {"name": "tool", "version": f"{offset}.{index}.0"})


def test_two_processes_register_at_once(tmp_path: Path, build_guest: BuildGuest) -> None:
    home, wasm = str(tmp_path / "h"), str(build_guest("echo"))
    glovebox.Runtime(home=home).close()
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_register_versions, args=(home, wasm, n)) for n in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
        assert worker.exitcode == 0
    with glovebox.Runtime(home=home) as rt:
        assert len(rt.tools()) == 12
        assert rt.call("tool@2.5.0", {"ok": True}).ok
    db = sqlite3.connect(Path(home) / "registry.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# -- signatures ---------------------------------------------------------------------


@pytest.fixture
def signed(tmp_path: Path, build_guest: BuildGuest, runtime: glovebox.Runtime) -> tuple[Path, Path, Path]:
    """An artifact with its manifest and a signature by a key the runtime trusts."""
    private, public = glovebox.generate_keypair("release", tmp_path / "keys")
    assert runtime.trust_key(public).startswith("release:")
    wasm = tmp_path / "art" / "tool.wasm"
    wasm.parent.mkdir()
    wasm.write_bytes(build_guest("echo").read_bytes())
    man = wasm.with_name("tool.glovebox.toml")
    man.write_text('name = "tool"\nversion = "1.0.0"\ndescription = "echo"\n')
    assert glovebox.sign(wasm, private) == wasm.with_name("tool.wasm.sig")
    return wasm, man, private


def test_signed_artifact_registers_with_its_signer(runtime: glovebox.Runtime, signed: tuple[Path, Path, Path]) -> None:
    info = runtime.register(signed[0])
    assert info.signer is not None and info.signer.startswith("release:")
    assert runtime.tools(signed=True) == [info]


def test_tampered_artifact_is_refused(runtime: glovebox.Runtime, signed: tuple[Path, Path, Path]) -> None:
    wasm = signed[0]
    wasm.write_bytes(wasm.read_bytes() + b"\0")
    with pytest.raises(glovebox.SignatureError, match="the artifact changed"):
        runtime.register(wasm)
    assert runtime.tools() == []


def test_tampered_manifest_is_refused(runtime: glovebox.Runtime, signed: tuple[Path, Path, Path]) -> None:
    wasm, man, _ = signed
    man.write_text('name = "tool"\nversion = "1.0.0"\ndescription = "echo"\nlimits.fuel = 9999999999\n')
    with pytest.raises(glovebox.SignatureError, match="manifest of tool changed"):
        runtime.register(wasm)


def test_forged_signature_is_refused(runtime: glovebox.Runtime, signed: tuple[Path, Path, Path]) -> None:
    sig = signed[0].with_name("tool.wasm.sig")
    document = json.loads(sig.read_text())
    document["signature"] = document["signature"][:-4] + (
        "AAA=" if not document["signature"].endswith("AAA=") else "BBB="
    )
    sig.write_text(json.dumps(document))
    with pytest.raises(glovebox.SignatureError, match="does not verify"):
        runtime.register(signed[0])


def test_unknown_signer_is_refused(runtime: glovebox.Runtime, signed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    stranger, _ = glovebox.generate_keypair("stranger", tmp_path / "other")
    glovebox.sign(signed[0], stranger, manifest=glovebox.Manifest(name="tool", version="1.0.0", description="echo"))
    with pytest.raises(glovebox.SignatureError, match="not trusted"):
        runtime.register(signed[0])


def test_required_signatures_refuse_unsigned(tmp_path: Path, build_guest: BuildGuest) -> None:
    with glovebox.Runtime(home=tmp_path / "strict", require_signatures=True) as rt:
        with pytest.raises(glovebox.SignatureError, match="requires signatures"):
            rt.register(build_guest("echo"), manifest())
        assert rt.tools() == [] and rt.gc() == []


def test_require_signatures_from_environment(
    tmp_path: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLOVEBOX_REQUIRE_SIGNATURES", "1")
    with glovebox.Runtime(home=tmp_path / "strict") as rt, pytest.raises(glovebox.SignatureError):
        rt.register(build_guest("echo"), manifest())


# -- artifacts and the compile cache on disk -------------------------------------------------


def test_blob_changed_on_disk_never_runs(tmp_path: Path, build_guest: BuildGuest) -> None:
    home = tmp_path / "h"
    with glovebox.Runtime(home=home) as rt:
        info = rt.register(build_guest("echo"), manifest())
        blob = rt._registry.blob_path(info.digest)
    get_engine().forget(info.digest)
    os.chmod(blob, 0o644)
    blob.write_bytes(build_guest("guest_error").read_bytes())
    with glovebox.Runtime(home=home) as rt:
        result = rt.call("tool", {"a": 1})
    assert result.code == "internal_error"
    assert result.meta["call_id"] in result.error.message  # type: ignore[union-attr]


def test_compiled_cache_survives_restart_without_recompiling(
    tmp_path: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wasmtime-py compile cache; the native core's is tests/sandbox/test_native.py's.
    monkeypatch.setenv("GLOVEBOX_NATIVE", "0")
    home = tmp_path / "h"
    with glovebox.Runtime(home=home) as rt:
        info = rt.register(build_guest("echo"), manifest())
    [cached] = (home / "cache" / "compiled").glob(f"{info.digest}-*.cwasm")
    assert get_engine().fingerprint in cached.name
    get_engine().forget(info.digest)

    def no_compile(*args: object) -> None:
        raise AssertionError("the cached compiled component should have been used")

    monkeypatch.setattr("glovebox.registry._compiled.precompile", no_compile)
    with glovebox.Runtime(home=home) as rt:
        assert rt.call("tool", {"a": 2}).output == {"a": 2}


def test_tampered_compiled_file_is_rebuilt_not_loaded(tmp_path: Path, build_guest: BuildGuest) -> None:
    home = tmp_path / "h"
    with glovebox.Runtime(home=home) as rt:
        info = rt.register(build_guest("echo"), manifest())
    [cached] = (home / "cache" / "compiled").glob(f"{info.digest}-{get_engine().fingerprint}.cwasm")
    get_engine().forget(info.digest)
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cached.write_bytes(bytes(data))
    with glovebox.Runtime(home=home) as rt:
        assert rt.call("tool", {"a": 3}).output == {"a": 3}
    assert cached.read_bytes() != bytes(data)


def test_fingerprint_tracks_engine_settings() -> None:
    from dataclasses import replace

    settings = get_engine().settings
    assert (
        replace(settings, max_wasm_stack_bytes=settings.max_wasm_stack_bytes * 2).fingerprint()
        != settings.fingerprint()
    )
    assert replace(settings).fingerprint() == settings.fingerprint()


# -- hostile artifacts -----------------------------------------------------------------------


def component_wat(body: str) -> str:
    return f"(component (core module $m {body}) (core instance (instantiate $m)))"


def assemble(tmp_path: Path, name: str, wat: str) -> Path:
    tool = Path(sys.executable).with_name("wasm-tools")
    src, out = tmp_path / f"{name}.wat", tmp_path / f"{name}.wasm"
    src.write_text(wat)
    subprocess.run([str(tool), "parse", str(src), "-o", str(out)], check=True)
    return out


def test_huge_declared_memory_is_refused(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    wasm = assemble(tmp_path, "mem", component_wat("(memory 60000)"))
    with pytest.raises(glovebox.InvalidArtifact):
        runtime.register(wasm)
    assert runtime.tools() == []


def test_compile_time_is_bounded(runtime: glovebox.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    functions = " ".join(
        f'(func (export "f{i}") (param i32) (result i32) local.get 0 i32.const {i} i32.mul)' for i in range(20000)
    )
    wasm = assemble(tmp_path, "many", component_wat(functions))
    monkeypatch.setenv("GLOVEBOX_COMPILE_TIMEOUT_S", "0.05")
    with pytest.raises(glovebox.InvalidArtifact, match="longer than 0.05 s to compile") as caught:
        runtime.register(wasm)
    assert "GLOVEBOX_COMPILE_TIMEOUT_S" in str(caught.value)  # the refusal names the setting
    assert caught.value.details["setting"] == "GLOVEBOX_COMPILE_TIMEOUT_S"
    assert runtime.tools() == []


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_compile_shows_progress_on_a_terminal(
    runtime: glovebox.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    functions = " ".join(
        f'(func (export "f{i}") (param i32) (result i32) local.get 0 i32.const {i} i32.mul)' for i in range(20000)
    )
    wasm = assemble(tmp_path, "many", component_wat(functions))
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("GLOVEBOX_COMPILE_TIMEOUT_S", "1.5")
    with pytest.raises(glovebox.InvalidArtifact, match="longer than 1.5 s"):
        runtime.register(wasm)
    assert "compiling many.wasm (" in terminal.getvalue()
    assert "of at most 1.5 s" in terminal.getvalue()


def test_the_compile_deadline_scales_with_the_artifact(monkeypatch: pytest.MonkeyPatch) -> None:
    small, why = _compile.compile_timeout(25_000)
    large, _ = _compile.compile_timeout(18 * 1024 * 1024)
    assert small == pytest.approx(_compile.COMPILE_TIMEOUT_S, abs=1)
    assert large == _compile.COMPILE_TIMEOUT_S + 18 * _compile.COMPILE_S_PER_MIB
    assert "GLOVEBOX_COMPILE_TIMEOUT_S" in why
    monkeypatch.setenv("GLOVEBOX_COMPILE_TIMEOUT_S", "900")
    assert _compile.compile_timeout(18 * 1024 * 1024) == (900.0, "set by GLOVEBOX_COMPILE_TIMEOUT_S")
    monkeypatch.setenv("GLOVEBOX_COMPILE_TIMEOUT_S", "soon")
    with pytest.raises(glovebox.InvalidArtifact, match="GLOVEBOX_COMPILE_TIMEOUT_S must be a positive number"):
        _compile.compile_timeout(1)


def test_deep_nesting_is_refused_cleanly(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    depth = 50_000
    body = "(func " + "(block " * depth + ")" * depth + ")"
    wasm = assemble(tmp_path, "deep", component_wat(body))
    with pytest.raises(glovebox.InvalidArtifact):
        runtime.register(wasm)


def test_hundred_megabyte_file_is_refused_before_reading(
    runtime: glovebox.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.wasm"
    with big.open("wb") as handle:
        handle.write(b"\0asm\x0d\x00\x01\x00")
        handle.truncate(100 * 1024 * 1024)
    read_bytes = Path.read_bytes

    def refuse_to_read_big(path: Path) -> bytes:
        assert path != big, "the oversized artifact was read"
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", refuse_to_read_big)
    with pytest.raises(glovebox.InvalidArtifact, match="over the .*artifact limit"):
        runtime.register(big)


# -- removal racing calls and registrations -----------------------------------------


def test_removal_racing_a_registration_of_the_same_artifact_keeps_its_blob(
    tmp_path: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, wasm = tmp_path / "h", build_guest("echo")
    with glovebox.Runtime(home=home) as first:
        first.register(wasm, manifest("t"))
    add = Registry.add_many

    def add_after_a_removal(self: Registry, *args: Any, **kwargs: Any) -> list[ToolInfo]:
        # Another process removes the only other user of the artifact while this
        # registration is between its checks and its commit.
        code = f"import glovebox; glovebox.Runtime(home={str(home)!r}).remove('t', all_versions=True)"
        subprocess.run([sys.executable, "-c", code], check=True)
        return add(self, *args, **kwargs)

    with glovebox.Runtime(home=home) as second:
        monkeypatch.setattr(Registry, "add_many", add_after_a_removal)
        info = second.register(wasm, manifest("u"))
        monkeypatch.undo()
        assert second._registry.blob_path(info.digest).is_file()
    with glovebox.Runtime(home=home) as fresh:  # verifies the blob again
        assert [i.name for i in fresh.tools()] == ["u"]
        assert fresh.call("u", {"k": 1}).output == {"k": 1}


def test_a_call_racing_a_removal_answers_tool_not_found(tmp_path: Path, build_guest: BuildGuest) -> None:
    home = tmp_path / "h"
    with glovebox.Runtime(home=home) as owner:
        owner.register(build_guest("echo"), manifest("t"))
        with glovebox.Runtime(home=home) as caller:
            resolve = caller._registry.resolve

            def resolve_then_removed(ref: str) -> ToolInfo:
                info = resolve(ref)
                owner.remove(ref, all_versions=True)  # after the call resolved the tool, before it loads it
                return info

            caller._registry.resolve = resolve_then_removed  # type: ignore[method-assign]
            result = caller.call("t", {})
            assert result.code == "tool_not_found", result.to_dict()
            assert result.meta["tool"] == "t" and result.meta["version"] == "1.0.0"
            [record] = caller.audit.tail(1)
            assert record["outcome"] == "tool_not_found"


def test_a_call_finding_the_blob_set_aside_by_an_uncommitted_removal_answers_tool_not_found(
    tmp_path: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A removal moves the blob aside before it commits: a call reading the index meanwhile still sees
    the row, and must wait for the removal to end instead of calling the missing blob tampering."""
    import threading

    from glovebox.registry import _registry

    home = tmp_path / "h"
    aside, go = threading.Event(), threading.Event()
    set_aside = _registry._set_aside

    def set_aside_and_pause(paths: list[Path], moved: list[tuple[Path, Path]]) -> None:
        set_aside(paths, moved)
        aside.set()
        go.wait(5)  # the removal's transaction stays open until the call asks under the write lock

    with glovebox.Runtime(home=home) as owner:
        info = owner.register(build_guest("echo"), manifest("t"))
        get_engine().forget(info.digest)  # as a process that never loaded it
        with glovebox.Runtime(home=home) as caller:
            settled = caller._registry.references_settled

            def ask_and_let_the_removal_go_on(digest: str) -> bool:
                go.set()
                return settled(digest)

            caller._registry.references_settled = ask_and_let_the_removal_go_on  # type: ignore[method-assign]
            monkeypatch.setattr(_registry, "_set_aside", set_aside_and_pause)
            remover = threading.Thread(target=owner.remove, args=("t",), kwargs={"all_versions": True})
            remover.start()
            assert aside.wait(5)
            result = caller.call("t", {})
            remover.join(10)
            assert result.code == "tool_not_found", result.to_dict()
            assert not owner._registry.blob_path(info.digest).exists()


def test_a_call_racing_a_removal_during_a_rebuild_answers_tool_not_found(
    tmp_path: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "h"
    with glovebox.Runtime(home=home) as owner:
        info = owner.register(build_guest("echo"), manifest("t"))
        get_engine().forget(info.digest)  # as a process that never loaded it
        for cached in (home / "cache" / "compiled").glob("*.cwasm"):
            cached.unlink()  # so the call rebuilds it from the blob
        precompile = _compile.precompile

        def precompile_then_removed(*args: Any) -> None:
            precompile(*args)
            owner.remove("t", all_versions=True)

        monkeypatch.setattr(glovebox.registry._compiled, "precompile", precompile_then_removed)
        with glovebox.Runtime(home=home) as caller:
            assert caller.call("t", {}).code == "tool_not_found"
        assert not list((home / "cache" / "compiled").iterdir())
        assert not owner._registry.blob_path(info.digest).exists()


def test_a_missing_blob_of_a_registered_tool_is_still_internal_error(tmp_path: Path, build_guest: BuildGuest) -> None:
    home = tmp_path / "h"
    with glovebox.Runtime(home=home) as owner:
        info = owner.register(build_guest("echo"), manifest("t"))
        owner._registry.blob_path(info.digest).unlink()
    with glovebox.Runtime(home=home) as caller:
        assert caller.call("t", {}).code == "internal_error"


def _register_and_remove(home: str, wasm: str, name: str, rounds: int) -> None:
    with glovebox.Runtime(home=home) as rt:
        for _ in range(rounds):
            info = rt.register(wasm, {"name": name, "version": "1.0.0"})
            assert rt._registry.blob_path(info.digest).is_file(), "registered without its blob"
            rt.remove(name, all_versions=True)


def test_processes_removing_and_registering_one_artifact_never_lose_its_blob(
    tmp_path: Path, build_guest: BuildGuest
) -> None:
    home, wasm, rounds = str(tmp_path / "h"), str(build_guest("echo")), 100
    glovebox.Runtime(home=home).close()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["glovebox"])
    workers = [ctx.Process(target=_register_and_remove, args=(home, wasm, name, rounds)) for name in ("t", "u")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [worker.exitcode for worker in workers] == [0, 0]
    with glovebox.Runtime(home=home) as rt:
        assert rt.tools() == [] and rt.gc() == []
