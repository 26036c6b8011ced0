"""Hostile documents and artifacts: only documented errors come out, never another exception or a hang.

Hypothesis generates manifests (decoded data, TOML and JSON text), policies
(YAML text), grants (dicts and files) and mutated wasm bytes; the handcrafted
cases below are the ones the generated inputs first found (deep nesting, alias
bombs, unknown YAML tags, integers too long to convert).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import glovebox
from glovebox import InvalidArtifact, InvalidGrants, InvalidManifest, InvalidPolicy
from glovebox.model._grants import load_grants
from glovebox.model._manifest import load_manifest, parse_manifest
from glovebox.policy._loader import MAX_NODES, parse_policy

ROOT = Path(__file__).resolve().parents[2]
MANIFEST_TOML = (ROOT / "guest" / "examples" / "text-stats" / "glovebox.toml").read_text()
POLICY_TEXTS = [p.read_text() for p in sorted((ROOT / "policies").rglob("*.yaml"))]
FUZZ = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
)
MANIFEST_KEYS = ["name", "version", "description", "input_schema", "output_schema", "limits", "capabilities"]
manifest_like = st.dictionaries(st.sampled_from(MANIFEST_KEYS) | st.text(max_size=8), json_values, max_size=6)
GRANT_KEYS = ["http", "http_limits", "secrets", "host", "url", "methods", "paths", "ports", "scheme"]
grants_like = st.dictionaries(
    st.sampled_from(GRANT_KEYS[:3]),
    st.lists(st.dictionaries(st.sampled_from(GRANT_KEYS), json_values, max_size=4), max_size=3) | json_values,
    max_size=3,
)


def mutate(text: str, data: st.DataObject) -> str:
    """Delete, insert or replace a few characters of ``text``."""
    chars = list(text)
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(chars)))
        op = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        new = data.draw(st.sampled_from(list("[]{}\"'=:,-&*!#\n \t.0\\") + ["\x00", "\ud800", "é"]))
        if op == "delete" and at < len(chars):
            del chars[at]
        elif op == "insert" or at == len(chars):
            chars.insert(at, new)
        else:
            chars[at] = new
    return "".join(chars)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


# -- manifests -----------------------------------------------------------------------------------


@pytest.mark.slow  # hypothesis: seconds of generated inputs
@FUZZ
@given(data=json_values | manifest_like)
def test_any_decoded_manifest_parses_or_is_invalid(data: Any) -> None:
    try:
        parse_manifest(data)
    except InvalidManifest:
        pass


@pytest.mark.slow  # hypothesis: seconds of generated inputs
@FUZZ
@given(data=st.data())
def test_mutated_manifest_text_loads_or_is_invalid(tmp_path: Path, data: st.DataObject) -> None:
    for path, text in ((tmp_path / "m.toml", MANIFEST_TOML), (tmp_path / "m.json", json.dumps({"name": "x"}))):
        try:
            load_manifest(write(path, mutate(text, data)))
        except InvalidManifest:
            pass


# -- policies ------------------------------------------------------------------------------------


@pytest.mark.slow  # hypothesis: seconds of generated inputs
@FUZZ
@given(data=st.data())
def test_mutated_policy_text_parses_or_is_invalid(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(POLICY_TEXTS) | st.text(max_size=200))
    try:
        parse_policy(mutate(text, data))
    except InvalidPolicy:
        pass


# -- grants --------------------------------------------------------------------------------------


@pytest.mark.slow  # hypothesis: seconds of generated inputs
@FUZZ
@given(data=grants_like | st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_any_grants_dict_loads_or_is_invalid(data: dict[str, Any]) -> None:
    try:
        load_grants(data)
    except InvalidGrants:
        pass


@pytest.mark.slow  # hypothesis: seconds of generated inputs
@FUZZ
@given(data=grants_like, suffix=st.sampled_from([".json", ".toml"]), fuzz=st.data())
def test_mutated_grants_files_load_or_are_invalid(tmp_path: Path, data: Any, suffix: str, fuzz: st.DataObject) -> None:
    text = json.dumps(data) if suffix == ".json" else "[[http]]\nhost = 'api.example.com'\nmethods = ['GET']\n"
    try:
        load_grants(write(tmp_path / f"g{suffix}", mutate(text, fuzz)))
    except InvalidGrants:
        pass


# -- what the generated inputs found ---------------------------------------------------------------

DEEP = 100_000


@pytest.mark.parametrize(
    ("suffix", "text"),
    [(".json", "[" * DEEP + "]" * DEEP), (".toml", "a = " + "[" * DEEP + "]" * DEEP), (".toml", "a = " + "{b=" * DEEP)],
)
def test_deeply_nested_files_are_invalid_not_a_recursion_error(tmp_path: Path, suffix: str, text: str) -> None:
    with pytest.raises(InvalidManifest, match="nested too deeply"):
        load_manifest(write(tmp_path / f"m{suffix}", text))
    with pytest.raises(InvalidGrants, match="nested too deeply"):
        load_grants(write(tmp_path / f"g{suffix}", text))


def test_an_integer_too_long_to_convert_is_invalid(tmp_path: Path) -> None:
    text = '{"name": "x", "limits": {"fuel": 1' + "0" * 5000 + "}}"
    with pytest.raises(InvalidManifest, match="4300 digits"):
        load_manifest(write(tmp_path / "m.json", text))
    with pytest.raises(InvalidGrants, match="4300 digits"):
        load_grants(write(tmp_path / "g.json", text))


def test_a_deeply_nested_policy_is_invalid() -> None:
    with pytest.raises(InvalidPolicy, match="nested too deeply"):
        parse_policy("version: 1\nx: " + "[" * DEEP + "]" * DEEP)


def test_a_yaml_alias_bomb_is_refused_before_it_expands() -> None:
    # Nine levels of nine aliases stand for 9**9 (387 million) values.
    lines = ["version: 1", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    with pytest.raises(InvalidPolicy, match=f"more than {MAX_NODES} values"):
        parse_policy("\n".join(lines))


def test_a_policy_with_a_few_shared_values_still_parses() -> None:
    text = "version: 1\ndefault: &d {action: allow}\nx: *d\n"
    with pytest.raises(InvalidPolicy, match="unknown field"):
        parse_policy(text)  # reaches the model: the aliases alone are not refused


@pytest.mark.parametrize("tag", ["!!binary AAA", "!!python/object:os.system ls", "!!timestamp 2020-13-45"])
def test_unknown_or_malformed_yaml_tags_are_invalid(tag: str) -> None:
    with pytest.raises(InvalidPolicy, match="not valid YAML"):
        parse_policy(f"version: 1\nx: {tag}\n")


# -- mutated wasm at registration ------------------------------------------------------------------


@pytest.fixture(scope="module")
def echo_bytes(build_guest: Callable[[str], Path]) -> bytes:
    return build_guest("echo").read_bytes()


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_components_register_or_are_invalid_artifacts(
    tmp_path: Path, echo_bytes: bytes, data: st.DataObject
) -> None:
    blob = bytearray(echo_bytes)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(blob) - 1))
        op = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        if op == "flip":
            blob[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "insert":
            blob.insert(at, data.draw(st.integers(0, 255)))
        else:
            del blob[at]
    # tmp_path is shared by every example: each gets its own home.
    example = Path(tempfile.mkdtemp(dir=tmp_path))
    wasm = example / "mutant.wasm"
    wasm.write_bytes(bytes(blob))
    with glovebox.Runtime(home=example / "home") as rt:
        try:
            rt.register(wasm, manifest={"name": "mutant"})
        except InvalidArtifact:
            return
        # A mutant that registers may do anything a tool may: any documented code but a host failure.
        code = rt.call("mutant", {"a": 1}).code
        assert code is None or (code in glovebox.ERROR_CODES and code != "internal_error"), code
