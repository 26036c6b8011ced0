"""The one import step (``importers._batch``): an import whose second tool is refused registers nothing.

For each kind — an OpenAPI document, a GraphQL schema, a remote MCP server (the
SDK's ``MCPServer`` on uvicorn) — a first import whose second tool is refused
leaves the registry empty, and a re-import that would change the first tool,
remove another and is refused at the second leaves every version as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

import glovebox
from glovebox.importers import import_mcp

SERVER = "https://shop.example.com/v1"


def operation(summary: str, *, cookie: bool = False) -> dict[str, Any]:
    refused = {"name": "session", "in": "cookie", "content": {"application/xml": {"schema": {"type": "object"}}}}
    parameters = [refused] if cookie else []
    return {"summary": summary, "parameters": parameters, "responses": {"200": {"description": "ok"}}}


def openapi(first: str, second_refused: bool, third: bool) -> dict[str, Any]:
    """A document of two or three operations; the second can carry a cookie parameter serialized
    by a media type (refused)."""
    paths = {
        "/a": {"get": {"operationId": "a", **operation(first)}},
        "/b": {"get": {"operationId": "b", **operation("B", cookie=second_refused)}},
    }
    if third:
        paths["/c"] = {"get": {"operationId": "c", **operation("C")}}
    return {"openapi": "3.0.3", "info": {"title": "Shop", "version": "1"}, "servers": [{"url": SERVER}], "paths": paths}


def graphql(first: str, second_refused: bool, third: bool, tmp_path: Path) -> Path:
    """A schema of two or three Query fields; the second can clash with the first's tool name (refused)."""
    clash = '  "A again"\n  A: Int\n' if second_refused else '  "B"\n  b: Int\n'
    path = tmp_path / f"shop-{len(list(tmp_path.iterdir()))}.graphql"
    path.write_text(f'type Query {{\n  "{first}"\n  a: Int\n{clash}' + ('  "C"\n  c: Int\n' if third else "") + "}\n")
    return path


def snapshot(runtime: glovebox.Runtime) -> list[tuple[str, str, str, str | None]]:
    return [(info.name, info.version, info.digest, info.deprecated) for info in runtime.tools()]


class Shop:
    """A remote MCP server whose tools ``a``, ``b`` (and ``c``) can be changed or broken."""

    def __init__(self, serve_app: Callable[[object], str]) -> None:
        self.server = MCPServer("Shop")
        self.url = serve_app(self.server.streamable_http_app()) + "/mcp"

    def set(self, first: str, second_refused: bool, third: bool) -> None:
        for name in list(self.server._tool_manager._tools):
            self.server.remove_tool(name)

        def tool(x: int) -> int:
            return x

        self.server.add_tool(tool, name="a", description=first)
        self.server.add_tool(tool, name="b", description="B")
        if second_refused:  # a schema the host refuses: a remote $ref
            self.server._tool_manager._tools["b"].parameters = {
                "type": "object",
                "properties": {"x": {"$ref": "https://evil.example.com/schema.json"}},
            }
        if third:
            self.server.add_tool(tool, name="c", description="C")


@pytest.fixture(params=["openapi", "graphql", "mcp"])
def importer(
    request: pytest.FixtureRequest, tmp_path: Path, serve_app: Callable[[object], str]
) -> Callable[..., glovebox.ImportResult]:
    """Import version (first description, second refused?, third present?) of one source of one kind."""
    kind = request.param
    shop = Shop(serve_app) if kind == "mcp" else None
    specs = tmp_path / "specs"
    specs.mkdir()

    def run(runtime: glovebox.Runtime, first: str, second_refused: bool = False, third: bool = True) -> Any:
        if kind == "openapi":
            spec = openapi(first, second_refused, third)
            return glovebox.import_openapi(runtime, spec, name="shop", strict=True)  # strict: refused, not skipped
        if kind == "graphql":
            schema = graphql(first, second_refused, third, specs)
            return glovebox.import_graphql(runtime, schema, endpoint=SERVER + "/graphql", name="shop")
        assert shop is not None
        shop.set(first, second_refused, third)
        return import_mcp(runtime, shop.url, name="shop")

    return run


def test_a_first_import_whose_second_tool_is_refused_registers_nothing(
    runtime: glovebox.Runtime, importer: Callable[..., glovebox.ImportResult]
) -> None:
    with pytest.raises(glovebox.RegistrationError) as refused:
        importer(runtime, "A", second_refused=True)
    assert refused.value.code in ("invalid_spec", "invalid_manifest")
    assert any(place in refused.value.message for place in ("/paths/~1b/get", "Query.A", "remote tool 'b'"))
    assert runtime.tools() == [] and list(runtime._registry.blob_dir.iterdir()) == []
    assert importer(runtime, "A").added == ["shop-a", "shop-b", "shop-c"]


def test_a_reimport_refused_at_its_second_tool_changes_nothing(
    runtime: glovebox.Runtime, importer: Callable[..., glovebox.ImportResult]
) -> None:
    importer(runtime, "A")
    before = snapshot(runtime)
    with pytest.raises(glovebox.RegistrationError):
        importer(runtime, "A, changed", second_refused=True, third=False)  # would change a, remove c
    assert snapshot(runtime) == before
    done = importer(runtime, "A, changed", third=False)
    assert (done.changed, done.removed, done.unchanged) == (["shop-a"], ["shop-c"], ["shop-b"])
    assert done.versions == {"shop-a": "1.0.1", "shop-b": "1.0.0"}
    assert [info.deprecated is not None for info in runtime.tools("shop-c")] == [True]


def test_unchanged_means_the_same_manifest_and_the_same_artifact(
    runtime: glovebox.Runtime, build_guest: Callable[[str], Path]
) -> None:
    """A re-import with another wasm artifact (a rebuilt generic guest) makes every tool a new version."""
    from glovebox.importers._batch import Source, apply
    from glovebox.importers._openapi import plan_openapi

    spec = openapi("A", second_refused=False, third=True)
    first = glovebox.import_openapi(runtime, spec, name="shop")
    api, planned, _, _, _ = plan_openapi(spec, name="shop")
    source = Source(api, "openapi", lambda info: info.manifest.operation is not None, "gone")
    assert apply(runtime, planned, None, source, dry_run=True).unchanged == ["shop-a", "shop-b", "shop-c"]
    other = build_guest("echo")
    done = apply(runtime, planned, other, source)
    assert done.changed == ["shop-a", "shop-b", "shop-c"] and done.widened == []
    assert {info.version for info in done.tools} == {"1.0.1"}
    assert {info.digest for info in done.tools} != {info.digest for info in first.tools}
