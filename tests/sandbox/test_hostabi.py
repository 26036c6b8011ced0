"""The host functions read the guest's request and write their answer exactly (see ``_hostabi``).

A real C guest (``tests/guests/http_shapes.c``) sends requests of chosen shapes.
The first tests put a recording capability behind ``http-fetch`` (the guest,
the engine and the C-level reading and writing are real; only the HTTP client is
left out) so that what the host read and what the guest got back can be compared
byte for byte. The others go through the whole Runtime to a server on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from wasmtime.component import Component, Record, Variant

import glovebox
from glovebox.engine._engine import SharedEngine, acquire_engine
from glovebox.engine._settings import EngineSettings
from glovebox.model._manifest import Limits
from glovebox.sandbox._callstate import CallState, HttpRequest
from glovebox.sandbox._sandbox import Sandbox

from ..capabilities.test_http import QuietHandler, _Server, in_thread
from ..conftest import GUESTS

BuildGuest = Callable[[str], Path]
LIMITS = Limits(memory_bytes=64 * 1024 * 1024, timeout_ms=20_000)


def pattern(n: int) -> bytes:
    """The guest's body of ``n`` bytes: byte i is (7i + 3) mod 256."""
    return bytes((7 * i + 3) & 0xFF for i in range(n))


def fnv(data: bytes) -> str:
    value = 1469598103934665603
    for byte in data:
        value = ((value ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


class Recorder:
    """A capability that keeps each request it is given and answers ``answer``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[HttpRequest] = []

    def fetch(self, request: Any, state: CallState) -> Any:
        self.requests.append(request)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    def close(self) -> None:
        pass

    def scrub(self, text: str) -> str:
        return text


@pytest.fixture(scope="module")
def shared() -> Iterator[SharedEngine]:
    engine = acquire_engine(EngineSettings())
    yield engine
    engine.release()


@pytest.fixture(scope="module")
def shapes(shared: SharedEngine, build_guest: BuildGuest) -> Component:
    return Component(shared.engine, build_guest("http_shapes").read_bytes())


def run(shared: SharedEngine, component: Component, recorder: Recorder, **value: Any) -> dict[str, Any]:
    value.setdefault("url", "http://api.example.com/x")
    outcome = Sandbox(shared).run(component, json.dumps(value), LIMITS, http=recorder)
    assert outcome.error is None, outcome.error
    assert outcome.output_text is not None
    output: dict[str, Any] = json.loads(outcome.output_text)
    return output


def response(status: int, headers: list[tuple[str, str]], body: bytes) -> Record:
    record = Record()
    record.__dict__.update(status=status, headers=headers, body=body)
    return record


ODD = 'a\tb "q" \\ %41 ~ ;=,' + "x" * 8192


def test_the_request_is_read_exactly(shared: SharedEngine, shapes: Component) -> None:
    recorder = Recorder(response(204, [], b""))
    url = "https://api.example.com/p%20q/%F0%9F%94%91?a=1&b=%00#frag"
    out = run(shared, shapes, recorder, url=url, method="PATCH", headers=300, value=ODD, body=300_000)
    assert out["status"] == "ok" and out["http_status"] == 204 and out["body_len"] == 0
    [request] = recorder.requests
    assert (request.method, request.url) == ("PATCH", url)
    assert request.headers == [(f"X-H-{i}", ODD) for i in range(300)]
    assert request.body == pattern(300_000)


def test_non_ascii_and_empty_strings_are_read_as_written(shared: SharedEngine, shapes: Component) -> None:
    recorder = Recorder(response(200, [], b""))
    run(shared, shapes, recorder, name="X-é🔑", value="café ✓ 🔑", headers=2, body=-1)
    run(shared, shapes, recorder, name="", value="", headers=1, body=-1)
    assert recorder.requests[0].headers == [("X-é🔑-0", "café ✓ 🔑"), ("X-é🔑-1", "café ✓ 🔑")]
    assert recorder.requests[1].headers == [("-0", "")]


def test_an_empty_body_is_not_a_missing_body(shared: SharedEngine, shapes: Component) -> None:
    recorder = Recorder(response(200, [], b""))
    run(shared, shapes, recorder, body=0)
    run(shared, shapes, recorder, body=-1)
    run(shared, shapes, recorder, body=1)
    assert [r.body for r in recorder.requests] == [b"", None, b"\x03"]


def test_the_response_is_written_exactly(shared: SharedEngine, shapes: Component) -> None:
    body = bytes(range(256)) * 4096 + b"\x00"  # 1 MiB and a NUL, every byte value
    headers = [(f"X-R-{i}", "café ✓" if i % 2 else "") for i in range(150)]
    out = run(shared, shapes, Recorder(response(65535, headers, body)))
    assert out["http_status"] == 65535
    assert (out["body_len"], out["body_fnv"]) == (len(body), fnv(body))
    assert [tuple(pair) for pair in out["headers"]] == headers


@pytest.mark.parametrize("kind", ["denied", "timeout", "too-large", "network"])
def test_each_error_kind_reaches_the_guest_with_its_reason(shared: SharedEngine, shapes: Component, kind: str) -> None:
    reason = f"no: {kind} ✓ " + "r" * 10_000
    out = run(shared, shapes, Recorder(Variant(kind, reason)))
    assert out == {"status": kind, "reason": reason}


@pytest.mark.parametrize(
    "answer",
    [
        RuntimeError("the capability broke"),
        response(70_000, [], b""),  # not a u16
        response(200, [("x", "\ud800")], b""),  # a lone surrogate: not UTF-8
        Variant("refused", "an unknown kind"),
        "not a response",
    ],
    ids=["raises", "status", "surrogate", "kind", "type"],
)
def test_a_host_failure_is_a_network_error_never_a_trap(shared: SharedEngine, shapes: Component, answer: Any) -> None:
    out = run(shared, shapes, Recorder(answer))
    assert out == {"status": "network", "reason": "host error"}


def test_a_call_without_the_capability_is_denied_by_name(shared: SharedEngine, shapes: Component) -> None:
    outcome = Sandbox(shared).run(shapes, json.dumps({"url": "http://api.example.com/k?s=1"}), LIMITS)
    assert outcome.output_text is not None
    assert json.loads(outcome.output_text) == {
        "status": "denied",
        "reason": "the http capability is not granted to this call",
    }
    assert outcome.state.denials[0]["url"] == "http://api.example.com/k?s=1"


# -- through the Runtime, to a real server --------------------------------------------------------


class _Mirror(QuietHandler):
    """Answers with the request's body and every X- header it got, plus the body's SHA-256."""

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        mirrored = {name: value for name, value in self.headers.items() if name.lower().startswith("x-")}
        mirrored["X-Body-Sha256"] = hashlib.sha256(body).hexdigest()
        self._reply(200, body, mirrored)

    do_GET = do_POST = do_PUT = _handle


@pytest.fixture
def mirror() -> Iterator[int]:
    httpd = _Server(("127.0.0.1", 0), _Mirror)
    httpd.seen, httpd.release = [], threading.Event()
    with in_thread(httpd):
        yield httpd.server_address[1]


@pytest.fixture
def mirror_runtime(_isolated_env: Path, build_guest: BuildGuest, mirror: int) -> Iterator[glovebox.Runtime]:
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [mirror], "paths": ["/**"]}
    rule |= {"methods": ["GET", "POST", "PUT"], "allow_private": True}
    limits = {"max_request_bytes": 8 * 1024 * 1024, "max_response_bytes": 8 * 1024 * 1024}
    with glovebox.Runtime(home=_isolated_env, grants={"http": [rule], "http_limits": limits}) as rt:
        manifest = {
            "name": "shapes",
            "capabilities": {"http": [rule]},
            "limits": {"memory_bytes": 128 * 1024 * 1024, "timeout_ms": 30_000, "fuel": 5_000_000_000},
        }
        rt.register(build_guest("http_shapes"), manifest=manifest)
        rt.mirror_url = f"http://127.0.0.1:{mirror}/m"  # type: ignore[attr-defined]
        yield rt


def test_many_headers_and_a_large_body_round_trip_through_a_real_upstream(mirror_runtime: glovebox.Runtime) -> None:
    url = mirror_runtime.mirror_url  # type: ignore[attr-defined]
    odd = 'a\tb "q" \\ %41 ~ ;=,\''
    result = mirror_runtime.call(
        "shapes", {"url": url, "method": "PUT", "headers": 90, "value": odd, "body": 1_000_000}
    )
    assert result.ok, result.to_dict()
    out = result.output
    sent = pattern(1_000_000)
    assert (out["http_status"], out["body_len"], out["body_fnv"]) == (200, len(sent), fnv(sent))
    got = {name.lower(): value for name, value in out["headers"]}
    assert got["x-body-sha256"] == hashlib.sha256(sent).hexdigest()
    assert all(got[f"x-h-{i}"] == odd for i in range(90))
    [egress] = result.meta["egress"]
    assert (egress["bytes_out"], egress["bytes_in"]) == (len(sent), len(sent))


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("café", "header X-H-0 has a non-ASCII value"),
        ("a\r\nX-Injected: 1", "header 'X-H-0' contains CR, LF or NUL"),
    ],
)
def test_odd_header_values_are_refused_by_name(mirror_runtime: glovebox.Runtime, value: str, reason: str) -> None:
    url = mirror_runtime.mirror_url  # type: ignore[attr-defined]
    result = mirror_runtime.call("shapes", {"url": url, "headers": 1, "value": value})
    assert result.output == {"status": "denied", "reason": reason}
    assert result.meta["denials"][0]["reason"] == reason


@pytest.mark.parametrize(
    ("headers", "value", "reason"),
    [
        (101, "v", "101 request headers, over the limit of 100"),
        (200_000, "v", "200000 request headers, over the limit of 100"),
        (9, "v" * 8000, "request headers of 72045 characters, over the 65536-character limit"),
    ],
)
def test_too_many_or_too_large_headers_never_leave_the_host(
    mirror_runtime: glovebox.Runtime, headers: int, value: str, reason: str
) -> None:
    url = mirror_runtime.mirror_url  # type: ignore[attr-defined]
    result = mirror_runtime.call("shapes", {"url": url, "headers": headers, "value": value})
    assert result.ok, result.to_dict()
    assert result.output == {"status": "too-large", "reason": reason}
    assert result.meta["egress"][0]["error"] == "too-large" and "status" not in result.meta["egress"][0]
    assert mirror_runtime.call("shapes", {"url": url, "headers": 2}).output["http_status"] == 200


def test_a_hundred_headers_reach_the_upstream(mirror_runtime: glovebox.Runtime) -> None:
    url = mirror_runtime.mirror_url  # type: ignore[attr-defined]
    result = mirror_runtime.call("shapes", {"url": url, "headers": 100, "value": "v" * 16})
    assert result.ok, result.to_dict()
    # http.server itself takes at most 100 header lines, the client's own included: its 431 shows the request left
    assert result.output["status"] == "ok" and result.output["http_status"] == 431


def test_a_host_function_imported_with_other_types_traps(
    _isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from glovebox.toolchains import _build

    sdk = tmp_path / "sdk"
    shutil.copytree(_build.sdk_dir() / "c", sdk / "c")
    world = (_build.sdk_dir() / "wit" / "world.wit").read_text()
    typed = "http-fetch: func(request: http-request) -> result<http-response, http-error>;"
    assert typed in world
    (sdk / "wit").mkdir()
    (sdk / "wit" / "world.wit").write_text(world.replace(typed, "http-fetch: func(n: u32) -> u32;"))
    monkeypatch.setattr(_build, "sdk_dir", lambda: sdk)
    wasm = glovebox.build(GUESTS / "wrong_import.c", tmp_path / "wrong_import.wasm")
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(wasm, manifest={"name": "wrong"})
        result = rt.call("wrong", {})
        assert result.code == "guest_trap", result.to_dict()
        assert result.error is not None and "other types than the glovebox world" in result.error.message
        assert rt.audit.find(result.meta["call_id"])["outcome"] == "guest_trap"  # type: ignore[index]
