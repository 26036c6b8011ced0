"""The input schema of a JavaScript or TypeScript tool read from its types when its manifest gives none.

Each tool is built from source (esbuild, the engine, the snapshot, and the
TypeScript checker for its types), registered and called: a schema the build
claims to have read is one the host enforces.
"""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path
from typing import Any

import pytest

import glovebox

TS_TOOL = """\
/** Repeat a word. */
interface Input {
  /** The word to repeat. */
  word: string;
  times?: number;
  style: "plain" | "loud";
  tags: string[];
}

/** Repeat a word, plainly or loudly.
 *
 * The rest of this comment is not the description. */
export default function repeat(input: Input): { said: string } {
  const said = Array(input.times ?? 1).fill(input.word).join(" ");
  return { said: input.style === "loud" ? said.toUpperCase() : said };
}
"""

JSDOC_TOOL = """\
/**
 * Greet someone.
 * @param {{name: string, polite?: boolean}} input
 */
export default function greet(input) {
  return (input.polite ? "Good day, " : "Hi, ") + input.name;
}
"""


def built(tmp_path: Path, name: str, source: str, manifest: str | None = None) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path / name.split(".")[0]
    folder.mkdir()
    src = folder / name
    src.write_text(source)
    if manifest is not None:
        (folder / "glovebox.toml").write_text(manifest)
    out = glovebox.build(src, tmp_path / "out" / f"{folder.name}.wasm")
    generated = tomllib.loads(out.with_name(f"{out.stem}.glovebox.toml").read_text())
    return out, generated


@pytest.mark.system  # a real JavaScript build
def test_a_typescript_tools_input_schema_comes_from_its_parameter_type(_isolated_env: Path, tmp_path: Path) -> None:
    out, manifest = built(tmp_path, "tool.ts", TS_TOOL)
    assert manifest["input_schema"] == {
        "type": "object",
        "properties": {
            "word": {"type": "string", "description": "The word to repeat."},
            "times": {"type": "number"},
            "style": {"enum": ["plain", "loud"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["word", "style", "tags"],
        "additionalProperties": False,
    }
    assert manifest["description"] == "Repeat a word, plainly or loudly."
    with glovebox.Runtime() as rt, warnings.catch_warnings():
        warnings.simplefilter("error", glovebox.ManifestWarning)  # it has a schema: registering does not warn
        rt.register(out)
        ok = rt.call("tool", {"word": "hey", "times": 2, "style": "loud", "tags": []})
        wrong = rt.call("tool", {"word": "hey", "style": "shouty", "tags": []})
        extra = rt.call("tool", {"word": "hey", "style": "plain", "tags": [], "sudo": True})
    assert ok.ok and ok.output == {"said": "HEY HEY"}
    assert wrong.error is not None and wrong.error.code == "invalid_input" and wrong.meta["fuel_used"] == 0
    assert "/style" in wrong.error.message
    assert extra.error is not None and extra.error.code == "invalid_input"


@pytest.mark.system  # a real JavaScript build
def test_a_javascript_tools_input_schema_comes_from_its_jsdoc(_isolated_env: Path, tmp_path: Path) -> None:
    out, manifest = built(tmp_path, "greet.js", JSDOC_TOOL)
    assert manifest["input_schema"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "polite": {"type": "boolean"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    with glovebox.Runtime() as rt:
        rt.register(out)
        ok = rt.call("greet", {"name": "Ada", "polite": True})
        refused = rt.call("greet", {"polite": True})
    assert ok.ok and ok.output == "Good day, Ada"
    assert refused.error is not None and refused.error.code == "invalid_input"


@pytest.mark.system  # a real JavaScript build
@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("export default (input: { when: Date }) => 1;\n", r"tool\.ts:1:17: the input type .*JSON has no Date"),
        ("export default (input: { n: bigint }) => 1;\n", r"tool\.ts:1:17: the input type bigint is a bigint"),
        ("export default (input: { f: () => void }) => 1;\n", r"tool\.ts:1:17: the input type .* is a function"),
        (
            "type Tree = { kids: Tree[] };\nexport default (input: Tree) => 1;\n",
            r"tool\.ts:2:17: the input type Tree is recursive: give input_schema in glovebox\.toml",
        ),
    ],
)
def test_an_input_type_json_cannot_carry_is_a_build_error_naming_the_line(
    _isolated_env: Path, tmp_path: Path, source: str, message: str
) -> None:
    with pytest.raises(glovebox.BuildError, match=message):
        built(tmp_path, "tool.ts", source)
    assert not (tmp_path / "out").exists()


@pytest.mark.system  # a real JavaScript build
def test_a_schema_in_the_manifest_wins_and_the_types_are_not_read(_isolated_env: Path, tmp_path: Path) -> None:
    manifest = 'name = "when"\n[input_schema]\ntype = "object"\n'
    out, generated = built(tmp_path, "tool.ts", "export default (input: { when: Date }) => 1;\n", manifest)
    assert generated["input_schema"] == {"type": "object"}


@pytest.mark.system  # a real JavaScript build
def test_an_untyped_tool_accepts_any_input_and_registering_it_warns(_isolated_env: Path, tmp_path: Path) -> None:
    out, generated = built(tmp_path, "tool.js", "export default (input) => input;\n")
    assert "input_schema" not in generated
    with glovebox.Runtime() as rt:
        with pytest.warns(glovebox.ManifestWarning):
            rt.register(out)
        assert rt.call("tool", [1, "two"]).output == [1, "two"]


@pytest.mark.system  # a real JavaScript build
def test_tool_ts_built_from_its_own_directory_is_named_after_it(
    _isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "lookup"
    folder.mkdir()
    (folder / "tool.ts").write_text("export default (input: { key: string }) => input.key;\n")
    monkeypatch.chdir(folder)
    out = glovebox.build(Path("tool.ts"), tmp_path / "lookup.wasm")
    assert tomllib.loads(out.with_name("lookup.glovebox.toml").read_text())["name"] == "lookup"
