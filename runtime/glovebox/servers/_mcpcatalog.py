"""Resources, prompts and completions served by ``glovebox mcp``: those of the imported MCP servers.

What a client may list is what the read tools it may see list
(``glovebox.importers._mcpresources``): ``resources/list`` and
``resources/templates/list`` gather the ``x-glovebox-resources`` of each visible
``<prefix>-read-resource`` tool, ``prompts/list`` the ``x-glovebox-prompts`` of each
visible ``<prefix>-get-prompt`` tool. Reading one is a call of that tool as the
client's principal (``Runtime.acall``): the policy, approvals, limits and the audit
log apply to every read as to any call.

- ``resources/read``: the server that lists the URI, else the one whose template
  matches it, else the only server with resources the principal may read.
- ``prompts/get``: a prompt listed by two servers is listed by the first (tools in
  name order) under its name, by the others as ``<prefix>-<name>``.
- ``completion/complete``: asked of the prompt's or template's server through its
  ``<prefix>-complete`` tool; a server without one, or an unknown reference, completes
  nothing (an empty list).
- ``resources/subscribe``/``unsubscribe``: kept per connection; a changed listing is
  told as ``notifications/resources/list_changed`` (no per-resource updates are
  relayed from the servers).

A read that fails answers a JSON-RPC error whose ``data`` is the call's envelope.
"""

from __future__ import annotations

import logging
import re
import weakref
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import BaseModel, ValidationError

from ..model._result import CallResult, ToolInfo
from ..remote._resources import COMPLETE, GET_PROMPT, PROMPTS_KEY, READ_RESOURCE, RESOURCES_KEY

__all__ = ["RESOURCE_NOT_FOUND", "Catalog", "CatalogHandlers", "catalog_of", "without_listings"]

#: MCP's error code for a resource no server has.
RESOURCE_NOT_FOUND = -32002
#: The subscriptions one client connection may hold.
MAX_SUBSCRIPTIONS = 1000
M = TypeVar("M", bound=BaseModel)
logger = logging.getLogger("glovebox")


@dataclass(frozen=True)
class _Prompt:
    listed: dict[str, Any]  # as listed to the client (its name possibly prefixed)
    remote: str  # the name the server knows
    tool: str  # the get-prompt tool
    prefix: str


@dataclass(frozen=True)
class Catalog:
    """What one principal may list: resources, templates and prompts, with the tool that reads each."""

    resources: list[tuple[dict[str, Any], str]]
    templates: list[tuple[dict[str, Any], str]]
    prompts: list[_Prompt]
    readers: list[str]
    completers: dict[str, str]  # prefix -> complete tool

    def reader_of(self, uri: str) -> str | None:
        """The read tool for ``uri`` (see the module docstring), or None."""
        for resource, tool in self.resources:
            if resource.get("uri") == uri:
                return tool
        for template, tool in self.templates:
            if _matches(str(template.get("uriTemplate", "")), uri):
                return tool
        return self.readers[0] if len(self.readers) == 1 else None

    def prompt(self, name: str) -> _Prompt | None:
        return next((p for p in self.prompts if p.listed.get("name") == name), None)

    def completer(self, ref: types.PromptReference | types.ResourceTemplateReference) -> str | None:
        """The complete tool of the server a completion reference names, or None."""
        if isinstance(ref, types.PromptReference):
            prompt = self.prompt(ref.name)
            return None if prompt is None else self.completers.get(prompt.prefix)
        for template, tool in self.templates:
            if template.get("uriTemplate") == ref.uri:
                return self.completers.get(tool.removesuffix(f"-{READ_RESOURCE}"))
        return None


def catalog_of(tools: list[ToolInfo]) -> Catalog:
    """The catalog the read tools among ``tools`` (the principal's visible tools) make."""
    resources: list[tuple[dict[str, Any], str]] = []
    templates: list[tuple[dict[str, Any], str]] = []
    prompts: list[_Prompt] = []
    readers, completers, names = [], {}, set()
    for info in sorted(tools, key=lambda t: t.name):
        schema = info.input_schema if info.kind == "mcp-remote" and isinstance(info.input_schema, dict) else {}
        if info.name.endswith(f"-{READ_RESOURCE}") and isinstance(schema.get(RESOURCES_KEY), dict):
            readers.append(info.name)
            listing = schema[RESOURCES_KEY]
            resources += [(r, info.name) for r in _dicts(listing.get("resources"))]
            templates += [(t, info.name) for t in _dicts(listing.get("resourceTemplates"))]
        elif info.name.endswith(f"-{GET_PROMPT}") and isinstance(schema.get(PROMPTS_KEY), list):
            prefix = info.name.removesuffix(f"-{GET_PROMPT}")
            for prompt in _dicts(schema[PROMPTS_KEY]):
                remote = str(prompt.get("name", ""))
                name = remote if remote not in names else f"{prefix}-{remote}"
                names.add(name)
                prompts.append(_Prompt({**prompt, "name": name}, remote, info.name, prefix))
        elif info.name.endswith(f"-{COMPLETE}") and info.kind == "mcp-remote":
            completers[info.name.removesuffix(f"-{COMPLETE}")] = info.name
    return Catalog(resources, templates, prompts, readers, completers)


