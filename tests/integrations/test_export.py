"""Tool definitions for OpenAI and Anthropic, and the export guide's agent loop."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result

import glovebox
from glovebox.cli._main import cli

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "export.md").read_text()


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


def test_exported_names_are_the_registered_names(runtime: glovebox.Runtime, build_guest: Callable[[str], Path]) -> None:
    longest = runtime.register(build_guest("echo"), {"name": "a" + "-_9" * 21})
    assert len(longest.name) == 64
    [openai] = glovebox.export_tools([longest], "openai")
    [anthropic] = glovebox.export_tools([longest], "anthropic")
    assert openai["function"]["name"] == anthropic["name"] == longest.name
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", longest.name)  # both APIs' name rule
    assert glovebox.tool_name_map([longest]) == {longest.name: longest.name}
    for name in ("text.stats", "a b", "x" * 65, "Calc", "é"):  # what the APIs would refuse cannot be registered
        with pytest.raises(glovebox.InvalidManifest):
            runtime.register(build_guest("echo"), {"name": name})


#: Input schemas whose root is not an object, with an input each admits.
NON_OBJECT_INPUTS = {
    "echo-string": ({"type": "string"}, "hello"),
    "echo-array": ({"type": "array", "items": {"$ref": "#/$defs/n"}, "$defs": {"n": {"type": "integer"}}}, [1, 2]),
    "echo-any": (True, {"anything": None}),
}


@pytest.fixture
def mixed(runtime: glovebox.Runtime, build_guest: Callable[[str], Path], build_example: Callable[[str], Path]) -> None:
    runtime.register(build_example("calc"))
    for name, (schema, _) in NON_OBJECT_INPUTS.items():
        runtime.register(build_guest("echo"), {"name": name, "input_schema": schema, "output_schema": True})


def test_exports_pass_the_sdks_own_tool_types(runtime: glovebox.Runtime, mixed: None) -> None:
    from anthropic.types import ToolParam
    from anthropic.types.tool_param import InputSchemaTyped
    from openai.types.chat import ChatCompletionToolParam
    from pydantic import TypeAdapter

    infos = runtime.visible_tools()
    assert len(infos) == 4
    for tool in glovebox.export_tools(infos, "openai"):
        assert TypeAdapter(ChatCompletionToolParam).validate_python(tool) == tool
        parameters = tool["function"]["parameters"]  # typed as any dict: the API itself wants an object root
        assert parameters["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(parameters)
    for tool in glovebox.export_tools(infos, "anthropic"):
        assert TypeAdapter(ToolParam).validate_python(tool) == tool
        # ToolParam also admits any dict; its typed branch is the object root the API checks.
        TypeAdapter(InputSchemaTyped).validate_python(tool["input_schema"])


def test_a_non_object_input_goes_through_input_and_back(runtime: glovebox.Runtime, mixed: None) -> None:
    infos = {info.name: info for info in runtime.visible_tools()}
    exported = {tool["name"]: tool["input_schema"] for tool in glovebox.export_tools(infos.values(), "anthropic")}
    assert exported["calc"] == infos["calc"].input_schema
    for name, (_, value) in NON_OBJECT_INPUTS.items():
        arguments = {"input": value}  # what a model sends for the exported definition
        jsonschema.validate(arguments, exported[name])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(value, exported[name])
        assert glovebox.tool_input(infos[name], arguments) == value
        result = runtime.call(name, glovebox.tool_input(infos[name], arguments))
        assert result.ok and result.output == value, result.to_dict()
    calc_arguments = {"expression": "2*(3+4)"}
    assert glovebox.tool_input(infos["calc"], calc_arguments) is calc_arguments
    assert runtime.call("calc", glovebox.tool_input(infos["calc"], calc_arguments)).output == {"value": 14}
    wrong = runtime.call("echo-string", glovebox.tool_input(infos["echo-string"], {"text": "hello"}))
    assert wrong.code == "invalid_input", "arguments of the wrong shape reach validation unchanged"


def test_cli_export_respects_the_principal(tmp_path: Path, build_example: Callable[[str], Path]) -> None:
    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    for name in ("calc", "primes", "stress"):
        assert run("register", str(build_example(name))).exit_code == 0
    team = str(Path(__file__).resolve().parents[2] / "policies" / "examples" / "team.yaml")
    agent = json.loads(run("--policy", team, "export", "--format", "anthropic", "--principal", "agent").stdout)
    assert sorted(tool["name"] for tool in agent) == ["calc", "primes"]  # stress is blocked
    assert all(set(tool) == {"name", "description", "input_schema"} for tool in agent)
    openai = json.loads(run("export", "--format", "openai").stdout)
    assert sorted(tool["function"]["name"] for tool in openai) == ["calc", "primes", "stress"]
    assert run("export", "--format", "nope").exit_code == 2


def test_the_guides_agent_loop_runs(runtime: glovebox.Runtime, build_example: Callable[[str], Path]) -> None:
    runtime.register(build_example("calc"))
    [code] = re.findall(r"```python\n(import json\nimport glovebox\n.*?)```", GUIDE, re.S)
    scope: dict[str, object] = {}
    exec(compile(code, "docs/guide/export.md", "exec"), scope)
    reply = scope["reply"]
    assert isinstance(reply, dict)
    assert json.loads(reply["content"])["output"] == {"value": 14}
    assert scope["tools"] == glovebox.export_tools(runtime.visible_tools(), "openai")
