"""A real MCP server with resources, resource templates, prompts and completions (the SDK's ``MCPServer``).

Run as ``python tests/servers/mcp_fixture_server.py PORT``: it serves streamable HTTP on
127.0.0.1:PORT at ``/mcp`` with what the MCP conformance suite's resource and prompt scenarios read
(``test://static-text``, ``test://static-binary``, ``test://template/{id}/data``,
``test://watched-resource``, ``test_simple_prompt``, ``test_prompt_with_arguments``,
``test_prompt_with_embedded_resource``, ``test_prompt_with_image``), one tool (``echo``), and
completions for ``test_prompt_with_arguments``. Its tool ``add_late`` lists one more resource
(``test://late-resource``) and says ``notifications/resources/list_changed``.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.mcpserver.resources import TextResource

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WORDS = ["paris", "park", "party", "test", "testing"]


def build() -> MCPServer:
    server = MCPServer("fixture")

    @server.tool(description="Echo a text.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="List one more resource, and tell the client that the resource list changed.")
    async def add_late(ctx: Context) -> str:
        late = TextResource(uri="test://late-resource", name="late", description="Added late", text="late")
        server.add_resource(late)
        await ctx.session.send_resource_list_changed()
        return "added"

    @server.resource("test://static-text", name="static-text", description="A static text", mime_type="text/plain")
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", name="static-binary", description="A PNG", mime_type="image/png")
    def static_binary() -> bytes:
        return PNG

    @server.resource("test://watched-resource", name="watched", description="A watched resource")
    def watched() -> str:
        return "watched"

    @server.resource("test://template/{id}/data", name="template", description="By id", mime_type="application/json")
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.prompt(name="test_simple_prompt", description="A simple prompt")
    def simple() -> str:
        return "This is a simple prompt for testing."

    @server.prompt(name="test_prompt_with_arguments", description="A prompt with arguments")
    def with_arguments(arg1: str, arg2: str) -> str:
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt(name="test_prompt_with_embedded_resource", description="A prompt embedding a resource")
    def with_resource(resourceUri: str) -> list[Any]:  # noqa: N803 (the suite's argument name)
        resource = types.TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(content=types.EmbeddedResource(type="resource", resource=resource)),
            UserMessage(content="Please process the embedded resource above."),
        ]

    @server.prompt(name="test_prompt_with_image", description="A prompt with an image")
    def with_image() -> list[Any]:
        image = types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png")
        return [UserMessage(content=image), UserMessage(content="Please analyze the image above.")]

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> types.Completion | None:
        if isinstance(ref, types.PromptReference) and ref.name == "test_prompt_with_arguments":
            values = [word for word in WORDS if word.startswith(argument.value)]
            return types.Completion(values=values, total=len(values), has_more=False)
        return None

    return server


def main(argv: list[str]) -> None:
    server = build()
    server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))


if __name__ == "__main__":
    main(sys.argv)
