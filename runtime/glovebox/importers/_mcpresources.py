"""A remote MCP server's resources, prompts and completions, imported beside its tools.

``import_mcp`` adds what :func:`plan_reads` plans to the tools of the import
(one import step, ``_batch.apply``: a changed listing is a new patch version,
audited as any refresh, held by the widening rules): up to three ``mcp-remote``
tools that only read (see ``glovebox.remote._resources``):

- ``<prefix>-read-resource`` when the server lists resources or templates: its input
  schema holds the listing under ``x-glovebox-resources`` (``resources`` and
  ``resourceTemplates`` as the server lists them), which ``glovebox mcp`` serves
  as ``resources/list`` and ``resources/templates/list``;
- ``<prefix>-get-prompt`` when it lists prompts: the prompt names are the
  ``enum`` of ``name``, the prompts under ``x-glovebox-prompts``;
- ``<prefix>-complete`` when it declares ``completions`` and lists prompts or templates.

A server that lists none gets none of them (a later refresh adds them when it does).

Their scope is ``<prefix>:read`` unless scopes are given: a principal may read a
server's resources and prompts without being let call its tools, and a policy's
rules name these tools as any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..model._manifest import Limits, parse_manifest
from ..remote._headers import HeaderSecrets
from ..remote._resources import COMPLETE, GET_PROMPT, PROMPTS_KEY, READ_RESOURCE, RESOURCES_KEY
from ._batch import Planned

__all__ = ["plan_reads"]

LIST_TIMEOUT_S = 30.0
LIST_BYTES = 16 * 1024 * 1024
_WHAT = {
    "resources/read": "Read a resource",
    "prompts/get": "Get a prompt",
    "completion/complete": "Complete an argument",
}
_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}


def plan_reads(
    url: str,
    headers: HeaderSecrets,
    prefix: str,
    limits: Limits,
    scopes: list[str] | None,
    home: Path | None = None,
) -> list[Planned]:
    """The read tools of the server at ``url`` (none when it has no resources, prompts or completions).

    ``home``: the importing Runtime's home, whose ``default`` connections list the server.
    """
    from ..remote._proxy import list_catalog

    catalog = list_catalog(url, headers, LIST_TIMEOUT_S, LIST_BYTES, home)
    required = [f"{prefix}:read"] if scopes is None else scopes
    plans = []
    if catalog.resources or catalog.templates:
        listing = {"resources": catalog.resources, "resourceTemplates": catalog.templates}
        schema = {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "A listed resource's URI, or a template's."}},
            "required": ["uri"],
            "additionalProperties": False,
            RESOURCES_KEY: listing,
        }
        output = {"type": "object", "required": ["contents"], "properties": {"contents": {"type": "array"}}}
        plans.append(_plan(url, headers, prefix, READ_RESOURCE, "resources/read", schema, output, limits, required))
    if catalog.prompts:
        names = [prompt["name"] for prompt in catalog.prompts]
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": names}, "arguments": _STRINGS},
            "required": ["name"],
            "additionalProperties": False,
            PROMPTS_KEY: catalog.prompts,
        }
        output = {"type": "object", "required": ["messages"], "properties": {"messages": {"type": "array"}}}
        plans.append(_plan(url, headers, prefix, GET_PROMPT, "prompts/get", schema, output, limits, required))
    if catalog.completions and (catalog.prompts or catalog.templates):
        reference = {
            "type": "object",
            "properties": {
                "type": {"enum": ["ref/prompt", "ref/resource"]},
                "name": {"type": "string"},
                "uri": {"type": "string"},
            },
            "required": ["type"],
        }
        schema = {
            "type": "object",
            "properties": {"ref": reference, "argument": _STRINGS, "context": _STRINGS},
            "required": ["ref", "argument"],
            "additionalProperties": False,
        }
        output = {"type": "object", "required": ["completion"], "properties": {"completion": {"type": "object"}}}
        plans.append(_plan(url, headers, prefix, COMPLETE, "completion/complete", schema, output, limits, required))
    return plans


def _plan(
    url: str,
    headers: HeaderSecrets,
    prefix: str,
    suffix: str,
    method: str,
    input_schema: dict[str, Any],
    output_schema: dict[str, Any],
    limits: Limits,
    scopes: list[str],
) -> Planned:
    from ..remote._proxy import Descriptor, origin_of

    description = f"{_WHAT[method]} of the MCP server {origin_of(url)} ({method})."
    document = {
        "name": f"{prefix}-{suffix}"[:64],
        "description": description,
        "input_schema": input_schema,
        "output_schema": output_schema,
        "limits": limits.model_dump(),
        "required_scopes": scopes,
        "kind": "mcp-remote",
    }
    manifest = parse_manifest(document, f"of the {method} of {origin_of(url)}")
    descriptor = Descriptor(url, method, description, input_schema, output_schema, dict(headers), method=method)
    return Planned(manifest, where=f"the {method} of the server", descriptor=descriptor.to_bytes())