def without_listings(schema: Any) -> Any:
    """A read tool's input schema without the listings it carries (served as resources and prompts).

    >>> without_listings({"type": "object", "x-glovebox-resources": {"resources": []}})
    {'type': 'object'}
    """
    if isinstance(schema, dict) and (RESOURCES_KEY in schema or PROMPTS_KEY in schema):
        return {key: value for key, value in schema.items() if key not in (RESOURCES_KEY, PROMPTS_KEY)}
    return schema


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _matches(template: str, uri: str) -> bool:
    """Whether ``uri`` fits an RFC 6570 template of simple ``{name}`` expressions (one segment each).

    >>> _matches("test://template/{id}/data", "test://template/123/data")
    True
    >>> _matches("test://template/{id}/data", "test://template/1/2/data")
    False
    """
    if not template:
        return False
    parts = re.split(r"\{[^{}]*\}", template)
    pattern = "[^/]+".join(re.escape(part) for part in parts)
    return re.fullmatch(pattern, uri) is not None


def answer(result: CallResult, what: str) -> Any:
    """The output of a read that succeeded; a JSON-RPC error carrying the envelope when it did not."""
    if result.ok:
        return result.output
    code = INVALID_PARAMS if result.code in ("invalid_input", "tool_not_found") else INTERNAL_ERROR
    error = result.to_dict()["error"]
    raise MCPError(code, f"{what}: {error['code']}: {error['message']}", data=result.to_dict())


def not_found(uri: str) -> MCPError:
    return MCPError(RESOURCE_NOT_FOUND, f"no imported server lists the resource {uri!r}", data={"uri": uri})


class CatalogHandlers:
    """The MCP handlers of resources, prompts and completions over one backend.

    Args:
        runtime: the backend (any ``CallBackend``).
        who: the principal of a request's context, or why it has none (an ``AuthFailure``, whose
            ``message`` is refused).
    """

    def __init__(self, runtime: Any, who: Any) -> None:
        self.runtime = runtime
        self.who = who
        self._subscriptions: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()

    def handlers(self) -> dict[str, Any]:
        """The SDK ``Server``'s keyword arguments for these handlers."""
        return {
            "on_list_resources": self.list_resources,
            "on_list_resource_templates": self.list_templates,
            "on_read_resource": self.read_resource,
            "on_subscribe_resource": self.subscribe,
            "on_unsubscribe_resource": self.unsubscribe,
            "on_list_prompts": self.list_prompts,
            "on_get_prompt": self.get_prompt,
            "on_completion": self.complete,
        }

    async def _catalog(self, ctx: Any) -> tuple[str, Catalog]:
        import anyio

        who = self.who(ctx)
        if not isinstance(who, str):
            raise MCPError(INVALID_PARAMS, who.message)
        tools = await anyio.to_thread.run_sync(self.runtime.visible_tools, who)
        return who, catalog_of(tools)

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        _, catalog = await self._catalog(ctx)
        return types.ListResourcesResult(resources=_valid(types.Resource, [r for r, _ in catalog.resources]))

    async def list_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        _, catalog = await self._catalog(ctx)
        templates = _valid(types.ResourceTemplate, [t for t, _ in catalog.templates])
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        who, catalog = await self._catalog(ctx)
        uri = str(params.uri)
        tool = catalog.reader_of(uri)
        if tool is None:
            raise not_found(uri)
        output = answer(await self.runtime.acall(tool, {"uri": uri}, principal=who), f"reading {uri}")
        return types.ReadResourceResult(contents=output.get("contents", []))

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        who, catalog = await self._catalog(ctx)
        if catalog.reader_of(str(params.uri)) is None:
            raise not_found(str(params.uri))
        kept = self._subscriptions.setdefault(_connection(ctx), set())
        if len(kept) >= MAX_SUBSCRIPTIONS and str(params.uri) not in kept:
            raise MCPError(INVALID_PARAMS, f"a client may hold at most {MAX_SUBSCRIPTIONS} subscriptions")
        kept.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self._subscriptions.get(_connection(ctx), set()).discard(str(params.uri))
        return types.EmptyResult()

    async def list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        _, catalog = await self._catalog(ctx)
        return types.ListPromptsResult(prompts=_valid(types.Prompt, [p.listed for p in catalog.prompts]))

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        who, catalog = await self._catalog(ctx)
        prompt = catalog.prompt(params.name)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"no imported server lists the prompt {params.name!r}")
        request = {"name": prompt.remote, "arguments": dict(params.arguments or {})}
        output = answer(await self.runtime.acall(prompt.tool, request, principal=who), f"prompt {params.name}")
        return types.GetPromptResult(description=output.get("description"), messages=output.get("messages", []))

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        who, catalog = await self._catalog(ctx)
        tool = catalog.completer(params.ref)
        if tool is None:
            return types.CompleteResult(completion=types.Completion(values=[]))
        ref = params.ref.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(params.ref, types.PromptReference):
            prompt = catalog.prompt(params.ref.name)
            ref["name"] = prompt.remote if prompt is not None else params.ref.name
        request: dict[str, Any] = {
            "ref": ref,
            "argument": {"name": params.argument.name, "value": params.argument.value},
        }
        if params.context is not None and params.context.arguments:
            request["context"] = dict(params.context.arguments)
        output = answer(await self.runtime.acall(tool, request, principal=who), "completion")
        return types.CompleteResult(
            completion=types.Completion.model_validate(output.get("completion", {"values": []}))
        )


def _valid(model: type[M], entries: list[dict[str, Any]]) -> list[M]:
    """The entries that are valid ``model`` values; one that is not is left out (and logged), not the list."""
    found = []
    for entry in entries:
        try:
            found.append(model.model_validate(entry))
        except ValidationError:
            logger.warning("an imported %s entry is not valid MCP; it is not listed", model.__name__)
    return found


def _connection(ctx: Any) -> Any:
    return getattr(ctx.session, "_connection", ctx.session)
