"""OpenTelemetry spans of calls, trace context in and out, and the ``glovebox.calls`` log line.

Spans go to the SDK's ``InMemorySpanExporter`` through a ``TracerProvider`` given
to each Runtime (``Runtime(tracer_provider=...)``); the global provider is set
only in subprocesses. Guests are real components, upstreams real HTTP servers on
127.0.0.1, the servers real uvicorn, the MCP client the SDK's own.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import glovebox
from glovebox.servers import create_app
from glovebox.servers._mcp import McpService, streamable_http_app

from ..capabilities.test_http import QuietHandler, in_thread

BuildGuest = Callable[[str], Path]
SECRET = "tr4ce-S3CRET-value-never-in-a-span"
#: A caller's W3C trace context: trace id, parent span id.
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


class Traced:
    """A TracerProvider whose finished spans are kept in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.spans(name)
        return span

    def children(self, parent: ReadableSpan) -> list[str]:
        assert parent.context is not None
        return [s.name for s in self.spans() if s.parent is not None and s.parent.span_id == parent.context.span_id]


@pytest.fixture
def traced() -> Iterator[Traced]:
    kept = Traced()
    yield kept
    kept.provider.shutdown()


class _Recorder(QuietHandler):
    """Records each request's path and headers; ``/hold`` waits until released."""

    server: _Upstream

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self.server.seen.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}})
        if self.path.startswith("/hold"):
            self.server.waiting.set()
            self.server.release.wait(30)
        self._reply(200, b'{"fine": true}', {"Content-Type": "application/json"})


