"""Components built by other toolchains, with their own WIT worlds, register and answer.

- Wassette's ``filesystem-rs`` example (Rust, bindings by ``cargo component``), built from
  source with cargo for ``wasm32-wasip2``: WASI 0.2 with no directory unless a ``files`` grant.
- Wassette's ``fetch-rs`` example (Rust on Spin's SDK, ``wasi:http/outgoing-handler``), built from
  source with cargo for ``wasm32-wasip2``: its requests go through the HTTP capability.
- Wassette's ``eval-py`` example, built from source with componentize-py (its own world).
- A JavaScript component with its own world, built with componentize-js (what ``jco componentize``
  runs; jco 1.35's own command cannot read a WIT path here: "failed to get path metadata").
- A hand-written component: WIT and WAT, the canonical ABI by hand (a record through a return area).

Sources and licences: tests/guests/interop/README.md.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.engine._engine import get_engine

from ..guestcache import INTEROP, built_interop
from ..typedguests import wat_component

pytestmark = pytest.mark.system

LIMITS: dict[str, Any] = {"memory_bytes": 64 * 1024 * 1024, "fuel": 5_000_000_000, "timeout_ms": 20_000}


def _registered(rt: glovebox.Runtime, name: str, cache_root: Path, manifest: dict[str, Any]) -> list[str]:
    wasm, digest = built_interop(name, cache_root)
    engine = get_engine()
    engine.remember(digest, engine.load(cache_root / "compiled" / f"{digest}-{engine.fingerprint}.cwasm"))
    return [tool.name for tool in rt.register_all(wasm, manifest=manifest)]


# -- Wassette filesystem-rs: cargo, wasm32-wasip2, bindings from cargo component -------------------------


@pytest.fixture
def files_home(_isolated_env: Path) -> Path:
    notes = _isolated_env / "files" / "notes"
    notes.mkdir(parents=True)
    (notes / "todo.txt").write_text("write the report\n")
    return _isolated_env


FS_MANIFEST = {"name": "filesystem", "limits": LIMITS, "capabilities": {"files": {"access": "read"}}}


def test_wassette_filesystem_registers_one_tool_per_export(runtime: glovebox.Runtime, cache_root: Path) -> None:
    names = _registered(runtime, "wassette-filesystem-rs", cache_root, FS_MANIFEST)
    assert names == [
        "filesystem-list-directory", "filesystem-read-file", "filesystem-search-file", "filesystem-get-file-info",
    ]  # fmt: skip
    info = runtime.tools()
    schema = next(tool for tool in info if tool.name == "filesystem-search-file").input_schema
    assert schema["required"] == ["path", "pattern"]


def test_wassette_filesystem_sees_no_file_without_a_grant(runtime: glovebox.Runtime, cache_root: Path) -> None:
    _registered(runtime, "wassette-filesystem-rs", cache_root, FS_MANIFEST)
    for path in ("/etc/passwd", "/files/todo.txt", "../../etc/passwd"):
        result = runtime.call("filesystem-read-file", {"path": path})
        assert result.error is not None and result.error.code == "guest_error", result.to_dict()
        assert result.error.message.startswith("Failed to read file: No such file or directory"), path


def test_wassette_filesystem_reads_its_granted_directory_and_nothing_past_it(
    files_home: Path, cache_root: Path
) -> None:
    grants = {"files": [{"directory": "notes", "access": "read"}]}
    with glovebox.Runtime(home=files_home, grants=grants) as rt:
        _registered(rt, "wassette-filesystem-rs", cache_root, FS_MANIFEST)
        listed = rt.call("filesystem-list-directory", {"path": "/files"})
        read = rt.call("filesystem-read-file", {"path": "/files/todo.txt"})
        escaped = rt.call("filesystem-read-file", {"path": "/files/../../../etc/passwd"})
    assert listed.ok and listed.output == ["[FILE] todo.txt\n"]
    assert read.ok and read.output == "write the report\n"
    assert escaped.error is not None and escaped.error.code == "guest_error"
    assert escaped.error.message == "Failed to read file: Operation not permitted (os error 63)"


# -- Wassette eval-py: componentize-py, its own world ------------------------------------------------------


@pytest.mark.slow  # an 18 MB component: compiled once into the shared cache, then loaded
def test_wassette_eval_py_evaluates_and_its_stubbed_wasi_traps(runtime: glovebox.Runtime, cache_root: Path) -> None:
    pytest.importorskip("componentize_py")
    names = _registered(runtime, "wassette-eval-py", cache_root, {"name": "eval-py", "limits": LIMITS})
    assert {"eval-py-eval", "eval-py-exec"} <= set(names)
    result = runtime.call("eval-py-eval", {"expression": "sum(range(10)) * 2"})
    assert result.ok and result.output == "90", result.to_dict()
    failed = runtime.call("eval-py-eval", {"expression": "1 / 0"})
    assert failed.error is not None and failed.error.code == "guest_error"
    assert failed.error.message == "ZeroDivisionError: division by zero"
    # Built with --stub-wasi (as the example's Justfile builds it): a file access traps, never reaches the host.
    opened = runtime.call("eval-py-eval", {"expression": "open('/etc/passwd').read()"})
    assert opened.error is not None and opened.error.code == "guest_trap"


# -- componentize-js: a JavaScript component with its own world --------------------------------------------


@pytest.mark.slow  # a 12 MB component: built and compiled once into the shared cache, then loaded
def test_a_componentize_js_component_answers_records_enums_options_and_results(
    runtime: glovebox.Runtime, cache_root: Path
) -> None:
    names = _registered(runtime, "js-greeter", cache_root, {"name": "greeter", "limits": LIMITS})
    assert names == ["greeter-greet"]
    tool = runtime.tools()[0]
    assert tool.input_schema["properties"]["tone"] == {"anyOf": [{"type": "null"}, {"enum": ["plain", "loud"]}]}
    loud = runtime.call("greeter-greet", {"name": "Ada", "tone": "loud"})
    assert loud.ok and loud.output == {"text": "HELLO, ADA!", "length": 11}
    plain = runtime.call("greeter-greet", {"name": "Ada", "tone": None})
    assert plain.ok and plain.output == {"text": "Hello, Ada!", "length": 11}
    empty = runtime.call("greeter-greet", {"name": " ", "tone": "plain"})
    assert empty.error is not None and (empty.error.code, empty.error.message) == ("guest_error", "name is empty")
    wrong = runtime.call("greeter-greet", {"name": "Ada", "tone": "soft"})
    assert wrong.error is not None and wrong.error.code == "invalid_input"


@pytest.mark.slow
def test_an_option_parameter_may_be_left_out(runtime: glovebox.Runtime, cache_root: Path) -> None:
    _registered(runtime, "js-greeter", cache_root, {"name": "greeter", "limits": LIMITS})
    result = runtime.call("greeter-greet", {"name": "Ada"})  # docs/guide/components.md: it is `none`
    assert result.ok and result.output == {"text": "Hello, Ada!", "length": 11}, result.to_dict()


# -- A hand-written component: WIT + WAT ------------------------------------------------------------------


@pytest.fixture
def geometry(tmp_path: Path) -> Path:
    source = INTEROP / "wat-geometry"
    return wat_component(source / "wit", "geometry", source / "geometry.wat", tmp_path / "geometry.wasm")


def test_a_hand_written_component_takes_and_answers_records(runtime: glovebox.Runtime, geometry: Path) -> None:
    names = [tool.name for tool in runtime.register_all(geometry)]
    assert names == ["geometry-midpoint", "geometry-distance"]
    a, b = {"x": -4, "y": 10}, {"x": 6, "y": -2}
    midpoint = runtime.call("geometry-midpoint", {"a": a, "b": b})
    assert midpoint.ok and midpoint.output == {"x": 1, "y": 4}
    distance = runtime.call("geometry-distance", {"a": a, "b": b})
    assert distance.ok and distance.output == 22
    wrong = runtime.call("geometry-distance", {"a": a, "b": {"x": 2**31, "y": 0}})
    assert wrong.error is not None and wrong.error.code == "invalid_input"


# -- Wassette fetch-rs: Spin's SDK over wasi:http, through the HTTP capability -------------------------


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/json"):
            data = json.dumps({"title": "hello", "auth": self.headers.get("authorization")}).encode()
            kind = "application/json"
        else:
            data, kind = b"<html><body><h1>Title</h1><p>Some text</p></body></html>", "text/html"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def pages() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_wassette_fetch_rs_fetches_through_the_http_capability(
    _isolated_env: Path, cache_root: Path, pages: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rule = {"host": "127.0.0.1", "ports": [pages], "schemes": ["http"], "allow_private": True}
    monkeypatch.setenv("PAGES_TOKEN", "fetch-rs-secret-93b2")
    secret = {"name": "pages", "source": "PAGES_TOKEN", "host": "127.0.0.1", "schemes": ["http"]}
    grant = {"tool": "fetch-rs-*", "http": [rule], "secrets": [secret]}
    policy = glovebox.Policy.model_validate({"version": 1, "defaults": {"action": "allow"}, "grants": [grant]})
    manifest = {"name": "fetch-rs", "limits": LIMITS, "capabilities": {"http": [rule]}}
    with glovebox.Runtime(policy=policy) as rt:
        assert _registered(rt, "wassette-fetch-rs", cache_root, manifest) == ["fetch-rs-fetch"]
        page = rt.call("fetch-rs-fetch", {"url": f"http://127.0.0.1:{pages}/page"})
        assert page.ok, page.to_dict()
        assert page.output == "# Title\n\nSome text"  # its HTML-to-Markdown
        got = rt.call("fetch-rs-fetch", {"url": f"http://127.0.0.1:{pages}/json"})
        assert got.ok and "### title\n\nhello" in got.output
        assert "fetch-rs-secret-93b2" not in got.output  # sent by the host, scrubbed from what the guest read
        assert got.meta["egress"][0]["status"] == 200
        refused = rt.call("fetch-rs-fetch", {"url": "https://example.com/"})
        assert refused.error is not None and refused.error.code == "capability_denied"
        assert "HttpRequestDenied" in refused.error.details["guest_message"]
