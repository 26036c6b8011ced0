"""The HTTP API against a real uvicorn server on 127.0.0.1, with httpx."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import glovebox
from glovebox.servers import create_app

from ..conftest import metric_samples

AGENT = {"Authorization": "Bearer agent-key"}
OUTSIDER = {"X-API-Key": "outsider-key"}


@pytest.fixture
def url(server_home: tuple[Path, Path], serve_app: Callable[[object], str]) -> Iterator[str]:
    home, policy = server_home
    with glovebox.Runtime(home=home, policy=policy) as rt:
        yield serve_app(create_app(rt, max_body_bytes=4096, workers=8))


def test_list_describe_call(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        listed = client.get("/v1/tools", headers=AGENT)
        assert listed.status_code == 200
        assert [t["name"] for t in listed.json()["tools"]] == ["calc", "text-stats"]
        assert listed.json()["tools"][0]["input_schema"]["required"] == ["expression"]
        assert [t["name"] for t in client.get("/v1/tools", headers=OUTSIDER).json()["tools"]] == []

        described = client.get("/v1/tools/calc", headers=AGENT)
        assert described.status_code == 200 and described.json()["digest"].startswith("sha256:")
        assert client.get("/v1/tools/calc", headers=OUTSIDER).status_code == 404
        assert client.get("/v1/tools/nope", headers=AGENT).json()["error"]["code"] == "tool_not_found"

        ok = client.post("/v1/tools/calc/call", json={"input": {"expression": "2 * (3 + 4)"}}, headers=AGENT)
        assert ok.status_code == 200
        assert ok.json()["ok"] is True and ok.json()["output"] == {"value": 14}
        assert ok.json()["meta"]["principal"] == "agent"

        failed = client.post("/v1/tools/calc/call", json={"input": {"expression": "2 +"}}, headers=AGENT)
        assert failed.status_code == 200
        assert failed.json()["ok"] is False and failed.json()["error"]["code"] == "guest_error"

        missing = client.post("/v1/tools/nope/call", json={"input": {}}, headers=AGENT)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "tool_not_found"


def test_auth_failures_are_401_with_the_envelope(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}, {"Authorization": "Basic x"}):
            for response in (
                client.get("/v1/tools", headers=headers),
                client.get("/v1/tools/calc", headers=headers),
                client.post("/v1/tools/calc/call", json={"input": {"expression": "1"}}, headers=headers),
            ):
                assert response.status_code == 401, headers
                body = response.json()
                assert body["ok"] is False and set(body["error"]) == {"code", "message", "retryable", "details"}
                assert body["error"]["code"] == "permission_denied"
                assert response.headers["www-authenticate"].startswith("Bearer")
        health = client.get("/healthz").json()
        assert health == {"ok": True, "policy_error": None, "pid": health["pid"]} and isinstance(health["pid"], int)


def test_denials_are_403_with_the_envelope(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        blocked = client.post("/v1/tools/calc/call", json={"input": {"expression": "1"}}, headers=OUTSIDER)
        assert blocked.status_code == 403
        assert blocked.json()["error"]["code"] == "permission_denied"
        assert blocked.json()["meta"]["principal"] == "outsider"

        scope = client.post("/v1/tools/text-stats/call", json={"input": {"text": "a"}}, headers=OUTSIDER)
        assert scope.status_code == 403
        assert scope.json()["error"]["details"]["missing_scopes"] == ["text:read"]


def test_bad_bodies(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        big = client.post("/v1/tools/text-stats/call", json={"input": {"text": "x" * 5000}}, headers=AGENT)
        assert big.status_code == 413
        assert big.json()["error"]["code"] == "invalid_input"
        assert big.json()["error"]["details"] == {"max_body_bytes": 4096}

        def chunks() -> Iterator[bytes]:
            yield b'{"input": {"text": "'
            for _ in range(10):
                yield b"x" * 1000  # no Content-Length: the limit holds while streaming
            yield b'"}}'

        streamed = client.post("/v1/tools/text-stats/call", content=chunks(), headers=AGENT)
        assert streamed.status_code == 413

        not_json = client.post("/v1/tools/text-stats/call", content=b"{nope", headers=AGENT)
        assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "invalid_input"
        no_input = client.post("/v1/tools/text-stats/call", json={"text": "a"}, headers=AGENT)
        assert no_input.status_code == 400

        invalid = client.post("/v1/tools/text-stats/call", json={"input": {"text": 5}}, headers=AGENT)
        assert invalid.status_code == 200 and invalid.json()["error"]["code"] == "invalid_input"


def _hidden_names_in(text: str, hidden: set[str]) -> set[str]:
    return {name for name in hidden if name in text}


def test_not_found_answers_name_no_tool_the_caller_may_not_see(url: str) -> None:
    registered = {"calc", "text-stats", "stress"}
    visible = {"agent": {"calc", "text-stats"}, "outsider": set()}
    with httpx.Client(base_url=url) as client:
        for who, headers in (("agent", AGENT), ("outsider", OUTSIDER)):
            answers = [
                client.post("/v1/tools/nope/call", json={"input": {}}, headers=headers),
                client.post("/v1/tools/nope/call", json={"input": {"expression": "1"}}, headers=headers),
                client.get("/v1/tools/nope", headers=headers),
                client.get("/v1/nope", headers=headers),
                client.get("/v1/tools/nope/call/more", headers=headers),
            ]
            for answer in answers:
                assert answer.status_code == 404, answer.text
                assert _hidden_names_in(answer.text, registered - visible[who]) == set(), (who, answer.text)
            for answer in answers[:3]:
                assert answer.json()["error"]["code"] == "tool_not_found"
                assert answer.json()["error"]["message"] == f"no tool named 'nope' is visible to '{who}'"
                assert answer.json()["error"]["details"] == {"tool": "nope"}


def _assert_envelope(response: httpx.Response, status: int, code: str) -> Any:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"ok", "error", "meta"} and body["ok"] is False
    assert set(body["error"]) == {"code", "message", "retryable", "details"}
    assert body["error"]["code"] == code and body["meta"]["call_id"] is None
    return body


def test_every_non_200_answer_is_an_envelope(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        for method, path, allowed in (
            ("GET", "/v1/tools/calc/call", ["POST"]),
            ("POST", "/v1/tools", ["GET", "HEAD"]),
            ("DELETE", "/v1/tools/calc", ["GET", "HEAD"]),
            ("PUT", "/metrics", ["GET", "HEAD"]),
        ):
            answer = client.request(method, path, headers=AGENT)
            body = _assert_envelope(answer, 405, "invalid_input")
            assert body["error"]["details"] == {"status": 405, "allowed": allowed}
            assert sorted(answer.headers["allow"].split(", ")) == allowed
        for path in ("/", "/v2/tools", "/v1/tools/", "/v1/tools/calc/call/", "/healthz/x"):
            answer = client.get(path, headers=AGENT)  # "/v1/tools/" is no redirect: a 307 is not an envelope
            body = _assert_envelope(answer, 404, "invalid_input")
            assert "GET /v1/tools" in body["error"]["message"]


def test_a_server_failure_is_an_opaque_500_envelope(
    tmp_path: Path,
    build_example: Callable[[str], Path],
    serve_app: Callable[[object], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt = glovebox.Runtime(home=tmp_path / "anon")
    rt.register(build_example("calc"))
    with httpx.Client(base_url=serve_app(create_app(rt, insecure_anonymous=True))) as client:
        assert client.get("/v1/tools").status_code == 200
        rt.close()  # every handler that reaches the runtime now raises ValueError
        for answer in (client.get("/v1/tools"), client.post("/v1/tools/calc/call", json={"input": {}})):
            body = _assert_envelope(answer, 500, "internal_error")
            assert "closed" not in answer.text and "ValueError" not in answer.text
            assert body["error"]["message"] == "internal error; the server's log holds the detail"
        requests = metric_samples(client.get("/metrics").text, "glovebox_http_requests_total")
        assert ({"route": "/v1/tools", "status": "500"}, 1) in requests
    assert "ValueError: this Runtime is closed" in caplog.text, "the detail goes to the server's log"


def test_metrics_count_every_answer_with_bounded_labels(url: str) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    with httpx.Client(base_url=url) as client:
        client.get("/v1/tools", headers=AGENT)
        client.get("/v1/tools", headers={})
        client.post("/v1/tools/calc/call", json={"input": {"expression": "1+1"}}, headers=AGENT)
        client.post("/v1/tools/calc/call", content=b"{nope", headers=AGENT)
        client.post("/v1/tools/calc/call", json={"input": {"expression": "1" * 5000}}, headers=AGENT)
        client.post("/v1/tools/calc/call", json={"input": {}}, headers={"X-API-Key": "wrong"})
        for i in range(5):
            client.post(f"/v1/tools/made-up-{i}/call", json={"input": {}}, headers=AGENT)
        client.get("/v1/tools/made-up-x", headers=AGENT)
        client.get("/made-up-route", headers=AGENT)
        client.get("/v1/tools/calc/call", headers=AGENT)
        text = client.get("/metrics").text

    assert "made-up" not in text, "a caller-chosen name or path became a label value"
    families = {family.name: family for family in text_string_to_metric_families(text)}
    requests = {
        (s.labels["route"], s.labels["status"]): s.value
        for s in families["glovebox_http_requests"].samples
        if s.name == "glovebox_http_requests_total"
    }
    assert requests == {
        ("/v1/tools", "200"): 1,
        ("/v1/tools", "401"): 1,
        ("/v1/tools/{name}/call", "200"): 1,
        ("/v1/tools/{name}/call", "400"): 1,
        ("/v1/tools/{name}/call", "401"): 1,
        ("/v1/tools/{name}/call", "404"): 5,
        ("/v1/tools/{name}/call", "405"): 1,
        ("/v1/tools/{name}/call", "413"): 1,
        ("/v1/tools/{name}", "404"): 1,
        ("(unmatched)", "404"): 1,
    }
    calls = {(s.labels["tool"], s.labels["outcome"]): s.value for s in families["glovebox_calls"].samples}
    assert calls == {("calc", "ok"): 1, ("(unknown)", "tool_not_found"): 5}
    assert {s.labels["tool"] for s in families["glovebox_fuel_used"].samples} == {"calc", "(unknown)"}
    assert families["glovebox_call_duration_seconds"].type == "histogram"
    assert families["glovebox_live_instances"].samples[0].value == 0


#: Calls in one burst, and how many are in flight at once: six times the server's 8 workers.
BURST_CALLS, BURST_CONNECTIONS = 150, 48


@pytest.mark.slow
def test_burst_of_concurrent_calls(url: str) -> None:
    async def burst() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=BURST_CONNECTIONS)
        async with httpx.AsyncClient(base_url=url, headers=AGENT, limits=limits, timeout=60) as client:
            return await asyncio.gather(
                *(
                    client.post("/v1/tools/text-stats/call", json={"input": {"text": "w " * (i % 50)}})
                    for i in range(BURST_CALLS)
                )
            )

    responses = asyncio.run(burst())
    assert len(responses) == BURST_CALLS
    for i, response in enumerate(responses):
        assert response.status_code == 200
        envelope = response.json()
        assert envelope["ok"] is True, envelope
        assert envelope["output"]["words"] == i % 50
    assert len({r.json()["meta"]["call_id"] for r in responses}) == BURST_CALLS

    metrics = httpx.get(url + "/metrics").text
    assert metric_samples(metrics, "glovebox_calls_total") == [({"tool": "text-stats", "outcome": "ok"}, BURST_CALLS)]
    assert metric_samples(metrics, "glovebox_call_duration_seconds_count") == [({}, BURST_CALLS)]
    assert metric_samples(metrics, "glovebox_live_instances") == [({}, 0)]
    assert [labels for labels, _ in metric_samples(metrics, "glovebox_fuel_used_total")] == [{"tool": "text-stats"}]


def test_refuses_to_serve_without_a_policy(runtime: glovebox.Runtime) -> None:
    with pytest.raises(ValueError, match="--insecure-anonymous"):
        create_app(runtime)


def test_insecure_anonymous(
    tmp_path: Path, build_example: Callable[[str], Path], serve_app: Callable[[object], str]
) -> None:
    with glovebox.Runtime(home=tmp_path / "anon") as rt:
        rt.register(build_example("calc"))
        with httpx.Client(base_url=serve_app(create_app(rt, insecure_anonymous=True))) as client:
            ok = client.post("/v1/tools/calc/call", json={"input": {"expression": "1+1"}})
            assert ok.json()["output"] == {"value": 2} and ok.json()["meta"]["principal"] == "anonymous"
            assert client.get("/v1/tools", headers={"X-API-Key": "any"}).status_code == 401


def test_cli_serve_refuses_without_a_policy() -> None:
    from click.testing import CliRunner

    from glovebox.cli._main import cli

    result = CliRunner().invoke(cli, ["serve", "--port", "1"])
    assert result.exit_code == 1
    assert "no policy is configured" in result.output and "--insecure-anonymous" in result.output


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_cli_names_the_missing_extra(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    import glovebox.servers
    from glovebox.cli._main import cli

    monkeypatch.setattr(glovebox.servers, "missing_serve_dependency", lambda *modules: modules[-1])
    result = CliRunner().invoke(cli, [command])
    assert result.exit_code == 1
    assert "pip install 'glovebox-runtime[serve]'" in result.output


def test_hostile_json_always_answers_an_envelope(
    tmp_path: Path, build_guest: Callable[[str], Path], serve_app: Callable[[object], str]
) -> None:
    deep = b'{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    bodies = {
        "deep": (deep, "the body is nested deeper than 64 levels"),
        "number": (b'{"input": ' + b"9" * 10_000 + b"}", "the body holds a number of 10000 characters"),
        "surrogate": (b'{"input": "\\ud800"}', "the body holds a lone surrogate (U+D800) in a string at /input"),
        "not-utf8": (b'{"input": "\xff"}', "the body is not JSON: its bytes are not valid utf-8"),
    }
    with glovebox.Runtime(home=tmp_path / "anon") as rt:
        rt.register(build_guest("hostile_json"), {"name": "hostile-json"})
        app = create_app(rt, insecure_anonymous=True, max_body_bytes=1024 * 1024)
        with httpx.Client(base_url=serve_app(app)) as client:
            for body, message in bodies.values():
                refused = client.post("/v1/tools/hostile-json/call", content=body)
                assert refused.status_code == 400
                error = refused.json()["error"]
                assert error["code"] == "invalid_input" and error["message"].startswith(message)
            for request in ("surrogate 0", "deep 100000", "number 1000000"):
                answered = client.post("/v1/tools/hostile-json/call", json={"input": request})
                assert answered.status_code == 200 and answered.json()["error"]["code"] == "invalid_output"
        assert rt.audit.verify().rows == 3, "a refused body reaches no call; each call is one row"
