"""The glovebox guest helper for tools written in Python (standard library only).

Write a plain function with type hints and a docstring, and mark it::

    from glovebox_guest import ToolError, http, log, tool

    @tool
    def slugify(text: str, separator: str = "-") -> dict[str, str]:
        \"\"\"Turn a text into a URL slug.\"\"\"
        if not text.strip():
            raise ToolError("text is empty")      # -> guest_error with this message
        log("info", "slugifying")                 # -> meta.logs
        return {"slug": ...}                      # -> JSON output

``glovebox build tool.py`` reads the signature and the docstring to write the
input JSON Schema and the description of the manifest, and wraps the function
in the WIT glue: the input object's fields become the keyword arguments, the
return value is encoded as JSON.

Errors: ``ToolError(message)`` becomes a ``guest_error`` with that message;
any other exception becomes a ``guest_error`` reading ``TypeName: message``;
running out of memory (``MemoryError``) is reported to the host, which answers
``memory_limit``. ``http.get/post/fetch`` call the host's ``http-fetch`` and raise
``HttpError`` (a ``ToolError``) when the host refuses or the request fails.
``sql.query(database, statement, params)`` runs one statement on a granted
database alias and returns ``{"columns", "rows", "row_count", "truncated",
"rows_changed"}``, or raises ``SqlError`` (a ``ToolError``) whose ``kind`` is
``denied``, ``approval-required``, ``timeout`` or ``database``.
``kv.get(namespace, key)`` (a string or None), ``kv.set(namespace, key, value)`` and
``kv.delete(namespace, key)`` use the host's key-value store, or raise ``KvError``
whose ``kind`` is ``denied``, ``quota-exceeded``, ``invalid`` or ``storage``.
``client.sample(params)`` and ``client.elicit(params)`` ask the MCP client of the
call (``sampling/createMessage``, ``elicitation/create``; the ``client`` capability)
and return its result as a dict, or raise ``ClientError`` whose ``kind`` is
``denied``, ``unsupported``, ``invalid``, ``timeout`` or ``failed``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ClientError",
    "HttpError",
    "KvError",
    "Response",
    "SqlError",
    "ToolError",
    "client",
    "http",
    "kv",
    "log",
    "sql",
    "tool",
]

#: What the host recognises (logged at level error) as "the guest ran out of memory".
OOM_MARKER = "glovebox: out of memory"
LEVELS = ("debug", "info", "warn", "error")

_TOOL: list[Callable[..., Any]] = []


class ToolError(Exception):
    """Raise it to answer the call with an error message (a ``guest_error``)."""


def tool(func: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``func`` as the tool. Exactly one function per tool module."""
    if _TOOL:
        raise RuntimeError(f"only one @tool per module: {_TOOL[0].__name__} and {func.__name__}")
    _TOOL.append(func)
    return func


def _host() -> Any:
    # Imported lazily: the bindings exist only inside the built component.
    from wit_world.imports import host

    return host


def log(level: str, message: str) -> None:
    """Append a line to the call's log (``debug``, ``info``, ``warn`` or ``error``)."""
    host = _host()
    name = level.upper() if level in LEVELS else "INFO"
    host.log(getattr(host.Level, name), str(message))


