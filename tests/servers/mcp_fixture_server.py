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
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.mcpserver.resources import TextResource

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WORDS = ["paris", "park", "party", "test", "testing"]


#: Every client connection that sent a request (the ``add_late`` tool tells each of them).
CONNECTIONS: list[Any] = []


async def remember(ctx: Any, call_next: Any) -> Any:
    """Middleware: keep each client's connection, to tell it of list changes."""
    connection = getattr(ctx.session, "_connection", None)
    if connection is not None and connection not in CONNECTIONS:
        CONNECTIONS.append(connection)
    return await call_next(ctx)


def build() -> MCPServer:
    server = MCPServer("fixture", middleware=[remember])

    @server.tool(description="Echo a text.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="List one more resource, and tell every client that the resource list changed.")
    async def add_late() -> str:
        late = TextResource(uri="test://late-resource", name="late", description="Added late", text="late")
        server.add_resource(late)
        for connection in CONNECTIONS:
            try:
                await connection.send_resource_list_changed()
            except Exception:  # a client gone meanwhile
                pass
        return "added"

    add_resources(server)
    add_prompts(server)
    return server


def add_resources(server: MCPServer) -> None:
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


def add_prompts(server: MCPServer) -> None:
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


def main(argv: list[str]) -> None:
    server = build()
    server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))


@contextmanager
def serving(port: int | None = None) -> Iterator[str]:
    """This server in a subprocess on ``port`` (default: a free one) of 127.0.0.1; yields its URL (``.../mcp``)."""
    if port is None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
    command = [sys.executable, str(Path(__file__)), str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, "the fixture server exited"
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the fixture server did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    main(sys.argv)
