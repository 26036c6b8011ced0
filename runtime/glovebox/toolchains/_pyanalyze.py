"""Read a Python tool's source with ``ast`` (never by importing it) before it is built.

Finds the ``@tool`` function, turns its signature into the input JSON Schema,
its return annotation into the output schema and the first paragraph of its
docstring into the description, and refuses — with file and line — syntax
errors and imports that cannot work in a sandbox. The import check is a
courtesy to the author, not the boundary: the sandbox is (a tool that imports
``socket`` dynamically still has no network).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core._errors import BuildError

__all__ = ["ToolSpec", "analyse"]

_NETWORK = "the network is not available in a sandbox; use glovebox_guest.http"
_THREADS = "threads and processes are not available in a sandbox; a call runs on one thread"
_FORBIDDEN = {
    **dict.fromkeys(("socket", "ssl", "select", "selectors", "socketserver", "asyncio"), _NETWORK),
    **dict.fromkeys(("http.client", "http.server", "urllib.request", "ftplib", "smtplib", "imaplib"), _NETWORK),
    **dict.fromkeys(("poplib", "xmlrpc", "webbrowser"), _NETWORK),
    **dict.fromkeys(("threading", "_thread", "multiprocessing", "concurrent", "signal"), _THREADS),
    **dict.fromkeys(("subprocess", "pty"), "processes are not available in a sandbox"),
    **dict.fromkeys(("ctypes", "mmap"), "native code and shared memory are not available in a sandbox"),
}
_FORBIDDEN_OS = re.compile(r"^(system|popen|fork|forkpty|kill|exec\w*|spawn\w*|posix_spawn\w*)$")
_SCALARS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "None": {"type": "null"},
    "dict": {"type": "object"},
    "list": {"type": "array"},
    "Any": {},
    "object": {},
}
_LISTS = {"list", "List", "Sequence", "Iterable", "set", "frozenset", "tuple"}
_DICTS = {"dict", "Dict", "Mapping"}


@dataclass(frozen=True)
class ToolSpec:
    """What the source says about its tool."""

    function: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | bool


def analyse(src: Path, text: str) -> ToolSpec:
    """Check ``text`` (the source of ``src``) and describe its tool.

    Raises:
        BuildError: a syntax error, a forbidden import, no or several ``@tool``
            functions, or a signature that has no JSON Schema; with file:line.
    """
    try:
        tree = ast.parse(text, filename=str(src))
    except SyntaxError as exc:
        raise BuildError(f"{src}:{exc.lineno}:{exc.offset or 0}: syntax error: {exc.msg}") from exc
    _check_imports(src, tree)
    func = _find_tool(src, tree)
    doc = ast.get_docstring(func) or ""
    params = _param_docs(doc)
    return ToolSpec(
        function=func.name,
        description=_first_paragraph(doc),
        input_schema=_input_schema(src, func, params),
        output_schema=_schema(src, func.returns) if func.returns is not None else True,
    )


def _check_imports(src: Path, tree: ast.Module) -> None:
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if _FORBIDDEN_OS.match(node.attr):
                raise BuildError(f"{src}:{node.lineno}: os.{node.attr} is not available: processes cannot be started")
        for name in names:
            hint = _forbidden(name)
            if hint is not None:
                raise BuildError(f"{src}:{getattr(node, 'lineno', 0)}: import of {name}: {hint}")


def _forbidden(module: str) -> str | None:
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        hint = _FORBIDDEN.get(".".join(parts[:i]))
        if hint is not None:
            return hint
    return None


def _is_tool_decorator(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "tool") or (
        isinstance(node, ast.Attribute) and node.attr == "tool"
    )


def _find_tool(src: Path, tree: ast.Module) -> ast.FunctionDef:
    found = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and any(_is_tool_decorator(d) for d in node.decorator_list)
    ]
    if not found:
        raise BuildError(
            f"{src}:1: no tool function: mark one top-level function with @tool (from glovebox_guest import tool)"
        )
    if len(found) > 1:
        raise BuildError(f"{src}:{found[1].lineno}: a second @tool function ({found[1].name}); a module has one tool")
    return found[0]


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n", 1)[0].split()) if doc.strip() else ""


def _param_docs(doc: str) -> dict[str, str]:
    """``name: text`` lines of a Google-style ``Args:`` section."""
    match = re.search(r"^\s*(?:Args|Arguments|Parameters):\s*$(.*?)(?:^\s*\w+:\s*$|\Z)", doc, re.M | re.S)
    if match is None:
        return {}
    found: dict[str, str] = {}
    for line in match.group(1).splitlines():
        item = re.match(r"^\s*(\w+)(?:\s*\([^)]*\))?:\s*(.+)$", line)
        if item:
            found[item.group(1)] = item.group(2).strip()
    return found


def _input_schema(src: Path, func: ast.FunctionDef, docs: dict[str, str]) -> dict[str, Any]:
    args = func.args
    if args.posonlyargs or args.vararg:
        raise BuildError(f"{src}:{func.lineno}: the tool's arguments come by name: no positional-only or *args")
    plain = args.args
    defaults: list[ast.expr | None] = [None] * (len(plain) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(plain, defaults, strict=True)) + list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    properties: dict[str, Any] = {}
    required: list[str] = []
    for arg, default in pairs:
        prop = _schema(src, arg.annotation) if arg.annotation is not None else {}
        if arg.arg in docs:
            prop = {**prop, "description": docs[arg.arg]}
        if default is None:
            required.append(arg.arg)
        else:
            value = _literal(default)
            if value is not _NO_LITERAL:
                prop = {**prop, "default": value}
        properties[arg.arg] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = args.kwarg is not None
    return schema


_NO_LITERAL = object()


def _literal(node: ast.expr) -> Any:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return _NO_LITERAL
    # None is left out: it is the absence of a value (and TOML cannot hold it).
    if isinstance(value, (str, int, float, bool, list, dict)):
        return value
    return _NO_LITERAL


def _schema(src: Path, node: ast.expr) -> dict[str, Any]:
    """The JSON Schema of a type annotation (str, int, float, bool, list[...], dict[str, ...], ...)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _schema(src, ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.Constant) and node.value is None:
        return {"type": "null"}
    name = _name(node.value if isinstance(node, ast.Subscript) else node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union(src, [node.left, node.right])
    if not isinstance(node, ast.Subscript) and name in _SCALARS:
        return dict(_SCALARS[name])
    if isinstance(node, ast.Subscript):
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if name in _LISTS and len(args) == 1:
            return {"type": "array", "items": _schema(src, args[0])}
        if name in _DICTS and len(args) == 2 and _name(args[0]) == "str":
            return {"type": "object", "additionalProperties": _schema(src, args[1])}
        if name == "Optional":
            return _union(src, [args[0], ast.Constant(None)])
        if name == "Union":
            return _union(src, args)
        if name == "Literal" and all(isinstance(a, ast.Constant) for a in args):
            return {"enum": [a.value for a in args if isinstance(a, ast.Constant)]}
        if name == "Annotated":
            return _schema(src, args[0])
    raise BuildError(
        f"{src}:{node.lineno}: cannot turn the annotation `{ast.unparse(node)}` into a JSON Schema "
        "(use str, int, float, bool, None, Any, list[...], dict[str, ...], Optional[...], X | Y or Literal[...])"
    )


def _union(src: Path, members: list[ast.expr]) -> dict[str, Any]:
    flat: list[dict[str, Any]] = []
    for member in members:
        schema = _schema(src, member)
        flat.extend(schema["anyOf"] if set(schema) == {"anyOf"} else [schema])
    return {"anyOf": flat}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    return None
