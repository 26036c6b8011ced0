import json
from pathlib import Path

import pytest

from glovebox import InvalidManifest, Limits, Manifest
from glovebox.model._manifest import HOST_MAXIMA, find_manifest, load_manifest, parse_manifest

EXAMPLES = Path(__file__).resolve().parents[2] / "guest" / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*/glovebox.toml")), ids=lambda p: p.parent.name)
def test_shipped_example_manifests_parse(path: Path) -> None:
    manifest = load_manifest(path)
    assert manifest.name == path.parent.name
    manifest.check_within(HOST_MAXIMA)


def test_defaults_for_a_bare_artifact() -> None:
    manifest = Manifest.default_for(Path("/x/My Tool.wasm"))
    assert manifest.name == "my-tool"
    assert manifest.version == "0.0.0"
    assert manifest.input_schema is True and manifest.output_schema is True
    assert manifest.limits == Limits()
    assert manifest.capabilities.http == [] and manifest.required_scopes == []


def test_unknown_field_is_named(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text('name = "x"\ncolour = "blue"\n')
    with pytest.raises(InvalidManifest) as info:
        load_manifest(path)
    assert "colour" in info.value.message and str(path) in info.value.message


def test_unknown_limit_field_is_named() -> None:
    with pytest.raises(InvalidManifest, match=r"limits\.memory"):
        parse_manifest({"name": "x", "limits": {"memory": 5}})


def test_bad_json_schema_is_refused_with_its_location() -> None:
    with pytest.raises(InvalidManifest, match="input_schema.*not a valid JSON Schema"):
        parse_manifest({"name": "x", "input_schema": {"type": 12}})


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("name = \n")
    with pytest.raises(InvalidManifest, match="broken.toml"):
        load_manifest(path)


def test_json_manifest(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"name": "j", "version": "1.2.3"}')
    assert load_manifest(path).version == "1.2.3"


@pytest.mark.parametrize("name", ["", "UPPER", "-dash", "a" * 65, "sp ace"])
def test_bad_names(name: str) -> None:
    with pytest.raises(InvalidManifest, match="name"):
        parse_manifest({"name": name})


def test_limits_above_host_maxima_are_refused() -> None:
    manifest = parse_manifest({"name": "x", "limits": {"timeout_ms": HOST_MAXIMA.timeout_ms + 1}})
    with pytest.raises(InvalidManifest, match="limits.timeout_ms"):
        manifest.check_within(HOST_MAXIMA)


def test_tighter_takes_the_minimum() -> None:
    a = Limits(fuel=10, memory_bytes=1 << 20)
    b = Limits(fuel=20, memory_bytes=1 << 19, timeout_ms=5)
    assert a.tighter(b) == Limits(fuel=10, memory_bytes=1 << 19, timeout_ms=5)


def test_manifest_lookup_order(tmp_path: Path) -> None:
    wasm = tmp_path / "tool.wasm"
    assert find_manifest(wasm) is None
    (tmp_path / "glovebox.toml").write_text('name = "dir"\n')
    assert find_manifest(wasm) == tmp_path / "glovebox.toml"
    (tmp_path / "tool.glovebox.toml").write_text('name = "stem"\n')
    assert find_manifest(wasm) == tmp_path / "tool.glovebox.toml"


def test_kind_defaults_to_wasm_and_stays_out_of_the_canonical_text() -> None:
    """Signatures cover ``to_json``: a wasm manifest's text is what it was before ``kind`` existed."""
    plain = Manifest(name="t")
    assert plain.kind == "wasm" and '"kind"' not in plain.to_json()
    remote = Manifest(name="t", kind="mcp-remote")
    assert json.loads(remote.to_json())["kind"] == "mcp-remote"
    with pytest.raises(InvalidManifest, match="kind"):
        parse_manifest({"name": "t", "kind": "docker"})