@dataclass
class Response:
    """An HTTP response from the host."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def text(self) -> str:
        """The body decoded as UTF-8 (invalid bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


class HttpError(ToolError):
    """The host did not produce a response: ``kind`` is denied, timeout, too-large or network."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"http {kind}: {reason}")
        self.kind = kind
        self.reason = reason


class _Http:
    """HTTP through the host's ``http-fetch`` (only what the call was granted)."""

    def fetch(
        self, method: str, url: str, headers: dict[str, str] | None = None, body: bytes | str | None = None
    ) -> Response:
        """Send a request; return the response or raise ``HttpError``."""
        from componentize_py_types import Err

        host = _host()
        data = body.encode("utf-8") if isinstance(body, str) else body
        request = host.HttpRequest(method=method, url=url, headers=list((headers or {}).items()), body=data)
        try:
            answer = host.http_fetch(request)
        except Err as err:
            kind = type(err.value).__name__.rsplit("_", 1)[-1].lower().replace("toolarge", "too-large")
            raise HttpError(kind, str(err.value.value)) from None
        return Response(status=answer.status, headers=list(answer.headers), body=bytes(answer.body))

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        """``GET url``."""
        return self.fetch("GET", url, headers)

    def post(
        self, url: str, body: bytes | str | None = None, headers: dict[str, str] | None = None, json_body: Any = None
    ) -> Response:
        """``POST url`` with a body, or with ``json_body`` encoded as JSON."""
        if json_body is not None:
            body = json.dumps(json_body)
            headers = {"content-type": "application/json", **(headers or {})}
        return self.fetch("POST", url, headers, body)


http = _Http()


class SqlError(ToolError):
    """The host did not run the statement: ``kind`` is denied, approval-required, timeout or database."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"sql {kind}: {reason}")
        self.kind = kind
        self.reason = reason


_SQL_KINDS = {"denied": "denied", "approvalrequired": "approval-required", "timeout": "timeout", "database": "database"}


class _Sql:
    """SQL through the host's ``query`` (only the databases, kinds and tables the call was granted)."""

    def query(self, database: str, statement: str, params: list[Any] | tuple[Any, ...] = ()) -> dict[str, Any]:
        """Run one statement (``?`` placeholders) on the database granted as ``database``.

        ``params`` are None, bool, int, float, str or bytes. Returns the decoded
        answer; raises ``SqlError`` when the host refuses or the statement fails.
        """
        from componentize_py_types import Err
        from wit_world.imports import sql as host_sql

        values = [_sql_value(host_sql, value) for value in params]
        try:
            text = host_sql.query(database, statement, values)
        except Err as err:
            name = type(err.value).__name__.rsplit("_", 1)[-1].lower()
            raise SqlError(_SQL_KINDS.get(name, name), str(err.value.value)) from None
        answer: dict[str, Any] = json.loads(text)
        return answer


def _sql_value(host_sql: Any, value: Any) -> Any:
    if value is None:
        return host_sql.SqlValue_Null()
    if isinstance(value, bool):
        return host_sql.SqlValue_Integer(int(value))
    if isinstance(value, int):
        return host_sql.SqlValue_Integer(value)
    if isinstance(value, float):
        return host_sql.SqlValue_Float(value)
    if isinstance(value, str):
        return host_sql.SqlValue_Text(value)
    if isinstance(value, (bytes, bytearray)):
        return host_sql.SqlValue_Blob(bytes(value))
    raise TypeError(f"a SQL parameter is None, bool, int, float, str or bytes, not {type(value).__name__}")


sql = _Sql()


class KvError(ToolError):
    """The host did not do the kv operation: ``kind`` is denied, quota-exceeded, invalid or storage."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"kv {kind}: {reason}")
        self.kind = kind
        self.reason = reason


_KV_KINDS = {"denied": "denied", "quotaexceeded": "quota-exceeded", "invalid": "invalid", "storage": "storage"}


class _Kv:
    """The host's key-value store (only the namespaces the call was granted)."""

    def get(self, namespace: str, key: str) -> str | None:
        """The value of ``key`` in ``namespace``, or None."""
        return self._do("get", namespace, key)

    def set(self, namespace: str, key: str, value: str) -> None:
        """Set ``key`` in ``namespace`` to ``value`` (``KvError`` ``quota-exceeded`` past the quota)."""
        self._do("set", namespace, key, value)

    def delete(self, namespace: str, key: str) -> None:
        """Remove ``key`` from ``namespace``."""
        self._do("delete", namespace, key)

    @staticmethod
    def _do(operation: str, *args: str) -> Any:
        from componentize_py_types import Err
        from wit_world.imports import kv as host_kv

        try:
            return getattr(host_kv, operation)(*args)
        except Err as err:
            name = type(err.value).__name__.rsplit("_", 1)[-1].lower()
            raise KvError(_KV_KINDS.get(name, name), str(err.value.value)) from None


kv = _Kv()


class ClientError(ToolError):
    """The MCP client of the call gave no answer: ``kind`` is denied, unsupported, invalid, timeout or failed."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"client {kind}: {reason}")
        self.kind = kind
        self.reason = reason


class _Client:
    """The MCP client of the call: its model (``sample``) and its user (``elicit``), when granted."""

    def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        """``sampling/createMessage`` with ``params`` (``messages``, ``maxTokens``...): the client's result."""
        return self._ask("sample", params)

    def elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        """``elicitation/create`` (form mode) with ``params`` (``message``, ``requestedSchema``): the result."""
        return self._ask("elicit", params)

    @staticmethod
    def _ask(function: str, params: dict[str, Any]) -> dict[str, Any]:
        from componentize_py_types import Err
        from wit_world.imports import client as host_client

        try:
            answer: dict[str, Any] = json.loads(getattr(host_client, function)(json.dumps(params)))
            return answer
        except Err as err:
            name = type(err.value).__name__.rsplit("_", 1)[-1].lower()
            raise ClientError(name, str(err.value.value)) from None


client = _Client()


class _OutOfMemory(BaseException):
    """Escapes the export so that the component traps after reporting OOM_MARKER."""


def _dispatch(input_text: str) -> str:
    """Run the tool on one JSON input; return JSON text or raise ``Err(message)``."""
    from componentize_py_types import Err

    try:
        return _run(input_text)
    except ToolError as exc:
        raise Err(str(exc) or type(exc).__name__) from None
    except MemoryError:
        _report_oom()
        raise _OutOfMemory() from None
    except RecursionError as exc:
        raise Err(f"RecursionError: {exc}") from None
    except Exception as exc:  # every other failure is the tool's error, named by type
        raise Err(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None


def _run(input_text: str) -> str:
    if not _TOOL:
        raise ToolError("the module defines no @tool function")
    args = json.loads(input_text)
    if not isinstance(args, dict):
        raise ToolError("the input must be a JSON object whose fields are the tool's arguments")
    result = _TOOL[0](**args)
    return json.dumps(result, ensure_ascii=False, allow_nan=False)


def _report_oom() -> None:
    try:
        log("error", OOM_MARKER)
    except BaseException:  # even the log line may not fit; the trap still follows
        pass
