"""Code mode over MCP (``glovebox mcp --code-mode``): ``execute``, ``search`` and ``resume``.

A client sends a program (``export default async function (input, tools)`` in
TypeScript or JavaScript, or ``async def main(input, tools)`` in Python with
``lang: "py"``) instead of one tool call at a time: ``execute`` runs it with ``Runtime.arun``
as the session's principal and answers the run envelope; ``search`` finds
tools by words; ``resume`` continues a paused run of the same principal (a run
of another principal reads as unknown). ``execute``'s description carries the
``.d.ts`` of the principal's tools and their typed Python stubs, so a model
writes calls that validate in either language.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import types

from ..core._errors import GloveboxError
from ..runs._result import RunResult

__all__ = ["code_tools", "execute", "resume", "run_result"]

_EXECUTE_DESCRIPTION = (
    "Run a short program that calls tools: `export default async function (input, tools) {...}` in TypeScript "
    "or JavaScript (lang ts or js), or `async def main(input, tools): ...` in Python (lang py). "
    "`await tools.call(name, input)` (or the typed wrapper, e.g. `tools.text_stats(input)`) "
    "returns a tool's output or throws (raises) a ToolCallError with the envelope's `code`; "
    "`await tools.search(query)` finds tools. Every call runs under the policy. Answers the run envelope: "
    "status done (output), paused (an approval is pending: call resume after it is approved), or failed "
    "(error). The tools in TypeScript:\n\n"
)
_PYTHON_STUBS = (
    "\nThe same tools as typed Python stubs (Python's standard modules without files, sockets or threads):\n\n"
)
#: The languages ``execute`` takes.
LANGS = ["ts", "js", "py"]


def code_tools(declaration: str, python_stubs: str | None = None) -> list[types.Tool]:
    """The three tools of code mode; ``execute`` describes the principal's tools with ``declaration``
    (TypeScript) and ``python_stubs`` (Python)."""
    description = _EXECUTE_DESCRIPTION + declaration
    if python_stubs:
        description += _PYTHON_STUBS + python_stubs
    execute_tool = types.Tool(
        name="execute",
        description=description,
        input_schema={
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program."},
                "input": {"description": "The program's input (JSON; default null)."},
                "lang": {"enum": LANGS, "default": "ts", "description": "ts, js, or py (Python)."},
            },
            "required": ["code"],
            "additionalProperties": False,
        },
    )
    search_tool = types.Tool(
        name="search",
        description="Find tools by words in their names and descriptions.",
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "additionalProperties": False,
        },
    )
    resume_tool = types.Tool(
        name="resume",
        description="Continue a paused run (after its approval) by its run_id; answers the run envelope.",
        input_schema={
            "type": "object",
            "properties": {"run_id": {"type": "string"}},
            "required": ["run_id"],
            "additionalProperties": False,
        },
    )
    return [execute_tool, search_tool, resume_tool]


def run_result(result: RunResult) -> types.CallToolResult:
    """The MCP result of a run: its envelope as text and as structured content."""
    envelope = result.to_dict()
    text = [types.TextContent(text=json.dumps(envelope, ensure_ascii=False))]
    return types.CallToolResult(content=text, structured_content=envelope, is_error=not result.ok)


def _refusal(code: str, message: str) -> types.CallToolResult:
    body = {"ok": False, "status": "failed", "error": {"code": code, "message": message, "retryable": False}}
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(body))], is_error=True)


async def execute(runtime: Any, arguments: dict[str, Any], principal: str) -> types.CallToolResult:
    """Run the program in ``arguments`` as ``principal``."""
    code, lang = arguments.get("code"), arguments.get("lang", "ts")
    if not isinstance(code, str) or lang not in LANGS:
        return _refusal("invalid_input", "execute takes code (a string) and lang (ts, js or py)")
    try:
        result = await runtime.arun(code, input=arguments.get("input"), principal=principal, lang=lang)
    except GloveboxError as exc:  # the program does not compile, or its input breaks the JSON rules
        return _refusal(exc.code, exc.message)
    return run_result(result)


async def resume(runtime: Any, arguments: dict[str, Any], principal: str) -> types.CallToolResult:
    """Resume run ``arguments["run_id"]`` when it is ``principal``'s."""
    run_id = arguments.get("run_id")
    records = await anyio.to_thread.run_sync(lambda: runtime.runs.record(run_id))
    if records is None or records.principal != principal:
        return _refusal("invalid_input", f"no run {run_id!r} of {principal!r}")
    return run_result(await anyio.to_thread.run_sync(runtime.runs.resume, run_id))