class _Upstream(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[dict[str, Any]]
    waiting: threading.Event
    release: threading.Event


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    httpd = _Upstream(("127.0.0.1", 0), _Recorder)
    httpd.seen, httpd.waiting, httpd.release = [], threading.Event(), threading.Event()
    with in_thread(httpd, httpd.release.set):
        yield httpd


def rule(server: _Upstream, **extra: Any) -> dict[str, Any]:
    port = server.server_address[1]
    return {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/items/*", "/hold"]} | {
        "allow_private": True,
        **extra,
    }


def url(server: _Upstream, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def http_runtime(home: Path, build_guest: BuildGuest, traced: Traced, grants: dict[str, Any], **kw: Any) -> Any:
    rt = glovebox.Runtime(home=home, grants=grants, tracer_provider=traced.provider, **kw)
    declared = [rule_ for rule_ in grants["http"]]
    rt.register(build_guest("http_client"), manifest={"name": "hc", "capabilities": {"http": declared}})
    return rt


def every_text(spans: list[ReadableSpan]) -> str:
    """Everything the spans would export: names, attributes, events, status, resource-free."""
    parts = []
    for span in spans:
        parts.append(span.name)
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        parts.extend(json.dumps([e.name, dict(e.attributes or {})], default=str) for e in span.events)
        parts.append(str(span.status.description))
    return "\n".join(parts)


# -- the span tree -----------------------------------------------------------------------------


def test_an_ok_call_is_one_span_with_its_steps(_isolated_env: Path, build_example: BuildGuest, traced: Traced) -> None:
    with glovebox.Runtime(home=_isolated_env, tracer_provider=traced.provider) as rt:
        info = rt.register(build_example("calc"))
        result = rt.call("calc", {"expression": "123456 + 654321"}, principal="alice")
    assert result.ok
    call = traced.one("glovebox.call")
    assert call.parent is None
    assert call.status.status_code == StatusCode.UNSET
    assert dict(call.attributes or {}) == {
        "glovebox.call_id": result.meta["call_id"],
        "glovebox.tool": "calc",
        "glovebox.version": info.version,
        "glovebox.digest": info.digest,
        "glovebox.principal": "alice",
        "glovebox.outcome": "ok",
        "glovebox.fuel_used": result.meta["fuel_used"],
        "glovebox.duration_ms": result.meta["duration_ms"],
        "glovebox.policy.decision": "allow",
    }
    assert traced.children(call) == ["glovebox.policy", "glovebox.validate", "glovebox.sandbox", "glovebox.validate"]
    validations = [dict(s.attributes or {}) for s in traced.spans("glovebox.validate")]
    assert validations == [{"glovebox.validate.which": "input"}, {"glovebox.validate.which": "output"}]
    assert dict(traced.one("glovebox.policy").attributes or {}) == {"glovebox.policy.decision": "allow"}
    assert dict(traced.one("glovebox.sandbox").attributes or {}) == {"glovebox.fuel_used": result.meta["fuel_used"]}
    assert result.output == {"value": 777777}
    assert "123456" not in every_text(traced.spans()) and "777777" not in every_text(traced.spans())


def test_a_call_that_runs_out_of_fuel_is_an_error_span(
    _isolated_env: Path, build_guest: BuildGuest, traced: Traced
) -> None:
    with glovebox.Runtime(home=_isolated_env, tracer_provider=traced.provider) as rt:
        rt.register(build_guest("fuel_burner"), manifest={"name": "burner", "limits": {"fuel": 100_000}})
        result = rt.call("burner", {})
    assert result.code == "fuel_exhausted"
    call, sandbox = traced.one("glovebox.call"), traced.one("glovebox.sandbox")
    for span in (call, sandbox):
        assert span.status.status_code == StatusCode.ERROR
        assert span.status.description == "fuel_exhausted"
    assert call.attributes is not None and call.attributes["glovebox.outcome"] == "fuel_exhausted"
    assert call.attributes["glovebox.fuel_used"] == result.meta["fuel_used"] > 0
    assert result.error is not None and result.error.message not in every_text(traced.spans())


def test_invalid_input_fails_the_validate_span_with_its_code_and_no_message(
    _isolated_env: Path, build_example: BuildGuest, traced: Traced
) -> None:
    with glovebox.Runtime(home=_isolated_env, tracer_provider=traced.provider) as rt:
        rt.register(build_example("calc"))
        result = rt.call("calc", {"expression": "1", "private-field-name": "private value"})
    assert result.code == "invalid_input"
    validate = traced.one("glovebox.validate")
    assert (validate.status.status_code, validate.status.description) == (StatusCode.ERROR, "invalid_input")
    assert traced.spans("glovebox.sandbox") == []
    assert "private" not in every_text(traced.spans())


def test_a_denied_capability_is_an_error_span_and_a_refused_http_span(
    _isolated_env: Path, build_guest: BuildGuest, traced: Traced, upstream: _Upstream
) -> None:
    grants = {"http": [rule(upstream)]}
    with http_runtime(_isolated_env, build_guest, traced, grants) as rt:
        result = rt.call("hc", {"url": url(upstream, "/elsewhere/x")})
    assert result.ok and result.output["status"] == "denied"  # the guest reported it; the call ran
    http = traced.one("glovebox.http")
    assert (http.status.status_code, http.status.description) == (StatusCode.ERROR, "denied")
    assert dict(http.attributes or {})["glovebox.http.error"] == "denied"
    assert upstream.seen == []


def test_capability_denied_outcome_marks_the_call_span(
    _isolated_env: Path, build_example: BuildGuest, traced: Traced
) -> None:
    from ..core.test_error_codes import weather_manifest

    with glovebox.Runtime(home=_isolated_env, tracer_provider=traced.provider) as rt:
        rt.register(build_example("weather"), weather_manifest())
        result = rt.call("weather", {"latitude": 1, "longitude": 2})
    assert result.code == "capability_denied"
    call = traced.one("glovebox.call")
    assert (call.status.status_code, call.status.description) == (StatusCode.ERROR, "capability_denied")
    assert dict(call.attributes or {})["glovebox.outcome"] == "capability_denied"


# -- calls refused early -----------------------------------------------------------------------


def test_an_unknown_tool_still_has_its_span(_isolated_env: Path, traced: Traced) -> None:
    with glovebox.Runtime(home=_isolated_env, tracer_provider=traced.provider) as rt:
        result = rt.call("nope", {}, principal="bob")
    assert result.code == "tool_not_found"
    attributes = dict(traced.one("glovebox.call").attributes or {})
    assert attributes["glovebox.outcome"] == "tool_not_found"
    assert attributes["glovebox.tool"] == "nope" and attributes["glovebox.principal"] == "bob"
    assert "glovebox.version" not in attributes and "glovebox.policy.decision" not in attributes
    assert traced.spans("glovebox.policy") == []


def test_a_rate_limited_call_has_its_span_and_decision(
    tmp_path: Path, _isolated_env: Path, build_guest: BuildGuest, traced: Traced
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\ndefaults: {action: allow}\nquotas:\n  - {tool: echo, calls_per_minute: 1}\n")
    with glovebox.Runtime(home=_isolated_env, policy=policy, tracer_provider=traced.provider) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
        assert rt.call("echo", {}).ok
        limited = rt.call("echo", {})
    assert limited.code == "rate_limited"
    first, second = traced.spans("glovebox.call")
    attributes = dict(second.attributes or {})
    assert attributes["glovebox.outcome"] == "rate_limited"
    assert attributes["glovebox.policy.decision"] == "allow"
    assert (second.status.status_code, second.status.description) == (StatusCode.ERROR, "rate_limited")
    policy_span = traced.spans("glovebox.policy")[1]
    assert policy_span.status.description == "rate_limited"


def test_an_overloaded_call_has_its_span(
    _isolated_env: Path, build_guest: BuildGuest, traced: Traced, upstream: _Upstream
) -> None:
    grants = {"http": [rule(upstream)]}
    with http_runtime(_isolated_env, build_guest, traced, grants, max_in_flight=1, max_queued=0) as rt:
        held = threading.Thread(target=rt.call, args=("hc", {"url": url(upstream, "/hold")}))
        held.start()
        assert upstream.waiting.wait(30)
        refused = rt.call("hc", {"url": url(upstream, "/items/1")})
        upstream.release.set()
        held.join()
    assert refused.code == "overloaded"
    [span] = [s for s in traced.spans("glovebox.call") if (s.attributes or {})["glovebox.outcome"] == "overloaded"]
    assert span.status.description == "overloaded"
    assert dict(span.attributes or {})["glovebox.call_id"] == refused.meta["call_id"]
    assert traced.children(span) == []


# -- the caller's span is the parent ------------------------------------------------------------


def test_the_callers_span_is_the_parent(_isolated_env: Path, build_guest: BuildGuest, traced: Traced) -> None:
    with glovebox.Runtime(home=_isolated_env, tracer_provider=traced.provider) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
        with traced.provider.get_tracer("agent").start_as_current_span("agent.step") as outer:
            assert rt.call("echo", {"a": 1}).ok
    call = traced.one("glovebox.call")
    assert call.parent is not None and call.parent.span_id == outer.get_span_context().span_id
    assert call.context is not None and call.context.trace_id == outer.get_span_context().trace_id


def test_the_callers_span_is_the_parent_of_acall_on_its_thread_pool(
    _isolated_env: Path, build_guest: BuildGuest, traced: Traced
) -> None:
    async def main(rt: glovebox.Runtime) -> tuple[int, list[glovebox.CallResult]]:
        with traced.provider.get_tracer("agent").start_as_current_span("agent.step") as outer:
            results = [await rt.acall("echo", {"n": n}) for n in range(3)]
        return outer.get_span_context().span_id, results

    with glovebox.Runtime(home=_isolated_env, tracer_provider=traced.provider) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
        outer_id, results = anyio.run(main, rt)
    assert all(r.ok for r in results)
    calls = traced.spans("glovebox.call")
    assert len(calls) == 3 and all(c.parent is not None and c.parent.span_id == outer_id for c in calls)
    for call in calls:  # the steps, run on a worker thread, are the call's children
        assert traced.children(call) == ["glovebox.policy", "glovebox.sandbox"]


def test_the_http_api_takes_the_callers_traceparent(
    server_home: tuple[Path, Path], serve_app: Callable[[object], str], traced: Traced
) -> None:
    home, policy = server_home
    with glovebox.Runtime(home=home, policy=policy, tracer_provider=traced.provider) as rt:
        base = serve_app(create_app(rt))
        headers = {"Authorization": "Bearer agent-key", "traceparent": TRACEPARENT, "tracestate": "vendor=x"}
        answer = httpx.post(f"{base}/v1/tools/calc/call", json={"input": {"expression": "1+1"}}, headers=headers)
        untraced = httpx.post(
            f"{base}/v1/tools/calc/call",
            json={"input": {"expression": "2"}},
            headers={**headers, "traceparent": "junk"},
        )
    assert answer.status_code == 200 and untraced.status_code == 200
    first, second = traced.spans("glovebox.call")
    assert first.context is not None and f"{first.context.trace_id:032x}" == TRACE_ID
    assert first.parent is not None and f"{first.parent.span_id:016x}" == PARENT_ID
    assert first.context.trace_state.get("vendor") == "x"
    assert dict(first.attributes or {})["glovebox.call_id"] == answer.json()["meta"]["call_id"]
    assert second.parent is None  # a malformed traceparent is ignored: a new trace
    assert second.context is not None and f"{second.context.trace_id:032x}" != TRACE_ID


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_over_http_takes_the_callers_traceparent(
    mcp_home: tuple[Path, Path], serve_app: Callable[[object], str], traced: Traced, anyio_backend: str
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    home, policy = mcp_home
    with glovebox.Runtime(home=home, policy=policy, tracer_provider=traced.provider) as rt:
        base = serve_app(streamable_http_app(McpService(rt, poll_s=0.1)))
        headers = {"Authorization": "Bearer agent-key", "traceparent": TRACEPARENT}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(base + "/mcp", http_client=http), cache=None) as client:
                answer = await client.call_tool("calc", {"expression": "2 * 3"})
    assert answer.is_error is False
    call = traced.one("glovebox.call")
    assert call.context is not None and f"{call.context.trace_id:032x}" == TRACE_ID
    assert call.parent is not None and f"{call.parent.span_id:016x}" == PARENT_ID
    assert traced.children(call) == ["glovebox.policy", "glovebox.validate", "glovebox.sandbox", "glovebox.validate"]


# -- outgoing HTTP -------------------------------------------------------------------------------


def secret_grants(server: _Upstream, **extra: Any) -> dict[str, Any]:
    secret = {"name": "api", "source": "TRACING_TEST_TOKEN", "host": "127.0.0.1", "schemes": ["http"]}
    return {"http": [rule(server, **extra)], "secrets": [secret]}


def test_an_http_span_carries_no_header_query_path_or_secret(
    _isolated_env: Path,
    build_guest: BuildGuest,
    traced: Traced,
    upstream: _Upstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRACING_TEST_TOKEN", SECRET)
    with http_runtime(_isolated_env, build_guest, traced, secret_grants(upstream)) as rt:
        result = rt.call(
            "hc",
            {
                "url": url(upstream, f"/items/user-4711?api_key={SECRET}&q=private-query"),
                "header_name": "X-Guest-Header",
                "header_value": "guest-header-value",
            },
        )
    assert result.ok and result.output["http_status"] == 200, result.to_dict()
    [seen] = upstream.seen
    assert seen["headers"]["authorization"] == f"Bearer {SECRET}"  # the secret was really sent
    assert "traceparent" not in seen["headers"]  # the grant does not allow propagation
    http = traced.one("glovebox.http")
    assert http.kind == trace.SpanKind.CLIENT
    assert http.parent is not None and http.parent.span_id == traced.one("glovebox.sandbox").context.span_id  # type: ignore[union-attr]
    assert dict(http.attributes or {}) == {
        "http.request.method": "GET",
        "server.address": "127.0.0.1",
        "server.port": upstream.server_address[1],
        "url.scheme": "http",
        "http.route": "/items/*",
        "http.response.status_code": 200,
        "http.request.body.size": 0,
        "http.response.body.size": len(b'{"fine": true}'),
    }
    text = every_text(traced.spans())
    for leaked in (SECRET, "Bearer", "api_key", "private-query", "user-4711", "guest-header-value", "X-Guest"):
        assert leaked not in text


def test_traceparent_reaches_the_upstream_only_when_the_grant_allows_it(
    _isolated_env: Path, build_guest: BuildGuest, traced: Traced, upstream: _Upstream, tmp_path: Path
) -> None:
    forged = f"00-{'1' * 32}-{'2' * 16}-01"
    call = {"url": url(upstream, "/items/1"), "header_name": "traceparent", "header_value": forged}
    with http_runtime(_isolated_env, build_guest, traced, {"http": [rule(upstream)]}) as rt:
        assert rt.call("hc", call).ok
    assert upstream.seen[-1]["headers"]["traceparent"] == forged  # the guest's own header, untouched
    on = http_runtime(tmp_path / "on", build_guest, traced, {"http": [rule(upstream, propagate_trace=True)]})
    with on as rt:
        assert rt.call("hc", call).ok
        sent = upstream.seen[-1]["headers"]
        untraced = glovebox.Runtime(home=tmp_path / "on", grants={"http": [rule(upstream, propagate_trace=True)]})
        with untraced:
            assert untraced.call("hc", call).ok
    http = traced.spans("glovebox.http")[-1]
    assert http.context is not None
    ids = f"{http.context.trace_id:032x}-{http.context.span_id:016x}-{int(http.context.trace_flags):02x}"
    assert sent["traceparent"] == f"00-{ids}"
    assert upstream.seen[-1]["headers"]["traceparent"] == forged  # no tracer: nothing replaced


def test_propagate_trace_is_a_grant_field_off_by_default() -> None:
    assert glovebox.HttpRule(host="api.example.com").propagate_trace is False
    from glovebox.model._grants import load_grants

    with pytest.raises(glovebox.InvalidGrants, match=r"http\.0\.propagate_trace: Input should be a valid boolean"):
        load_grants({"http": [{"host": "api.example.com", "propagate_trace": "sometimes"}]})


# -- with no provider, and without opentelemetry -------------------------------------------------


def _run(code: str, home: Path, echo: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GLOVEBOX_HOME": str(home), "ECHO_WASM": str(echo)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


CALL_ECHO = """
import os, sys, glovebox
with glovebox.Runtime() as rt:
    rt.register(os.environ["ECHO_WASM"], manifest={"name": "echo"})
    result = rt.call("echo", {"x": 1})
    assert result.ok, result.to_dict()
"""


def test_calls_work_when_opentelemetry_cannot_be_imported(tmp_path: Path, build_guest: BuildGuest) -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        + CALL_ECHO
        + "    import asyncio; assert asyncio.run(rt.acall('echo', {})).ok\n"
        + "    from glovebox.telemetry import _tracing\n"
        + "    assert _tracing.attach_headers({'traceparent': '00-"
        + TRACE_ID
        + "-"
        + PARENT_ID
        + "-01'}) is None\n"
        + "    assert not any(m.startswith('opentelemetry.') for m in sys.modules), sorted(sys.modules)\n"
        + "print('ok')\n"
    )
    done = _run(code, tmp_path / "home", build_guest("echo"))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_global_provider_set_after_the_runtime_was_made_takes_effect(tmp_path: Path, build_guest: BuildGuest) -> None:
    code = (
        CALL_ECHO
        + "    from opentelemetry import trace\n"
        + "    from opentelemetry.sdk.trace import TracerProvider\n"
        + "    from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        + "    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        + "    exporter = InMemorySpanExporter()\n"
        + "    provider = TracerProvider(); provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        + "    assert rt.call('echo', {}).ok and exporter.get_finished_spans() == ()\n"
        + "    trace.set_tracer_provider(provider)\n"
        + "    assert rt.call('echo', {}).ok\n"
        + "    spans = exporter.get_finished_spans()\n"
        + "    print(sorted(s.name for s in spans), spans[-1].instrumentation_scope.name)\n"
    )
    done = _run(code, tmp_path / "home", build_guest("echo"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['glovebox.call', 'glovebox.policy', 'glovebox.sandbox'] glovebox"


def test_tracer_provider_must_be_a_provider(_isolated_env: Path) -> None:
    with pytest.raises(TypeError, match="tracer_provider must be a TracerProvider, not str"):
        glovebox.Runtime(home=_isolated_env, tracer_provider="console")


# -- the glovebox.calls log line ------------------------------------------------------------------


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def call_lines() -> Iterator[_Lines]:
    from glovebox.telemetry._calllog import CALLS

    handler, level = _Lines(), CALLS.level
    CALLS.addHandler(handler)
    CALLS.setLevel(logging.INFO)
    yield handler
    CALLS.removeHandler(handler)
    CALLS.setLevel(level)


def test_a_traced_calls_log_line_carries_its_span_ids(
    _isolated_env: Path, build_guest: BuildGuest, traced: Traced, call_lines: _Lines
) -> None:
    from glovebox.telemetry._calllog import JsonFormatter

    with glovebox.Runtime(home=_isolated_env, tracer_provider=traced.provider) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
        result = rt.call("echo", {"secret-input": SECRET}, principal="carol")
        [row] = rt.audit.tail(1)
    [record] = call_lines.records
    line = json.loads(JsonFormatter().format(record))
    span = traced.one("glovebox.call")
    assert span.context is not None
    assert line["call_id"] == result.meta["call_id"] == row["call_id"]
    assert line["trace_id"] == f"{span.context.trace_id:032x}" and line["span_id"] == f"{span.context.span_id:016x}"
    assert (line["tool"], line["principal"], line["outcome"], line["logger"]) == (
        "echo",
        "carol",
        "ok",
        "glovebox.calls",
    )
    assert SECRET not in json.dumps(line)


@pytest.mark.slow
def test_a_process_pool_makes_the_call_span_in_the_calling_process(
    _isolated_env: Path, build_guest: BuildGuest, traced: Traced
) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
    with glovebox.ProcessPool(1, home=_isolated_env, tracer_provider=traced.provider) as pool:
        with traced.provider.get_tracer("agent").start_as_current_span("agent.step") as outer:
            result = pool.call("echo", {"a": 1})
            missing = pool.call("nope", {})
    assert result.ok and missing.code == "tool_not_found"
    first, second = traced.spans("glovebox.call")
    assert first.parent is not None and first.parent.span_id == outer.get_span_context().span_id
    assert dict(first.attributes or {})["glovebox.call_id"] == result.meta["call_id"]
    assert dict(second.attributes or {})["glovebox.outcome"] == "tool_not_found"
    assert second.status.description == "tool_not_found"
    assert traced.spans("glovebox.sandbox") == []  # the worker's steps are not traced


class _FileExporter(SpanExporter):
    """Appends each finished span to a file as one JSON line (a worker process's spans, read back by the test)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Any) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                fact = {
                    "name": span.name,
                    "trace_id": f"{span.context.trace_id:032x}",
                    "span_id": f"{span.context.span_id:016x}",
                    "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
                    "attributes": dict(span.attributes or {}),
                }
                out.write(json.dumps(fact) + "\n")
        return SpanExportResult.SUCCESS


def export_spans_to(path: str) -> None:
    """A ProcessPool ``initializer``: this worker's global tracer provider writes its spans to ``path``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_FileExporter(path)))
    trace.set_tracer_provider(provider)


def _hex(span: Any) -> tuple[str, str]:
    context = span.get_span_context()
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["call", "acall"])
def test_a_process_pool_worker_with_a_provider_records_the_call_span_under_the_callers(
    _isolated_env: Path, tmp_path: Path, build_guest: BuildGuest, traced: Traced, call_lines: _Lines, how: str
) -> None:
    from glovebox.telemetry._calllog import JsonFormatter

    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
    recorded = tmp_path / "worker-spans.jsonl"
    init = {"initializer": export_spans_to, "initargs": (str(recorded),)}
    with glovebox.ProcessPool(1, home=_isolated_env, tracer_provider=traced.provider, **init) as pool:
        with traced.provider.get_tracer("agent").start_as_current_span("agent.step") as outer:
            if how == "call":
                result = pool.call("echo", {"a": 1})
            else:
                result = anyio.run(pool.acall, "echo", {"a": 1})  # the caller's context goes with the task
    assert result.ok and result.output == {"a": 1}
    spans = [json.loads(line) for line in recorded.read_text().splitlines()]
    [call] = [span for span in spans if span["name"] == "glovebox.call"]
    assert (call["trace_id"], call["parent_id"]) == _hex(outer)  # the caller's span is its parent
    assert call["attributes"]["glovebox.call_id"] == result.meta["call_id"]
    assert call["attributes"]["glovebox.policy.decision"] == "allow"
    [sandbox] = [span for span in spans if span["name"] == "glovebox.sandbox"]
    assert (sandbox["trace_id"], sandbox["parent_id"]) == (call["trace_id"], call["span_id"])
    assert traced.spans("glovebox.call") == []  # one glovebox.call span per call: the worker's
    [record] = call_lines.records  # this process's log line names the worker's span
    line = json.loads(JsonFormatter().format(record))
    assert (line["call_id"], line["trace_id"], line["span_id"]) == (
        result.meta["call_id"],
        call["trace_id"],
        call["span_id"],
    )


@pytest.mark.slow
def test_a_process_pool_worker_without_a_caller_span_starts_a_trace_and_bogus_span_ids_are_refused(
    _isolated_env: Path, tmp_path: Path, build_guest: BuildGuest
) -> None:
    from glovebox.scale._procpool import _is_span_ids

    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
    recorded = tmp_path / "worker-spans.jsonl"
    with glovebox.ProcessPool(1, home=_isolated_env, initializer=export_spans_to, initargs=(str(recorded),)) as pool:
        assert pool.call("echo", {"a": 1}).ok
    [call] = [json.loads(line) for line in recorded.read_text().splitlines() if "glovebox.call" in line]
    assert call["name"] == "glovebox.call" and call["parent_id"] is None
    assert _is_span_ids((1, 2)) and not any(_is_span_ids(v) for v in [(0, 1), (1,), [1, 2], (True, 2), ("1", 2), None])


def test_the_context_sent_to_a_worker_is_traceparent_and_tracestate_without_baggage(traced: Traced) -> None:
    from opentelemetry import baggage, context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState, set_span_in_context

    from glovebox.telemetry._tracing import carrier

    assert carrier() is None  # no span: nothing to send
    remote = SpanContext(
        int(TRACE_ID, 16), int(PARENT_ID, 16), True, TraceFlags(TraceFlags.SAMPLED), TraceState([("vendor", "x1")])
    )
    token = context.attach(baggage.set_baggage("user", SECRET, set_span_in_context(NonRecordingSpan(remote))))
    try:
        with traced.provider.get_tracer("agent").start_as_current_span("agent.step") as outer:
            sent = carrier()
    finally:
        context.detach(token)
    assert sent == {"traceparent": f"00-{TRACE_ID}-{_hex(outer)[1]}-01", "tracestate": "vendor=x1"}
    assert SECRET not in json.dumps(sent)


class _Broken(SpanProcessor):
    """A span processor that raises where the SDK calls it (at start or at end)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.where == "start":
            raise RuntimeError("processor broke at start")

    def on_end(self, span: Any) -> None:
        if self.where == "end":
            raise RuntimeError("processor broke at end")


@pytest.mark.parametrize("where", ["start", "end"])
def test_a_failing_span_processor_never_fails_a_call(
    _isolated_env: Path, build_example: BuildGuest, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(_Broken(where))
    caller = Traced()
    with glovebox.Runtime(home=_isolated_env, tracer_provider=provider) as rt:
        rt.register(build_example("calc"))
        with caller.provider.get_tracer("agent").start_as_current_span("agent.step"):
            ok = rt.call("calc", {"expression": "6 * 7"})
        failed = rt.call("calc", {"expression": "6 *"})
        [row] = rt.audit.tail(1)
    assert dict(caller.one("agent.step").attributes or {}) == {}  # nothing landed on the caller's span
    assert ok.ok and ok.output == {"value": 42}
    assert failed.code == "guest_error" and row["outcome"] == "guest_error"
    assert f"processor broke at {where}" in caplog.text
    assert trace.get_current_span() is trace.INVALID_SPAN  # no span left current
