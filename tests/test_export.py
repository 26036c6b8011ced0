"""Tool definitions for OpenAI and Anthropic, and the README's agent loop."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import glovebox
from glovebox._cli import cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_openai_and_anthropic_shapes(runtime: glovebox.Runtime, build_example: Callable[[str], Path]) -> None:
    runtime.register(build_example("calc"))
    [info] = runtime.visible_tools()
    [openai] = glovebox.export_tools([info], "openai")
    assert openai == {
        "type": "function",
        "function": {"name": "calc", "description": info.description, "parameters": info.input_schema},
    }
    [anthropic] = glovebox.export_tools([info], "anthropic")
    assert anthropic == {"name": "calc", "description": info.description, "input_schema": info.input_schema}
    with pytest.raises(ValueError, match="unknown export format"):
        glovebox.export_tools([info], "gemini")


def test_names_are_sanitised(runtime: glovebox.Runtime, build_example: Callable[[str], Path]) -> None:
    info = runtime.register(build_example("calc"))
    assert glovebox.tool_name_map([info]) == {"calc": "calc"}
    from glovebox._export import export_name

    assert export_name("a.b c/d") == "a_b_c_d"
    assert len(export_name("x" * 100)) == 64
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", export_name("é"))


def test_cli_export_respects_the_principal(tmp_path: Path, build_example: Callable[[str], Path]) -> None:
    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    for name in ("calc", "primes", "stress"):
        assert run("register", str(build_example(name))).exit_code == 0
    team = str(Path(__file__).resolve().parents[1] / "policies" / "examples" / "team.yaml")
    agent = json.loads(run("--policy", team, "export", "--format", "anthropic", "--principal", "agent").stdout)
    assert sorted(tool["name"] for tool in agent) == ["calc", "primes"]  # stress is blocked
    assert all(set(tool) == {"name", "description", "input_schema"} for tool in agent)
    openai = json.loads(run("export", "--format", "openai").stdout)
    assert sorted(tool["function"]["name"] for tool in openai) == ["calc", "primes", "stress"]
    assert run("export", "--format", "nope").exit_code == 2


def test_readme_agent_loop_runs(runtime: glovebox.Runtime, build_example: Callable[[str], Path]) -> None:
    runtime.register(build_example("calc"))
    [code] = re.findall(r"```python\n(import json\nimport glovebox\n.*?)```", README, re.S)
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)
    reply = scope["reply"]
    assert isinstance(reply, dict)
    assert json.loads(reply["content"])["output"] == {"value": 14}
    assert scope["tools"] == glovebox.export_tools(runtime.visible_tools(), "openai")
