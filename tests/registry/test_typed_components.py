"""Any component is a tool: each typed export a tool, schemas from WIT, hostile components answered with their codes.

The components are built here from WIT and hand-written WAT (``tests/typedguests.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import glovebox
from tests.typedguests import TYPED, dummy_component, wat_component, with_package_docs


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    return wat_component(TYPED / "hostile.wit", "hostile", TYPED / "hostile.wat", tmp_path / "hostile.wasm")


def test_each_export_is_a_tool_with_schemas(runtime: glovebox.Runtime, hostile: Path) -> None:
    infos = runtime.register_all(hostile)
    names = [info.name for info in infos]
    assert names == [
        "hostile-bad-utf8",
        "hostile-huge",
        "hostile-bad-enum",
        "hostile-bad-char",
        "hostile-wide-u8",
        "hostile-spin",
        "hostile-echo-str",
        "hostile-count",
    ]
    echo = next(i for i in infos if i.name == "hostile-echo-str")
    assert echo.kind == "component"
    assert echo.input_schema == {
        "type": "object",
        "properties": {"s": {"type": "string"}},
        "required": ["s"],
        "additionalProperties": False,
    }
    assert echo.output_schema == {"type": "string"}
    assert runtime.call("hostile-echo-str", {"s": "héllo"}).output == "héllo"
    assert runtime.call("hostile-count", {"items": [1, 2, 3]}).output == 3


def test_register_answers_the_first_tool(runtime: glovebox.Runtime, hostile: Path) -> None:
    assert runtime.register(hostile).name == "hostile-bad-utf8"
    assert len(runtime.tools()) == 8


@pytest.mark.parametrize(
    ("tool", "code"),
    [
        ("hostile-bad-utf8", "invalid_output"),  # a string that is not UTF-8
        ("hostile-huge", "output_too_large"),  # a list of a million bytes, over the 1 MiB output
        ("hostile-bad-enum", "invalid_output"),  # an enum case past the cases
        ("hostile-bad-char", "invalid_output"),  # a surrogate for a char
        ("hostile-spin", "fuel_exhausted"),
    ],
)
def test_hostile_results_end_with_their_codes(runtime: glovebox.Runtime, hostile: Path, tool: str, code: str) -> None:
    runtime.register_all(hostile, manifest={"name": "hostile", "limits": {"fuel": 10_000_000}})
    result = runtime.call(tool, {})
    assert not result.ok
    assert result.error is not None and result.error.code == code, result.to_dict()


def test_an_out_of_range_integer_result_keeps_its_type(runtime: glovebox.Runtime, hostile: Path) -> None:
    runtime.register_all(hostile)
    result = runtime.call("hostile-wide-u8", {})
    assert result.output == 0xFF  # the canonical ABI keeps the low byte: never past the schema's maximum


def test_a_deep_variant_input_is_refused_by_its_depth_not_a_crash(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    deep = "u8"
    for _ in range(30):
        deep = f"option<{deep}>"
    wit = _wit(tmp_path, f"package test:deep@0.1.0;\nworld deep {{ export f: func(v: {deep}); }}\n")
    runtime.register_all(dummy_component(wit, "deep", tmp_path / "deep.wasm"))
    value: object = 1
    for _ in range(5_000):  # past Python's recursion limit
        value = {"some": value}
    refused = runtime.call("deep-f", {"v": value})
    assert refused.error is not None and refused.error.code == "invalid_input"
    fits: object = 1
    for _ in range(29):
        fits = {"some": fits}
    ran = runtime.call("deep-f", {"v": fits})
    assert ran.error is not None and ran.error.code == "guest_trap"  # converted, then the stub traps


def test_bad_inputs_name_the_path(runtime: glovebox.Runtime, hostile: Path) -> None:
    runtime.register_all(hostile)
    out_of_range = runtime.call("hostile-count", {"items": [1, 2**32]})
    assert out_of_range.error is not None and out_of_range.error.code == "invalid_input"
    assert out_of_range.error.details["path"] == "/items/1"
    surrogate = runtime.call("hostile-echo-str", {"s": "a\ud800"})
    assert surrogate.error is not None and surrogate.error.code == "invalid_input"
    extra = runtime.call("hostile-echo-str", {"s": "a", "t": 1})
    assert extra.error is not None and extra.error.code == "invalid_input"
    deep: object = 1
    for _ in range(100):
        deep = [deep]
    nested = runtime.call("hostile-count", {"items": deep})
    assert nested.error is not None and nested.error.code == "invalid_input"


def test_huge_input_list_is_refused_by_its_size(runtime: glovebox.Runtime, hostile: Path) -> None:
    runtime.register_all(hostile)
    result = runtime.call("hostile-count", {"items": [7] * 2_500_000})  # over the 4 MiB input bound
    assert result.error is not None and result.error.code == "invalid_input"
    assert runtime.call("hostile-count", {"items": [7] * 100_000}).output == 100_000


def test_descriptions_come_from_package_docs_else_the_manifest(
    runtime: glovebox.Runtime, hostile: Path, tmp_path: Path
) -> None:
    documented = with_package_docs(hostile, TYPED / "hostile.wit", tmp_path / "documented.wasm")
    infos = {i.name: i for i in runtime.register_all(documented, manifest={"name": "doc", "description": "fallback"})}
    assert infos["doc-bad-utf8"].description == "Answers a string that is not UTF-8."
    assert infos["doc-count"].description == "Answers the number of items it was given."
    plain = {i.name: i for i in runtime.register_all(hostile, manifest={"name": "plain", "description": "fallback"})}
    assert plain["plain-count"].description == "fallback"


def test_a_manifest_gives_limits_and_version_to_every_tool(runtime: glovebox.Runtime, hostile: Path) -> None:
    infos = runtime.register_all(hostile, manifest={"name": "h", "version": "1.2.3", "limits": {"fuel": 5_000}})
    assert {i.version for i in infos} == {"1.2.3"}
    assert {i.manifest.limits.fuel for i in infos} == {5_000}
    with pytest.raises(glovebox.InvalidManifest, match="come from the component's WIT types"):
        runtime.register_all(hostile, manifest={"name": "s", "input_schema": {"type": "object"}})


def _wit(tmp_path: Path, text: str) -> Path:
    wit = tmp_path / "wit"
    wit.mkdir(exist_ok=True)
    (wit / "world.wit").write_text(text)
    return wit


def test_resources_are_refused_with_the_reason(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    wit = _wit(
        tmp_path,
        """package test:res@0.1.0;
