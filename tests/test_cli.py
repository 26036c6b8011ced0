"""The CLI contract: commands, the envelope on stdout, exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from glovebox._cli import cli


def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "glovebox", *args], capture_output=True, text=True, input=input, timeout=300
    )


def test_register_tools_call_roundtrip(build_example: Callable[[str], Path]) -> None:
    wasm = build_example("text-stats")
    registered = run("register", str(wasm))
    assert registered.returncode == 0, registered.stderr
    assert registered.stdout.startswith("registered text-stats@1.0.0 sha256:")

    listed = run("tools", "--json")
    assert listed.returncode == 0
    [tool] = json.loads(listed.stdout)
    assert tool["name"] == "text-stats" and tool["digest"].startswith("sha256:")
    assert "text-stats" in run("tools").stdout

    ok = run("call", "text-stats", "--input", '{"text": "a b\\nc"}', "--principal", "tester")
    assert ok.returncode == 0, ok.stderr
    envelope = json.loads(ok.stdout)
    assert envelope["ok"] is True
    assert envelope["output"] == {"characters": 5, "words": 3, "lines": 2, "bytes": 5}
    assert envelope["meta"]["principal"] == "tester"
    for key in ("call_id", "tool", "version", "digest", "duration_ms", "fuel_used"):
        assert key in envelope["meta"]

    bad = run("call", "text-stats", "--input", '{"text": 5}')
    assert bad.returncode == 1
    failed = json.loads(bad.stdout)
    assert failed["ok"] is False
    assert failed["error"]["code"] == "invalid_input"
    assert set(failed["error"]) == {"code", "message", "retryable", "details"}

    stdin = run("call", "text-stats", "--input", "-", input='{"text": "x"}')
    assert stdin.returncode == 0 and json.loads(stdin.stdout)["output"]["words"] == 1


def test_unknown_tool_exits_1_with_envelope() -> None:
    result = run("call", "nope", "--input", "{}")
    assert result.returncode == 1
    assert json.loads(result.stdout)["error"]["code"] == "tool_not_found"


def test_usage_errors_exit_2() -> None:
    assert run("call", "x", "--input", "{not json").returncode == 2
    assert "not JSON" in run("call", "x", "--input", "{not json").stderr
    assert run("call", "x").returncode == 2
    assert run("call", "x", "--input", "{}", "--bogus").returncode == 2
    assert run("frobnicate").returncode == 2


def test_register_refusal_exits_1(tmp_path: Path) -> None:
    junk = tmp_path / "junk.wasm"
    junk.write_text("hello")
    result = run("register", str(junk))
    assert result.returncode == 1
    assert "error [invalid_artifact]" in result.stderr and "junk.wasm" in result.stderr


def test_build_error_is_verbatim_with_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "broken.c"
    src.write_text('#include "glovebox.h"\nint gb_tool(const char *i, size_t n, gb_buf *o) {\n  return nope;\n}\n')
    result = run("build", str(src), "-o", str(tmp_path / "out.wasm"))
    assert result.returncode == 1
    assert "error [build_failed]" in result.stderr
    assert "broken.c:3:" in result.stderr and "nope" in result.stderr
    assert not (tmp_path / "out.wasm").exists()


def test_build_refuses_stdio_with_a_hint(tmp_path: Path) -> None:
    src = tmp_path / "printer.c"
    src.write_text(
        '#include "glovebox.h"\nint gb_tool(const char *i, size_t n, gb_buf *o) {\n'
        '  printf("hi\\n");\n  return gb_buf_puts(o, "1"), GB_OK;\n}\n'
    )
    result = CliRunner().invoke(cli, ["build", str(src), "-o", str(tmp_path / "p.wasm")])
    assert result.exit_code == 1
    assert "fd_write" in result.output and "gb_log" in result.output


def test_home_option_overrides_env(tmp_path: Path, build_example: Callable[[str], Path]) -> None:
    home = tmp_path / "elsewhere"
    runner = CliRunner()
    assert runner.invoke(cli, ["--home", str(home), "register", str(build_example("calc"))]).exit_code == 0
    assert (home / "registry.sqlite").is_file()
    assert "calc" in runner.invoke(cli, ["--home", str(home), "tools"]).output
    assert "no tools registered" in runner.invoke(cli, ["tools"]).output


def test_registry_commands(tmp_path: Path, build_example: Callable[[str], Path]) -> None:
    wasm = tmp_path / "calc.wasm"
    wasm.write_bytes(build_example("calc").read_bytes())
    (tmp_path / "calc.glovebox.toml").write_text(build_example("calc").with_name("calc.glovebox.toml").read_text())
    keys = tmp_path / "keys"
    assert run("keys", "generate", "release", "--dir", str(keys)).returncode == 0
    assert run("keys", "generate", "release", "--dir", str(keys)).returncode == 1  # never overwrites
    assert "no trusted keys" in run("keys", "list").stdout
    assert run("keys", "trust", str(keys / "release.pub")).stdout.startswith("trusted release:")
    assert run("keys", "list").stdout.startswith("release:")

    signed = run("sign", str(wasm), "--key", str(keys / "release.key"))
    assert signed.returncode == 0 and signed.stdout.strip().endswith("calc.wasm.sig")
    verified = run("verify", str(wasm))
    assert verified.returncode == 0 and "signed by release:" in verified.stdout
    assert run("register", str(wasm)).returncode == 0

    shown = json.loads(run("show", "calc").stdout)
    assert shown["signer"].startswith("release:") and shown["version"] == "1.0.0"
    assert run("show", "nope").returncode == 1

    assert "DEPRECATED: use v2" in (run("deprecate", "calc@1.0.0", "-m", "use v2").stdout + run("tools").stdout)
    assert run("tools", "--no-deprecated", "--json").stdout.strip() == "[]"
    assert run("remove", "calc").returncode == 2  # a bare name needs --all
    assert run("remove", "calc@1.0.0").stdout.strip() == "removed calc@1.0.0"
    assert run("remove", "calc@1.0.0").returncode == 1

    wasm.write_bytes(wasm.read_bytes() + b"\0")
    tampered = run("verify", str(wasm))
    assert tampered.returncode == 1 and "error [invalid_signature]" in tampered.stderr


def test_policy_commands(build_example: Callable[[str], Path], tmp_path: Path) -> None:
    from glovebox.policy import policy_schema

    root = Path(__file__).resolve().parents[1]
    team = str(root / "policies" / "examples" / "team.yaml")
    assert run("register", str(build_example("text-stats"))).returncode == 0
    assert run("register", str(build_example("primes"))).returncode == 0
    explained = run("--policy", team, "policy", "explain", "--principal", "agent", "--tool", "primes")
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.startswith("decision: require_approval") and "signs off first" in explained.stdout
    as_json = run("policy", "explain", "--policy", team, "--principal", "nobody", "--tool", "text-stats", "--json")
    assert json.loads(as_json.stdout)["action"] == "allow"
    checked = run("policy", "check", team)
    assert checked.returncode == 1 and "rules[2]: tool pattern 'calc' matches no registered tool" in checked.stdout
    good = tmp_path / "good.yaml"
    good.write_text("version: 1\nprincipals: {ann: {}}\nrules: [{tool: 'text-*', action: allow}]\n")
    assert run("policy", "check", str(good)).returncode == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nrules:\n  - tool: x\n    acton: allow\n")
    broken = run("policy", "check", str(bad))
    assert broken.returncode == 1 and "bad.yaml:4: rules.0.acton: unknown field" in broken.stderr
    assert json.loads(run("policy", "schema").stdout) == policy_schema()


def test_policy_denial_in_cli_call(build_example: Callable[[str], Path]) -> None:
    root = Path(__file__).resolve().parents[1]
    assert run("register", str(build_example("text-stats"))).returncode == 0
    denied = run("--policy", str(root / "policies" / "default.yaml"), "call", "text-stats", "--input", '{"text": ""}')
    assert denied.returncode == 1 and json.loads(denied.stdout)["error"]["code"] == "permission_denied"
    runner = CliRunner()
    result = runner.invoke(cli, ["policy", "check", str(root / "policies" / "default.yaml")])
    assert result.exit_code == 0 and "ok (0 rules" in result.output
