"""The CLI contract: commands, the envelope on stdout, exit codes 0 / 1 / 2, one error line on stderr.

Commands run in-process through click's ``CliRunner`` (with ``catch_exceptions=False``,
so a traceback fails the test); two smoke tests go through the installed entry point.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from glovebox.cli._main import cli
from glovebox.toolchains import _pybuild

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "policies" / "examples" / "team.yaml")
DEFAULT_POLICY = str(ROOT / "policies" / "default.yaml")


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, prog_name="glovebox", catch_exceptions=False)


def entry_point(*args: str) -> subprocess.CompletedProcess[str]:
    """The real ``glovebox`` console script (``python -m glovebox`` where it is not installed)."""
    script = Path(sys.executable).with_name("glovebox")
    argv = [str(script)] if script.is_file() else [sys.executable, "-m", "glovebox"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=300, env=os.environ.copy())


# -- smoke tests through the entry point --------------------------------------------


def test_entry_point_register_and_call(build_example: Callable[[str], Path]) -> None:
    registered = entry_point("register", str(build_example("text-stats")))
    assert (registered.returncode, registered.stderr) == (0, "")
    assert registered.stdout.startswith("registered text-stats@1.0.0 sha256:")
    called = entry_point("call", "text-stats", "--input", '{"text": "a b"}')
    assert (called.returncode, called.stderr) == (0, "")
    assert json.loads(called.stdout)["output"] == {"characters": 3, "words": 2, "lines": 1, "bytes": 3}


def test_entry_point_usage_error_exits_2() -> None:
    result = entry_point("call", "x", "--input", "{not json")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        "error [usage_error]: Invalid value for '--input': not JSON: "
        "Expecting property name enclosed in double quotes at line 1 column 2"
    )


# -- calls --------------------------------------------------------------------------


def test_register_tools_call_roundtrip(build_example: Callable[[str], Path]) -> None:
    registered = invoke("register", str(build_example("text-stats")), "--json")
    assert registered.exit_code == 0 and registered.stderr == ""
    info = json.loads(registered.stdout)
    assert (info["name"], info["version"]) == ("text-stats", "1.0.0") and info["digest"].startswith("sha256:")

    listed = invoke("tools", "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout) == [info]
    table = invoke("tools").stdout.splitlines()
    assert table[0].split() == ["NAME", "VERSION", "KIND", "DIGEST", "DESCRIPTION"]
    assert table[1].split()[:4] == ["text-stats", "1.0.0", "wasm", info["digest"][7:19]] and len(table) == 2

    ok = invoke("call", "text-stats", "--input", '{"text": "a b\\nc"}', "--principal", "tester")
    assert ok.exit_code == 0 and ok.stderr == ""
    envelope = json.loads(ok.stdout)
    assert envelope["ok"] is True
    assert envelope["output"] == {"characters": 5, "words": 3, "lines": 2, "bytes": 5}
    assert envelope["meta"]["principal"] == "tester"
    for key in ("call_id", "tool", "version", "digest", "duration_ms", "fuel_used"):
        assert key in envelope["meta"]

    stdin = invoke("call", "text-stats", "--input", "-", input='{"text": "x"}')
    assert stdin.exit_code == 0 and json.loads(stdin.stdout)["output"]["words"] == 1


def test_a_failed_call_exits_1_with_the_envelope_on_stdout(build_example: Callable[[str], Path]) -> None:
    assert invoke("register", str(build_example("text-stats"))).exit_code == 0
    bad = invoke("call", "text-stats", "--input", '{"text": 5}')
    assert bad.exit_code == 1 and bad.stderr == ""
    failed = json.loads(bad.stdout)
    assert failed["ok"] is False and failed["error"]["code"] == "invalid_input"
    assert set(failed["error"]) == {"code", "message", "retryable", "details"}
    missing = invoke("call", "nope", "--input", "{}")
    assert missing.exit_code == 1 and json.loads(missing.stdout)["error"]["code"] == "tool_not_found"


def test_policy_denial_in_a_call(build_example: Callable[[str], Path]) -> None:
    assert invoke("register", str(build_example("text-stats"))).exit_code == 0
    denied = invoke("--policy", DEFAULT_POLICY, "call", "text-stats", "--input", '{"text": ""}')
    assert denied.exit_code == 1 and json.loads(denied.stdout)["error"]["code"] == "permission_denied"


@pytest.mark.parametrize(
    ("args", "last_line"),
    [
        (["approvals", "deny", "x", "--principal", "p"], "error [usage_error]: Missing option '--reason'."),
        (["call", "x", "--input", "{}", "--bogus"], "error [usage_error]: No such option '--bogus'."),
        (["frobnicate"], "error [usage_error]: No such command 'frobnicate'."),
        (
            ["call", "x", "--input", "[1,"],
            "error [usage_error]: Invalid value for '--input': not JSON: Expecting value at line 1 column 4",
        ),
        (["remove", "calc"], "error [usage_error]: 'calc' names every version; give NAME@VERSION or add --all"),
        (
            ["export", "--format", "nope"],
            "error [usage_error]: Invalid value for '--format': 'nope' is not one of 'openai', 'anthropic'.",
        ),
    ],
)
def test_usage_errors_exit_2(args: list[str], last_line: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == last_line


# -- the error boundary ---------------------------------------------------------------


def test_register_refusal_is_one_line_and_exit_1(tmp_path: Path) -> None:
    junk = tmp_path / "junk.wasm"
    junk.write_text("hello")
    result = invoke("register", str(junk))
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error [invalid_artifact]: {junk} ")


def test_library_misuse_and_file_errors_are_one_line_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nrules:\n  - tool: x\n    acton: allow\n")
    broken = invoke("--policy", str(bad), "tools")
    assert broken.exit_code == 1 and broken.stdout == ""
    [line] = broken.stderr.splitlines()
    assert line.startswith("error [invalid_policy]: ") and "bad.yaml:4: rules.0.acton: unknown field" in line

    unwritable = invoke("audit", "export", "--jsonl", "-o", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert unwritable.exit_code == 1 and unwritable.stdout == ""
    assert (
        unwritable.stderr
        == f"error [io_error]: [Errno 2] No such file or directory: '{tmp_path / 'no' / 'such' / 'dir.jsonl'}'\n"
    )


def test_build_error_is_verbatim_with_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "broken.c"
    src.write_text('#include "glovebox.h"\nint gb_tool(const char *i, size_t n, gb_buf *o) {\n  return nope;\n}\n')
    result = invoke("build", str(src), "-o", str(tmp_path / "out.wasm"))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("error [build_failed]: ")
    assert "broken.c:3:" in result.stderr and "nope" in result.stderr
    assert not (tmp_path / "out.wasm").exists()


def test_build_refuses_stdio_with_a_hint(tmp_path: Path) -> None:
    src = tmp_path / "printer.c"
    src.write_text(
        '#include "glovebox.h"\nint gb_tool(const char *i, size_t n, gb_buf *o) {\n'
        '  printf("hi\\n");\n  return gb_buf_puts(o, "1"), GB_OK;\n}\n'
    )
    result = invoke("build", str(src), "-o", str(tmp_path / "p.wasm"))
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error [build_failed]: {src}: the tool imports ")
    assert "fd_write" in line and line.endswith("use gb_log()")


# -- the home -------------------------------------------------------------------------


def test_home_option_overrides_env(tmp_path: Path, build_example: Callable[[str], Path]) -> None:
    home = tmp_path / "elsewhere"
    assert invoke("--home", str(home), "register", str(build_example("calc"))).exit_code == 0
    assert (home / "registry.sqlite").is_file()
    assert invoke("--home", str(home), "tools").stdout.splitlines()[1].startswith("calc ")
    assert invoke("tools").stdout == "no tools registered (add one with `glovebox register TOOL.wasm`)\n"


def test_home_option_holds_the_python_build_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The componentizer is stood in for (a real build takes seconds); everything else is real.
    cached: list[Path] = []

    def componentize(src: Path, text: str, helper: Path, wit: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"\0asm-stand-in")
        cached.append(target)

    monkeypatch.setattr(_pybuild, "_componentize", componentize)
    src = tmp_path / "tool.py"
    shutil.copyfile(ROOT / "guest" / "examples" / "py-slugify" / "tool.py", src)
    home = tmp_path / "given"
    result = invoke("--home", str(home), "build", str(src), "-o", str(tmp_path / "out.wasm"))
    slow = "glovebox: componentize-py: bundling CPython with tool.py, which takes a while, once per source\n"
    assert (result.exit_code, result.stdout, result.stderr) == (0, f"{tmp_path / 'out.wasm'}\n", slow)
    [target] = cached
    assert target.parent == home / "cache" / "build"
    assert (tmp_path / "out.wasm").read_bytes() == b"\0asm-stand-in"
    # GLOVEBOX_HOME (set for every test) is the default when --home is not given.
    assert invoke("build", str(src), "-o", str(tmp_path / "again.wasm")).exit_code == 0
    assert cached[1].parent == Path(os.environ["GLOVEBOX_HOME"]) / "cache" / "build"


# -- the registry, keys and signatures -------------------------------------------------


def test_keys_sign_verify(tmp_path: Path, build_example: Callable[[str], Path]) -> None:
    wasm = tmp_path / "calc.wasm"
    wasm.write_bytes(build_example("calc").read_bytes())
    (tmp_path / "calc.glovebox.toml").write_text(build_example("calc").with_name("calc.glovebox.toml").read_text())
    keys = tmp_path / "keys"
    generated = invoke("keys", "generate", "release", "--dir", str(keys))
    assert (
        generated.stdout
        == f"private key: {keys / 'release.key'} (keep it secret)\npublic key:  {keys / 'release.pub'}\n"
    )
    again = invoke("keys", "generate", "release", "--dir", str(keys))
    assert (again.exit_code, again.stdout) == (1, "")
    assert again.stderr == f"error [io_error]: {keys / 'release.key'} already exists; refusing to overwrite a key\n"
    assert invoke("keys", "list").stdout == "no trusted keys (add one with `glovebox keys trust KEY.pub`)\n"

    trusted = invoke("keys", "trust", str(keys / "release.pub"))
    assert trusted.exit_code == 0 and trusted.stdout.startswith("trusted release:")
    signer = trusted.stdout.removeprefix("trusted ").strip()
    assert invoke("keys", "list").stdout == f"{signer}\n"

    signed = invoke("sign", str(wasm), "--key", str(keys / "release.key"))
    assert (signed.exit_code, signed.stdout) == (0, f"{wasm}.sig\n")
    verified = invoke("verify", str(wasm))
    assert verified.exit_code == 0
    assert verified.stdout.startswith("ok: calc.wasm sha256:") and verified.stdout.endswith(f" signed by {signer}\n")

    wasm.write_bytes(wasm.read_bytes() + b"\0")
    tampered = invoke("verify", str(wasm))
    assert (tampered.exit_code, tampered.stdout) == (1, "")
    assert tampered.stderr.startswith(f"error [invalid_signature]: {wasm}.sig was made for artifact sha256:")
    unsigned = invoke("verify", str(wasm), "--signature", str(tmp_path / "none.sig"))
    assert unsigned.stderr == f"error [invalid_signature]: signature file {tmp_path / 'none.sig'} does not exist\n"


def test_registry_commands(tmp_path: Path, build_example: Callable[[str], Path]) -> None:
    keys = tmp_path / "keys"
    assert invoke("keys", "generate", "release", "--dir", str(keys)).exit_code == 0
    assert invoke("keys", "trust", str(keys / "release.pub")).exit_code == 0
    wasm = tmp_path / "calc.wasm"
    wasm.write_bytes(build_example("calc").read_bytes())
    (tmp_path / "calc.glovebox.toml").write_text(build_example("calc").with_name("calc.glovebox.toml").read_text())
    assert invoke("sign", str(wasm), "--key", str(keys / "release.key")).exit_code == 0
    assert invoke("register", str(wasm)).exit_code == 0

    shown = json.loads(invoke("show", "calc").stdout)
    assert shown["signer"].startswith("release:") and shown["version"] == "1.0.0"
    missing = invoke("show", "nope")
    assert (missing.exit_code, missing.stdout) == (1, "")
    assert missing.stderr.startswith("error [tool_not_found]: ")

    deprecated = invoke("deprecate", "calc@1.0.0", "-m", "use v2")
    assert deprecated.stdout == "deprecated calc@1.0.0: use v2\n"
    assert "DEPRECATED: use v2" in invoke("tools").stdout
    assert invoke("tools", "--no-deprecated", "--json").stdout == "[]\n"
    assert invoke("remove", "calc@1.0.0").stdout == "removed calc@1.0.0\n"
    gone = invoke("remove", "calc@1.0.0")
    assert gone.exit_code == 1 and gone.stderr.startswith("error [tool_not_found]: ")


# -- policies ---------------------------------------------------------------------------


def test_policy_commands(build_example: Callable[[str], Path], tmp_path: Path) -> None:
    from glovebox.policy import policy_schema

    assert invoke("register", str(build_example("text-stats"))).exit_code == 0
    assert invoke("register", str(build_example("primes"))).exit_code == 0
    explained = invoke("--policy", TEAM, "policy", "explain", "--principal", "agent", "--tool", "primes")
    assert explained.exit_code == 0 and explained.stderr == ""
    assert explained.stdout.startswith("decision: require_approval\n  because ")
    assert "signs off first" in explained.stdout
    as_json = invoke("policy", "explain", "--policy", TEAM, "--principal", "nobody", "--tool", "text-stats", "--json")
    assert json.loads(as_json.stdout)["action"] == "allow"

    checked = invoke("policy", "check", TEAM)
    assert checked.exit_code == 1
    assert f"{TEAM}: rules[2]: tool pattern 'calc' matches no registered tool" in checked.stdout.splitlines()
    good = tmp_path / "good.yaml"
    good.write_text("version: 1\nprincipals: {ann: {}}\nrules: [{tool: 'text-*', action: allow}]\n")
    assert invoke("policy", "check", str(good)).stdout == f"{good}: ok (1 rules, 1 principals)\n"
    assert invoke("policy", "check", DEFAULT_POLICY).stdout == f"{DEFAULT_POLICY}: ok (0 rules, 0 principals)\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nrules:\n  - tool: x\n    acton: allow\n")
    broken = invoke("policy", "check", str(bad))
    assert (broken.exit_code, broken.stdout) == (1, "")
    assert (
        broken.stderr.startswith("error [invalid_policy]: ")
        and "bad.yaml:4: rules.0.acton: unknown field" in broken.stderr
    )
    assert json.loads(invoke("policy", "schema").stdout) == policy_schema()


# -- hostile JSON and the one error boundary ----------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stdin", "last_line"),
    [
        ("[" * 100_000 + "]" * 100_000, None, "the input is nested deeper than 64 levels"),
        ("1" * 10_000, None, "the input holds a number of 10000 characters, over the 1000-character limit"),
        (
            '{"t": "\\ud800"}',
            None,
            "the input holds a lone surrogate (U+D800) in a string at /t: strings must be valid Unicode",
        ),
        ("-", b'{"t": "\xff"}', "not JSON: its bytes are not valid utf-8 (at byte 7)"),
        ("-", b"[" * 100_000, "the input is nested deeper than 64 levels"),
    ],
    ids=["deep", "huge-number", "surrogate", "stdin-not-utf8", "stdin-deep"],
)
def test_hostile_input_is_a_usage_error_without_a_traceback(raw: str, stdin: bytes | None, last_line: str) -> None:
    result = CliRunner().invoke(cli, ["call", "echo", "--input", raw], input=stdin, catch_exceptions=False)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == f"error [usage_error]: Invalid value for '--input': {last_line}"
    assert "Traceback" not in result.stderr


def test_a_guest_output_with_a_lone_surrogate_is_an_envelope(
    build_guest: Callable[[str], Path], tmp_path: Path
) -> None:
    manifest = tmp_path / "hostile.json"
    manifest.write_text('{"name": "hostile-json"}')
    assert invoke("register", str(build_guest("hostile_json")), "--manifest", str(manifest)).exit_code == 0
    result = invoke("call", "hostile-json", "--input", '"surrogate 0"')
    assert result.exit_code == 1 and result.stderr == ""
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "invalid_output" and "lone surrogate (U+D800)" in error["message"]
    assert invoke("audit", "verify").exit_code == 0


def test_internal_errors_are_logged_only_with_verbose(build_guest: Callable[[str], Path]) -> None:
    """Through the entry point (no test logging around it): a tampered artifact is an internal_error."""
    assert invoke("register", str(build_guest("echo")), "--manifest", str(write_manifest("echo"))).exit_code == 0
    home = Path(os.environ["GLOVEBOX_HOME"])
    shutil.rmtree(home / "cache" / "compiled")
    [blob] = (home / "blobs" / "sha256").glob("*.wasm")
    blob.chmod(0o644)
    blob.write_bytes(b"\0asm tampered")
    quiet = entry_point("call", "echo", "--input", "{}")
    assert quiet.returncode == 1 and quiet.stderr == ""
    assert json.loads(quiet.stdout)["error"]["code"] == "internal_error"
    loud = entry_point("-v", "call", "echo", "--input", "{}")
    assert loud.returncode == 1 and json.loads(loud.stdout)["error"]["code"] == "internal_error"
    assert "ERROR glovebox: artifact sha256:" in loud.stderr and "refusing to run it" in loud.stderr


def test_an_unexpected_exception_is_one_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object) -> list[str]:
        raise RuntimeError("keyring exploded")

    monkeypatch.setattr("glovebox.cli._main.Keyring.keys", broken)
    quiet = invoke("keys", "list")
    assert (quiet.exit_code, quiet.stdout) == (1, "")
    assert quiet.stderr == "error [internal_error]: unexpected RuntimeError; run with -v for details\n"
    loud = invoke("--verbose", "keys", "list")
    assert loud.exit_code == 1 and loud.stderr.splitlines()[-1] == "error [internal_error]: unexpected RuntimeError"
    assert "RuntimeError: keyring exploded" in loud.stderr


def write_manifest(name: str) -> Path:
    path = Path(os.environ["GLOVEBOX_HOME"]).parent / f"{name}.manifest.json"
    path.write_text(json.dumps({"name": name}))
    return path


def test_call_repeat_prints_the_last_envelope_and_the_warm_figure(build_guest: Callable[[str], Path]) -> None:
    assert invoke("register", str(build_guest("echo"))).exit_code == 0
    result = invoke("call", "echo", "--input", '{"n": 1}', "--repeat", "3")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["output"] == {"n": 1}  # one envelope: the last call's
    assert re.fullmatch(r"3 calls: first \d+\.\d{3} ms; warm \(the other 2\) p50 \d+\.\d{3} ms, min \d+\.\d{3} ms\n",
                        result.stderr)  # fmt: skip
    rows = invoke("audit", "tail", "-n", "10", "--json").stdout.splitlines()
    assert len(rows) == 3
    assert invoke("call", "echo", "--repeat", "0").exit_code == 2