interface counters {
    resource counter {
        constructor(start: u32);
        add: func(n: u32) -> u32;
    }
}
world res { export counters; }
""",
    )
    component = dummy_component(wit, "res", tmp_path / "res.wasm")
    with pytest.raises(glovebox.InvalidArtifact, match="resource") as caught:
        runtime.register_all(component)
    assert "counter" in str(caught.value)
    assert runtime.tools() == []


def test_a_resource_parameter_is_refused(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    wit = _wit(
        tmp_path,
        """package test:handle@0.1.0;
interface files { resource file; }
world handle {
    use files.{file};
    export open: func(name: string) -> file;
}
""",
    )
    component = dummy_component(wit, "handle", tmp_path / "handle.wasm")
    with pytest.raises(glovebox.InvalidArtifact, match=r"open: the result is a resource handle"):
        runtime.register_all(component)


def test_types_nested_too_deeply_are_refused(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    deep = "u8"
    for _ in range(40):
        deep = f"option<{deep}>"
    wit = _wit(tmp_path, f"package test:deep@0.1.0;\nworld deep {{ export f: func(v: {deep}); }}\n")
    component = dummy_component(wit, "deep", tmp_path / "deep.wasm")
    with pytest.raises(glovebox.InvalidArtifact, match="more than 32 deep"):
        runtime.register_all(component)


def test_same_function_in_two_interfaces_is_qualified(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    wit = _wit(
        tmp_path,
        """package test:two@0.1.0;
interface en { hello: func() -> string; }
interface fr { hello: func() -> string; }
world two { export en; export fr; export bye: func(); }
""",
    )
    component = dummy_component(wit, "two", tmp_path / "two.wasm")
    names = sorted(i.name for i in runtime.register_all(component))
    assert names == ["two-bye", "two-en-hello", "two-fr-hello"]


def test_cli_register_lists_every_tool(hostile: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from glovebox.cli._main import cli

    result = CliRunner().invoke(cli, ["register", str(hostile)])
    assert result.exit_code == 0, result.output
    assert result.output.count("registered hostile-") == 8
    listed = CliRunner().invoke(cli, ["register", str(hostile), "--json"])
    assert listed.exit_code == 0, listed.output
    assert [tool["name"] for tool in json.loads(listed.output)][0] == "hostile-bad-utf8"
