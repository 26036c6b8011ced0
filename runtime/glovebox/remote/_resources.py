"""Resources, prompts and completions of a remote MCP server, read through glovebox.

An import lists them (:func:`list_catalog`, scrubbed of the secrets sent to the
server like a tool listing) and registers up to three ``mcp-remote`` tools per
server whose descriptors ask something other than ``tools/call``
(``glovebox.importers._mcpresources``):

- ``<prefix>-read-resource`` (``resources/read``; input ``{"uri"}``; output the
  server's ``{"contents": [...]}``),
- ``<prefix>-get-prompt`` (``prompts/get``; input ``{"name", "arguments"}``;
  output ``{"description", "messages"}``),
- ``<prefix>-complete`` (``completion/complete``; input ``{"ref", "argument",
  "context"}``; output ``{"completion": {...}}``).

Being tools, every read runs through the call pipeline: the policy (rules,
scopes, approvals, quotas), limits, the audit log. They only read: none of the
three methods changes anything on the server. A call here is one exchange like
a tool call's (``glovebox.remote._proxy``: one deadline, a byte cap, errors
translated there, the answer scrubbed of the call's secrets); ``_proxy`` runs the
exchanges (``list_catalog``, and ``call_remote`` for a read tool), this module says
what each asks and how its answer reads.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..capabilities._secrets import Scrubber
from ..core._errors import InvalidInput, OutputTooLarge, UpstreamError

if TYPE_CHECKING:
    from mcp import Client

__all__ = [
    "COMPLETE",
    "GET_PROMPT",
    "METHODS",
    "PROMPTS_KEY",
    "READ_RESOURCE",
    "RESOURCES_KEY",
    "Catalog",
    "checked",
    "listed",
    "read_output",
    "read_request",
]

#: The name suffixes of the three tools, and the schema keywords that carry the listings.
READ_RESOURCE = "read-resource"
GET_PROMPT = "get-prompt"
COMPLETE = "complete"
RESOURCES_KEY = "x-glovebox-resources"
PROMPTS_KEY = "x-glovebox-prompts"
#: The reads a descriptor may ask for, beside ``tools/call``.
METHODS = ("resources/read", "prompts/get", "completion/complete")
#: Pages of each listing an import follows, and the entries it keeps of each.
MAX_PAGES = 100
MAX_ENTRIES = 1000


@dataclass(frozen=True)
class Catalog:
    """What a server offers besides tools (each entry as the server lists it, scrubbed, in JSON form)."""

    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    #: The server declares ``completions``.
    completions: bool = False


async def listed(client: Client) -> Catalog:
    """What the connected server lists besides tools (all pages; not yet scrubbed or checked)."""
    capabilities = client.server_capabilities
    resources: list[Any] = []
    templates: list[Any] = []
    prompts: list[Any] = []
    if capabilities.resources is not None:
        resources = await _pages(lambda cursor: client.list_resources(cursor=cursor), "resources")
        templates = await _pages(lambda cursor: client.list_resource_templates(cursor=cursor), "resource_templates")
    if capabilities.prompts is not None:
        prompts = await _pages(lambda cursor: client.list_prompts(cursor=cursor), "prompts")
    return Catalog(
        resources=[_json(entry) for entry in resources],
        templates=[_json(entry) for entry in templates],
        prompts=[_json(entry) for entry in prompts],
        completions=capabilities.completions is not None,
    )


def checked(catalog: Catalog, scrub: Scrubber, origin: str) -> Catalog:
    """``catalog`` scrubbed of the secrets sent to the server; refused when it lists too much.

    Raises:
        UpstreamError: a listing holds more than :data:`MAX_ENTRIES` entries.
    """
    for kind in ("resources", "templates", "prompts"):
        if len(getattr(catalog, kind)) > MAX_ENTRIES:
            raise UpstreamError(f"the remote MCP server {origin} lists more than {MAX_ENTRIES} {kind}")
    return Catalog(
        resources=scrub.data(catalog.resources),
        templates=scrub.data(catalog.templates),
        prompts=scrub.data(catalog.prompts),
        completions=catalog.completions,
    )


async def _pages(fetch: Any, attribute: str) -> list[Any]:
    found: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        found.extend(getattr(page, attribute))
        cursor = page.next_cursor
        if cursor is None or len(found) > MAX_ENTRIES:
            break
    return found


def _json(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def read_request(method: str, arguments: dict[str, Any]) -> Callable[[Client], Awaitable[Any]]:
    """What one read asks the connected server (``arguments`` are checked before anything is sent).

    Raises:
        InvalidInput: the method is not a read, or the arguments do not fit it.
    """
    import mcp_types as types

    if method not in METHODS:
        raise InvalidInput(f"a remote MCP tool cannot ask {method!r}")
    uri, name = str(arguments.get("uri", "")), str(arguments.get("name", ""))
    prompt_arguments = _strings(arguments.get("arguments"))
    argument, context = _strings(arguments.get("argument")) or {}, _strings(arguments.get("context"))
    given = arguments.get("ref")
    ref: dict[str, Any] = given if isinstance(given, dict) else {}
    reference: types.PromptReference | types.ResourceTemplateReference = (
        types.PromptReference(type="ref/prompt", name=str(ref.get("name", "")))
        if ref.get("type") == "ref/prompt"
        else types.ResourceTemplateReference(type="ref/resource", uri=str(ref.get("uri", "")))
    )

    async def work(client: Client) -> Any:
        if method == "resources/read":
            return await client.read_resource(uri)
        if method == "prompts/get":
            return await client.get_prompt(name, prompt_arguments)
        return await client.complete(reference, argument, context)

    return work


def read_output(result: Any, scrub: Scrubber, output_bytes: int, origin: str) -> str:
    """A read's answer as JSON text, scrubbed, within ``output_bytes``.

    Raises:
        OutputTooLarge: it is larger.
    """
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    dumped.pop("_meta", None)
    output = scrub.text(json.dumps(dumped, ensure_ascii=False))
    size = len(output.encode("utf-8", "surrogatepass"))
    if size > output_bytes:
        raise OutputTooLarge(
            f"the remote server's answer is {size} bytes, over the {output_bytes}-byte limit",
            details={"server": origin, "limit_bytes": output_bytes},
        )
    return output


def _strings(value: Any) -> dict[str, str] | None:
    """A string map (prompt arguments, a completion's argument or context); others are refused."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidInput("prompt arguments and completion arguments are objects of strings")
    return value
