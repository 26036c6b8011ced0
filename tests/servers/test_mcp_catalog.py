"""What a principal's visible read tools make of resources, templates and prompts (no server needed)."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from glovebox.model._manifest import Manifest
from glovebox.model._result import ToolInfo
from glovebox.servers._mcp import mcp_tool
from glovebox.servers._mcpcatalog import catalog_of


def info(name: str, schema: dict[str, Any], kind: str = "mcp-remote") -> ToolInfo:
    manifest = Manifest.model_construct(name=name, input_schema=schema, kind=kind)
    return ToolInfo(manifest=manifest, digest="sha256:" + "0" * 64, registered_at="", size_bytes=0)


def reader(prefix: str, uris: list[str], templates: list[str] = []) -> ToolInfo:  # noqa: B006 (never mutated)
    listing = {
        "resources": [{"uri": uri, "name": uri} for uri in uris],
        "resourceTemplates": [{"uriTemplate": t, "name": t} for t in templates],
    }
    return info(f"{prefix}-read-resource", {"type": "object", "x-glovebox-resources": listing})


def prompter(prefix: str, names: list[str]) -> ToolInfo:
    prompts = [{"name": name, "description": name} for name in names]
    return info(f"{prefix}-get-prompt", {"type": "object", "x-glovebox-prompts": prompts})


def test_each_uri_is_read_by_the_server_that_lists_it_or_whose_template_fits() -> None:
    catalog = catalog_of([reader("b", ["b://one"], ["b://items/{id}"]), reader("a", ["a://one"])])
    assert catalog.reader_of("a://one") == "a-read-resource"
    assert catalog.reader_of("b://items/7") == "b-read-resource"
    assert catalog.reader_of("b://items/7/more") is None  # one template expression is one segment
    assert catalog.reader_of("c://unknown") is None  # two servers: no guessing
    assert catalog_of([reader("a", [])]).reader_of("a://unlisted") == "a-read-resource"  # the only one


def test_a_prompt_two_servers_list_is_listed_once_under_its_name_then_prefixed() -> None:
    catalog = catalog_of([prompter("zeta", ["greet"]), prompter("alpha", ["greet", "other"])])
    assert [p.listed["name"] for p in catalog.prompts] == ["greet", "other", "zeta-greet"]
    chosen = catalog.prompt("zeta-greet")
    assert chosen is not None and chosen.remote == "greet" and chosen.tool == "zeta-get-prompt"


def test_only_remote_read_tools_count_and_their_listings_stay_out_of_the_tool_schema() -> None:
    wasm = info("x-read-resource", {"type": "object", "x-glovebox-resources": {"resources": [{"uri": "x://"}]}}, "wasm")
    assert catalog_of([wasm]).resources == []
    completer = info("a-complete", {"type": "object"})
    catalog = catalog_of([prompter("a", ["p"]), completer])
    assert catalog.completer(types.PromptReference(type="ref/prompt", name="p")) == "a-complete"
    assert catalog.completer(types.PromptReference(type="ref/prompt", name="q")) is None
    shown = mcp_tool(reader("a", ["a://one"]))
    assert "x-glovebox-resources" not in shown.input_schema


def test_an_entry_that_is_not_valid_mcp_is_left_out_not_the_list() -> None:
    from glovebox.servers._mcpcatalog import _valid

    found = _valid(types.Resource, [{"uri": "a://one", "name": "one"}, {"name": "no uri"}])
    assert [str(r.uri) for r in found] == ["a://one"]
