"""What a hostile tool or a hostile upstream can make the host record or return.

A tool with no grant floods the host with refused fetches of huge URLs; a
secret-bearing upstream echoes the secret in every encoding it can think of,
answers in a content coding the host cannot read, and redirects to a URL
holding the secret. Each test asserts the exact outcome, that what the host
keeps (``meta``, the audit row) stays bounded, and that the secret appears
nowhere: not in the guest's view, ``meta``, the audit row read from SQLite,
or the host's logs. Servers run on 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.sandbox._callstate import CUT, RECORD_BYTES, RECORD_CHARS, RECORD_LIMIT

from ..audit.test_auditjournal import stored_audit
from .test_http import QuietHandler, in_thread

BuildGuest = Callable[[str], Path]
#: Has a "/" (JSON may escape it) and bytes whose base64 differs between the two alphabets.
SECRET = "s3cret/T0KEN>never~shown"
TOKEN_VAR = "LEAKS_API_TOKEN"
HUGE_URL_PAD = 256 * 1024


def _pct(data: bytes, form: str) -> bytes:
    return "".join(form % b for b in data).encode()


def _json_u(data: bytes, form: str, every: int = 1) -> bytes:
    text = data.decode()
    return "".join(form % ord(c) if i % every == 0 else c for i, c in enumerate(text)).encode()


#: How a hostile server re-encodes the secret it received (``s``: the secret, ``h``: the header value).
ENCODINGS: dict[str, Callable[[bytes, bytes], bytes]] = {
    "base64": lambda s, h: base64.b64encode(s),
    "base64-unpadded": lambda s, h: base64.b64encode(s).rstrip(b"="),
    "base64url": lambda s, h: base64.urlsafe_b64encode(s),
    "base64url-unpadded": lambda s, h: base64.urlsafe_b64encode(s).rstrip(b"="),
    "base64-bearer": lambda s, h: base64.b64encode(h),
    "base64-inside-shift-1": lambda s, h: base64.b64encode(b"x" + s + b"yz"),
    "base64-inside-shift-2": lambda s, h: base64.b64encode(b"xy" + s + b"z"),
    "base64url-inside-shift-2": lambda s, h: base64.urlsafe_b64encode(b"id:xy" + s + b"!"),
    "hex": lambda s, h: s.hex().encode(),
    "hex-upper": lambda s, h: s.hex().upper().encode(),
    "percent-lower": lambda s, h: _pct(s, "%%%02x"),
    "percent-upper": lambda s, h: _pct(s, "%%%02X"),
    "json-slash": lambda s, h: s.replace(b"/", b"\\/"),
    "json-unicode": lambda s, h: _json_u(s, "\\u%04x"),
    "json-unicode-upper-mixed": lambda s, h: _json_u(s, "\\u%04X", every=2),
}


class _Hostile(QuietHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.seen.append({"path": self.path, "headers": dict(self.headers)})
        header = self.headers.get("Authorization", "").encode()
        secret = header.removeprefix(b"Bearer ")
        kind = self.path.rsplit("/", 1)[-1]
        if self.path.startswith("/encoded/"):
            self._reply(200, b'{"echo": "' + ENCODINGS[kind](secret, header) + b'"}')
        elif self.path == "/to-landing":
            self._reply(302, b"", {"Location": "/landing/" + secret.decode()})
        elif self.path.startswith("/to-refused/"):  # a refused path whose reason is cut inside the secret
            self._reply(302, b"", {"Location": "/" + "a" * int(kind) + "%00/" + secret.decode()})
        elif self.path.startswith("/compressed/"):
            body = gzip.compress(secret) if kind == "gzip" else secret
            self._reply(200, body, {"Content-Encoding": kind, "X-Token": header.decode()})
        else:
            echoed = {"auth": header.decode(), "accept_encoding": self.headers.get("Accept-Encoding")}
            self._reply(
                200, json.dumps(echoed).encode(), {"Content-Type": "application/json", "X-Auth": header.decode()}
            )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    seen: list[dict[str, Any]]


@pytest.fixture
def hostile() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Hostile)
    httpd.seen = []
    with in_thread(httpd):
        yield httpd


def _url(server: _Server, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def _rule(server: _Server, **extra: Any) -> dict[str, Any]:
    return {
        "host": "127.0.0.1",
        "schemes": ["http"],
        "ports": [server.server_address[1]],
        "paths": ["/**"],
        "allow_private": True,
        **extra,
    }


def _secret_client(
    home: Path, build_guest: BuildGuest, server: _Server, rule: dict[str, Any] | None = None, **secret: Any
) -> glovebox.Runtime:
    rule = rule or _rule(server)
    grant = {"name": "api", "source": TOKEN_VAR, "host": "127.0.0.1", "schemes": ["http"], **secret}
    rt = glovebox.Runtime(home=home, grants={"http": [rule], "secrets": [grant]})
    rt.register(build_guest("http_client"), manifest={"name": "hc", "capabilities": {"http": [rule]}})
    return rt


def _audit_text(home: Path) -> str:
    return "\n".join(stored_audit(home))


def _assert_secret_nowhere(home: Path, result: glovebox.CallResult, logs: str, *forms: str) -> None:
    for form in (SECRET, *forms):
        assert form not in json.dumps(result.to_dict(), ensure_ascii=False)
        assert form not in _audit_text(home)
        assert form not in logs


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    caplog.set_level(logging.DEBUG)
    return caplog


# -- a tool with no grant, flooding the host with refusals ---------------------------------------


def test_a_flood_of_refused_huge_urls_is_bounded(_isolated_env: Path, build_guest: BuildGuest) -> None:
    count = 200
    with glovebox.Runtime(home=_isolated_env) as rt:
        # strlen() of the URL on every request costs fuel: give the flood enough of it.
        rt.register(build_guest("denied_flood"), manifest={"name": "flood", "limits": {"fuel": 5_000_000_000}})
        request = {"url": "https://example.com/", "pad": HUGE_URL_PAD, "count": count, "fail": 1}
        result = rt.call("flood", request)
        [row] = list(rt.audit.records())
        assert rt.audit.verify().ok
    assert result.code == "capability_denied"
    meta = result.meta
    for name in ("denials", "egress"):
        assert 0 < len(meta[name]) <= RECORD_LIMIT
        assert len(meta[name]) + meta[f"{name}_dropped"] == count
        # The entries' JSON, plus at most ", " between two of them.
        assert len(json.dumps(meta[name], ensure_ascii=False).encode()) <= RECORD_BYTES + 2 * RECORD_LIMIT
        for entry in meta[name]:
            assert len(entry["url"]) == RECORD_CHARS and entry["url"].endswith(CUT)
    assert len(json.dumps(result.to_dict()).encode()) < 4 * RECORD_BYTES
    assert row["call_id"] == meta["call_id"] and row["outcome"] == "capability_denied"
    assert row["truncated"] is None
    assert json.loads(row["egress"])["denials_dropped"] == meta["denials_dropped"]


def test_a_call_whose_record_is_oversized_still_leaves_its_row(_isolated_env: Path, build_guest: BuildGuest) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
        name = "no-such-tool-" + "x" * 2_000_000
        result = rt.call(name, {}, principal="p" * 100_000)
        [row] = list(rt.audit.records())
        assert rt.audit.verify().ok
    assert result.code == "tool_not_found"
    assert row["call_id"] == result.meta["call_id"] and row["outcome"] == "tool_not_found"
    assert row["truncated"] == "principal,tool"
    assert len(row["tool"]) <= 1024 and row["tool"].endswith(CUT)


def test_a_record_the_database_refuses_is_kept_bare_and_holds_nothing_back(
    _isolated_env: Path, build_guest: BuildGuest
) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("denied_flood"), manifest={"name": "flood"})
        # SQLite's own length limit, lowered: the record of the flood no longer fits in a row.
        with rt.audit._database.connection() as db:  # the one connection of its pool, idle
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 20_000)
        result = rt.call("flood", {"url": "https://example.com/", "pad": 4096, "count": 100})
        later = rt.call("flood", {"url": "https://example.com/", "pad": 1, "count": 1})
        rows = list(rt.audit.records())
        assert rt.audit.verify().ok
    assert [row["call_id"] for row in rows] == [result.meta["call_id"], later.meta["call_id"]]
    assert (rows[0]["outcome"], rows[0]["truncated"], json.loads(rows[0]["egress"])) == (
        "ok" if result.ok else result.code,
        "all",
        {},
    )
    assert rows[1]["truncated"] is None and json.loads(rows[1]["egress"])["denials"]  # the row after it is whole


# -- a hostile upstream echoing the secret -------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(ENCODINGS))
def test_an_encoded_secret_never_reaches_the_guest(
    _isolated_env: Path, build_guest: BuildGuest, hostile: _Server, token: pytest.LogCaptureFixture, kind: str
) -> None:
    with _secret_client(_isolated_env, build_guest, hostile) as rt:
        result = rt.call("hc", {"method": "GET", "url": _url(hostile, f"/encoded/{kind}")})
    assert result.ok and result.output["status"] == "ok", result.to_dict()
    assert hostile.seen[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    encoded = ENCODINGS[kind](SECRET.encode(), f"Bearer {SECRET}".encode()).decode()
    assert "[REDACTED]" in result.output["body"]
    assert encoded not in result.output["body"]
    _assert_secret_nowhere(_isolated_env, result, token.text, encoded)


def test_a_redirect_to_a_url_holding_the_secret_is_recorded_scrubbed(
    _isolated_env: Path, build_guest: BuildGuest, hostile: _Server, token: pytest.LogCaptureFixture
) -> None:
    with _secret_client(_isolated_env, build_guest, hostile, _rule(hostile, follow_redirects=True)) as rt:
        result = rt.call("hc", {"method": "GET", "url": _url(hostile, "/to-landing")})
    assert result.ok and result.output["http_status"] == 200
    assert hostile.seen[1]["path"].startswith("/landing/s3cret/")
    [egress] = result.meta["egress"]
    assert egress["path"] == "/landing/[REDACTED]"
    _assert_secret_nowhere(_isolated_env, result, token.text, "T0KEN%3Enever")


def test_a_refused_redirect_to_a_url_holding_the_secret_is_recorded_scrubbed(
    _isolated_env: Path, build_guest: BuildGuest, hostile: _Server, token: pytest.LogCaptureFixture
) -> None:
    rule = _rule(hostile, follow_redirects=True, paths=["/to-landing"])
    with _secret_client(_isolated_env, build_guest, hostile, rule) as rt:
        result = rt.call("hc", {"method": "GET", "url": _url(hostile, "/to-landing")})
    assert result.output["status"] == "denied"
    [denial] = result.meta["denials"]
    assert denial["reason"].startswith("path /landing/[REDACTED] not allowed")
    _assert_secret_nowhere(_isolated_env, result, token.text, "T0KEN%3Enever")


@pytest.mark.parametrize("pad", [100, 110, 118])
def test_a_refusal_reason_cut_inside_the_secret_is_scrubbed_first(
    _isolated_env: Path, build_guest: BuildGuest, hostile: _Server, token: pytest.LogCaptureFixture, pad: int
) -> None:
    """The refused path is named in the reason; it is scrubbed before it is cut, wherever the cut falls."""
    with _secret_client(_isolated_env, build_guest, hostile, _rule(hostile, follow_redirects=True)) as rt:
        result = rt.call("hc", {"method": "GET", "url": _url(hostile, f"/to-refused/{pad}")})
    assert result.output["status"] == "denied"
    [denial] = result.meta["denials"]
    assert denial["reason"].endswith("/[REDACTED] has an encoded control character")
    _assert_secret_nowhere(_isolated_env, result, token.text, "s3cret/T0", "s3cret%2FT0", "s3cret")


# -- content codings ------------------------------------------------------------------------------


def test_accept_encoding_is_the_hosts(
    _isolated_env: Path, build_guest: BuildGuest, hostile: _Server, token: pytest.LogCaptureFixture
) -> None:
    with _secret_client(_isolated_env, build_guest, hostile) as rt:
        request = {"url": _url(hostile, "/echo"), "header_name": "Accept-Encoding", "header_value": "zstd, br"}
        result = rt.call("hc", request)
    assert result.ok and result.output["status"] == "ok"
    assert hostile.seen[0]["headers"]["Accept-Encoding"] == "gzip, deflate"
    assert json.loads(result.output["body"])["accept_encoding"] == "gzip, deflate"


@pytest.mark.parametrize("coding", ["zstd", "br", "gzip,zstd", "x-secret"])
def test_a_response_in_a_coding_the_host_did_not_ask_for_is_refused(
    _isolated_env: Path, build_guest: BuildGuest, hostile: _Server, token: pytest.LogCaptureFixture, coding: str
) -> None:
    with _secret_client(_isolated_env, build_guest, hostile) as rt:
        result = rt.call("hc", {"url": _url(hostile, f"/compressed/{coding}")})
    assert result.ok
    assert result.output == {
        "status": "network",
        "reason": "the server answered in a content-encoding the host did not ask for (gzip, deflate)",
    }
    assert result.meta["egress"][0]["error"] == "network"
    _assert_secret_nowhere(_isolated_env, result, token.text)


def test_a_gzip_response_is_decoded_then_scrubbed(
    _isolated_env: Path, build_guest: BuildGuest, hostile: _Server, token: pytest.LogCaptureFixture
) -> None:
    with _secret_client(_isolated_env, build_guest, hostile) as rt:
        result = rt.call("hc", {"url": _url(hostile, "/compressed/gzip")})
    assert result.ok and result.output["body"] == "[REDACTED]"
    _assert_secret_nowhere(_isolated_env, result, token.text)


# -- withheld responses ---------------------------------------------------------------------------


def test_a_withholding_secret_lets_only_status_and_chosen_headers_through(
    _isolated_env: Path, build_guest: BuildGuest, hostile: _Server, token: pytest.LogCaptureFixture
) -> None:
    with _secret_client(_isolated_env, build_guest, hostile, response_body="withhold") as rt:
        result = rt.call("hc", {"url": _url(hostile, "/echo")})
    assert result.ok and result.output["status"] == "ok"
    assert result.output["http_status"] == 200
    assert result.output["body"] == ""
    assert result.output["headers"] == [["content-type", "application/json"]]
    assert hostile.seen[0]["headers"]["Authorization"] == f"Bearer {SECRET}"


def test_a_withholding_secret_for_another_host_leaves_the_body(
    _isolated_env: Path, build_guest: BuildGuest, hostile: _Server, token: pytest.LogCaptureFixture
) -> None:
    other = {"response_body": "withhold", "host": "api.example.test"}
    with _secret_client(_isolated_env, build_guest, hostile, **other) as rt:
        result = rt.call("hc", {"url": _url(hostile, "/echo")})
    assert json.loads(result.output["body"])["auth"] == ""
    assert ["content-length", str(len(result.output["body"]))] in result.output["headers"]
