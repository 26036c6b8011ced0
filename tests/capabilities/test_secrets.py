"""The scrubber and the bounded, scrubbed records of a call, without a server."""

from __future__ import annotations

import base64
import json
import time

import pytest

import glovebox
from glovebox.capabilities._fetch import HttpCapability
from glovebox.capabilities._secrets import REDACTED, Scrubber, Secret
from glovebox.sandbox._callstate import CUT, RECORD_CHARS, RECORD_LIMIT, CallState

SECRET = "s3cret/T0KEN>never~shown"
RULE = glovebox.SecretRule(name="t", source="X", host="api.example.com")


def scrubber(value: str = SECRET) -> Scrubber:
    return Scrubber([Secret(RULE, value)])


def _base64_cases() -> list[tuple[int, bytes]]:
    cases = []
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for shift in (0, 1, 2):
            for tail in (b"", b"z", b"zz"):
                text = encode(b"q" * shift + SECRET.encode() + tail)
                cases += [(shift, text), (shift, text.rstrip(b"="))]
    return cases


@pytest.mark.parametrize(("shift", "encoded"), _base64_cases())
def test_base64_at_every_alignment_is_scrubbed(shift: int, encoded: bytes) -> None:
    scrubbed = scrubber().bytes(encoded)
    start = scrubbed.index(REDACTED.encode())
    end = len(encoded) - (len(scrubbed) - start - len(REDACTED))
    # What is left holds at most the one character either side that mixes the secret's bits with others.
    assert start <= -(-8 * shift // 6)
    assert end >= 8 * (shift + len(SECRET)) // 6


@pytest.mark.parametrize(
    "encoded",
    [
        SECRET.encode().hex(),
        SECRET.encode().hex().upper(),
        "".join(f"%{b:02x}" for b in SECRET.encode()),
        "".join(f"%{b:02X}" if i % 2 else chr(b) for i, b in enumerate(SECRET.encode())),
        json.dumps(SECRET)[1:-1].replace("/", "\\/"),
        "".join(f"\\u{ord(c):04x}" for c in SECRET),
        "".join(f"\\u{ord(c):04X}" if i % 3 else c for i, c in enumerate(SECRET)),
        base64.b64encode(b"Bearer " + SECRET.encode()).decode(),
        "Bearer " + SECRET,
    ],
)
def test_hex_percent_and_json_escapes_are_scrubbed(encoded: str) -> None:
    assert scrubber().text(f"x {encoded} y") == f"x {REDACTED} y"
    assert scrubber().bytes(f"x {encoded} y".encode()) == f"x {REDACTED} y".encode()


def test_a_non_ascii_secret_escaped_in_json_is_scrubbed() -> None:
    value = "clé-🔑-secrète"
    escaped = json.dumps(value)[1:-1]  # \u00e9 and a surrogate pair
    assert scrubber(value).text(escaped) == REDACTED
    assert scrubber(value).bytes(escaped.encode()) == REDACTED.encode()


def test_text_without_the_secret_is_untouched() -> None:
    text = 'plain %41 \\u0041 \\/ czNjcmV0 733363 {"a": "b"}'
    assert scrubber().text(text) == text
    assert scrubber().bytes(text.encode()) == text.encode()


def _state() -> CallState:
    grants = glovebox.Grants(secrets=[RULE])
    http = HttpCapability([], grants, [Secret(RULE, SECRET)])
    return CallState(deadline=time.monotonic() + 5, log_limit_bytes=4096, http=http)


def test_a_secret_across_the_cut_is_replaced_whole() -> None:
    state = _state()
    prefix = "https://api.example.com/"
    # The secret starts 6 characters before the cut: a cut before scrubbing would leave "s3cret".
    url = prefix + "a" * (RECORD_CHARS - len(CUT) - len(prefix) - 6) + SECRET + "b" * 100_000
    state.add_denial({"capability": "http", "url": url, "reason": "no"})
    [denial] = state.denials
    assert len(denial["url"]) == RECORD_CHARS and denial["url"].endswith(CUT)
    assert "s3cret" not in denial["url"] and denial["url"].endswith("[REDAC" + CUT)


def test_logs_and_upstream_failures_are_scrubbed_and_bounded() -> None:
    state = _state()
    state.add_log("info", f"token {SECRET}")
    for i in range(RECORD_LIMIT + 5):
        state.add_upstream_failure({"url": f"https://api.example.com/{SECRET}/{i}", "reason": "HTTP 502"})
    assert state.logs == [{"level": "info", "message": f"token {REDACTED}"}]
    assert len(state.upstream_failures) == RECORD_LIMIT and state.upstream_failures_dropped == 5
    assert SECRET not in json.dumps(state.upstream_failures)
