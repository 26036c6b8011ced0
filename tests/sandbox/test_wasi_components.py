"""WASI 0.2 deny-by-default for any component: a Rust probe (``std::fs``, ``std::net``, ``println!``) built
here for ``wasm32-wasip2``, and the ``files`` grant attacked with ``..``, symlinks, hard links and its quota."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import glovebox
from tests.typedguests import TYPED, WASIP2, built_rust

pytestmark = [pytest.mark.system, pytest.mark.slow]

DECLARES_FILES = {"name": "probe", "capabilities": {"files": {"access": "read_write"}}}


@pytest.fixture(scope="module")
def probe_wasm(cache_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_rust(TYPED / "rust-wasi", tmp_path_factory.mktemp("wasi") / "probe.wasm", cache_root, target=WASIP2)


def _policy(*grants: dict[str, Any]) -> glovebox.Policy:
    return glovebox.Policy.model_validate({"version": 1, "defaults": {"action": "allow"}, "grants": list(grants)})


def _runtime(tmp_path: Path, *grants: dict[str, Any]) -> glovebox.Runtime:
    return glovebox.Runtime(home=tmp_path / "home", policy=_policy(*grants))


def code(result: glovebox.CallResult) -> str | None:
    return None if result.error is None else result.error.code


def test_nothing_is_reachable_without_a_grant(tmp_path: Path, probe_wasm: Path) -> None:
    with _runtime(tmp_path) as rt:
        rt.register_all(probe_wasm, manifest=DECLARES_FILES)
        escape = rt.call("probe-read-file", {"path": "/etc/passwd"})
        assert code(escape) == "guest_error"  # no preopened directory: the guest finds nothing at all
        assert "No such file" in str(escape.error)
        assert code(rt.call("probe-read-file", {"path": "../../etc/passwd"})) == "guest_error"
        assert code(rt.call("probe-list-dir", {"path": "/"})) == "guest_error"
        connect = rt.call("probe-connect", {"address": "127.0.0.1:9"})
        assert code(connect) == "guest_error"  # every socket address is refused inside WASI
        assert "Permission denied" in str(connect.error)
        assert not (tmp_path / "home" / "files").exists()  # no grant, no directory


def test_clocks_work_and_stdio_goes_to_the_bounded_logs(tmp_path: Path, probe_wasm: Path) -> None:
    with _runtime(tmp_path) as rt:
        rt.register_all(probe_wasm, manifest={"name": "probe", "limits": {"log_bytes": 64}})
        assert rt.call("probe-now", {}).output > 1_700_000_000
        result = rt.call("probe-shout", {"text": "hi", "times": 1})
        assert result.output == "hi"
        logs = result.meta["logs"]
        assert {"level": "info", "message": "hi"} in logs  # stdout
        assert {"level": "warn", "message": "hi"} in logs  # stderr
        loud = rt.call("probe-shout", {"text": "x" * 20, "times": 50})
        assert loud.ok
        assert sum(len(entry["message"]) for entry in loud.meta["logs"]) <= 64
        assert loud.meta["logs_dropped"] > 0


def test_a_files_grant_is_the_one_directory_the_guest_sees(tmp_path: Path, probe_wasm: Path) -> None:
    grant = {"tool": "probe-*", "files": [{"directory": "work/a", "access": "read_write", "quota_bytes": 1000}]}
    (tmp_path / "secret.txt").write_text("do not read")
    with _runtime(tmp_path, grant) as rt:
        rt.register_all(probe_wasm, manifest=DECLARES_FILES)
        assert rt.call("probe-write-file", {"path": "/files/note.txt", "data": "hello"}).output == 5
        assert (tmp_path / "home" / "files" / "work" / "a" / "note.txt").read_text() == "hello"
        assert rt.call("probe-read-file", {"path": "/files/note.txt"}).output == "hello"
        assert rt.call("probe-list-dir", {"path": "/files"}).output == ["note.txt"]
        for escape in ("/files/../../../secret.txt", "/files/../b", "/etc/passwd"):
            assert code(rt.call("probe-read-file", {"path": escape})) == "guest_error", escape


def test_a_read_grant_or_a_read_declaration_is_read_only(tmp_path: Path, probe_wasm: Path) -> None:
    grant = {"tool": "probe-*", "files": [{"directory": "ro", "access": "read"}]}
    with _runtime(tmp_path, grant) as rt:
        (tmp_path / "home" / "files" / "ro").mkdir(parents=True)
        (tmp_path / "home" / "files" / "ro" / "in.txt").write_text("data")
        rt.register_all(probe_wasm, manifest=DECLARES_FILES)
        assert rt.call("probe-read-file", {"path": "/files/in.txt"}).output == "data"
        assert code(rt.call("probe-write-file", {"path": "/files/out.txt", "data": "x"})) == "guest_error"
        assert not (tmp_path / "home" / "files" / "ro" / "out.txt").exists()


def test_a_symlink_out_of_the_directory_is_not_followed(tmp_path: Path, probe_wasm: Path) -> None:
    grant = {"tool": "probe-*", "files": [{"directory": "links", "access": "read_write"}]}
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    with _runtime(tmp_path, grant) as rt:
        directory = tmp_path / "home" / "files" / "links"
        directory.mkdir(parents=True)
        (directory / "out").symlink_to(outside)
        (directory / "up").symlink_to("..")
        rt.register_all(probe_wasm, manifest=DECLARES_FILES)
        assert code(rt.call("probe-read-file", {"path": "/files/out"})) == "guest_error"
        assert code(rt.call("probe-write-file", {"path": "/files/out", "data": "pwned"})) == "guest_error"
        assert code(rt.call("probe-list-dir", {"path": "/files/up"})) == "guest_error"
        assert outside.read_text() == "outside"


def test_a_granted_directory_that_is_a_symlink_out_is_refused(tmp_path: Path, probe_wasm: Path) -> None:
    grant = {"tool": "probe-*", "files": [{"directory": "jump", "access": "read_write"}]}
    (tmp_path / "elsewhere").mkdir()
    with _runtime(tmp_path, grant) as rt:
        (tmp_path / "home" / "files").mkdir(parents=True)
        (tmp_path / "home" / "files" / "jump").symlink_to(tmp_path / "elsewhere")
        rt.register_all(probe_wasm, manifest=DECLARES_FILES)
        result = rt.call("probe-write-file", {"path": "/files/x", "data": "x"})
        assert code(result) == "capability_denied"
        assert "leads outside HOME/files" in str(result.error)
        assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_hard_link_in_the_directory_is_refused(tmp_path: Path, probe_wasm: Path) -> None:
    grant = {"tool": "probe-*", "files": [{"directory": "hard", "access": "read_write"}]}
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    with _runtime(tmp_path, grant) as rt:
        directory = tmp_path / "home" / "files" / "hard"
        directory.mkdir(parents=True)
        os.link(outside, directory / "alias.txt")
        rt.register_all(probe_wasm, manifest=DECLARES_FILES)
        result = rt.call("probe-write-file", {"path": "/files/alias.txt", "data": "pwned"})
        assert code(result) == "capability_denied"
        assert "hard links" in str(result.error)
        assert outside.read_text() == "outside"


def test_the_quota_fails_a_call_that_leaves_the_directory_over_it(tmp_path: Path, probe_wasm: Path) -> None:
    grant = {"tool": "probe-*", "files": [{"directory": "q", "access": "read_write", "quota_bytes": 100}]}
    with _runtime(tmp_path, grant) as rt:
        rt.register_all(probe_wasm, manifest=DECLARES_FILES)
        assert rt.call("probe-write-file", {"path": "/files/small", "data": "x" * 60}).ok
        over = rt.call("probe-write-file", {"path": "/files/big", "data": "y" * 60})
        assert code(over) == "capability_denied"
        assert over.error is not None and over.error.details["quota_bytes"] == 100


def test_a_grant_with_dot_dot_or_an_absolute_path_is_an_invalid_policy(tmp_path: Path) -> None:
    for directory in ("../escape", "/etc", "a/../../b", ""):
        path = tmp_path / "policy.json"
        path.write_text(json.dumps({"version": 1, "grants": [{"tool": "*", "files": [{"directory": directory}]}]}))
        with pytest.raises(glovebox.InvalidPolicy, match="files"):
            glovebox.load_policy(path)


def test_a_guest_writing_in_a_loop_is_stopped_at_its_quota_inside_the_call(tmp_path: Path, probe_wasm: Path) -> None:
    quota = 64 * 1024
    grant = {"tool": "probe-*", "files": [{"directory": "loop", "access": "read_write", "quota_bytes": quota}]}
    with _runtime(tmp_path, grant) as rt:
        rt.register_all(probe_wasm, manifest={**DECLARES_FILES, "limits": {"timeout_ms": 20_000}})
        # 200 MB asked for, 4 KiB a write: stopped long before, not at the end of the call.
        result = rt.call("probe-fill", {"path": "/files/big", "chunk": 4096, "times": 50_000})
        assert code(result) == "capability_denied"
        assert result.error is not None and result.error.details["quota_bytes"] == quota
        assert result.meta["duration_ms"] < 15_000
        on_disk = (tmp_path / "home" / "files" / "loop" / "big").stat().st_size
        assert quota < on_disk < 32 * 1024 * 1024  # overshoot: what the guest writes in a few milliseconds
        # Escapes count for nothing: `..` out of the directory and a symlink out fail in the guest.
        (tmp_path / "outside").write_text("")
        (tmp_path / "home" / "files" / "loop" / "out").symlink_to(tmp_path / "outside")
        for path in ("/files/../../../outside", "/files/out"):
            escaped = rt.call("probe-fill", {"path": path, "chunk": 4096, "times": 10})
            assert code(escaped) == "guest_error", path
        assert (tmp_path / "outside").read_text() == ""


def test_a_loop_within_its_quota_runs_to_the_end(tmp_path: Path, probe_wasm: Path) -> None:
    grant = {"tool": "probe-*", "files": [{"directory": "fits", "access": "read_write", "quota_bytes": 1 << 20}]}
    with _runtime(tmp_path, grant) as rt:
        rt.register_all(probe_wasm, manifest=DECLARES_FILES)
        assert rt.call("probe-fill", {"path": "/files/f", "chunk": 1000, "times": 1000}).output == 1_000_000


def test_hard_links_made_by_the_guest_count_once_per_name(tmp_path: Path, probe_wasm: Path) -> None:
    grant = {"tool": "probe-*", "files": [{"directory": "hl", "access": "read_write", "quota_bytes": 100}]}
    with _runtime(tmp_path, grant) as rt:
        rt.register_all(probe_wasm, manifest=DECLARES_FILES)
        assert rt.call("probe-write-file", {"path": "/files/a", "data": "x" * 60}).ok
        linked = rt.call("probe-hard-link", {"target": "/files/a", "name": "/files/b"})
        assert code(linked) == "capability_denied"  # 120 bytes by name: over the quota
        after = rt.call("probe-write-file", {"path": "/files/c", "data": "y"})
        assert code(after) == "capability_denied"  # and a directory holding a hard link is refused
        assert "hard links" in str(after.error)


def test_the_deadline_holds_while_the_quota_is_watched(tmp_path: Path, probe_wasm: Path) -> None:
    grant = {"tool": "probe-*", "files": [{"directory": "slow", "access": "read_write", "quota_bytes": 1 << 30}]}
    with _runtime(tmp_path, grant) as rt:
        rt.register_all(probe_wasm, manifest={**DECLARES_FILES, "limits": {"timeout_ms": 300}})
        slow = rt.call("probe-fill", {"path": "/files/f", "chunk": 1, "times": 4_000_000_000})
        assert code(slow) == "timeout", slow.to_dict()
        assert slow.meta["duration_ms"] < 5_000
