"""Secret-shaped values in what a tool returns: known token formats, PEM keys, JWTs, high entropy.

The :class:`~glovebox.capabilities._secrets.Scrubber` removes the secrets the
host itself added to a call. This scanner looks for any value shaped like a
credential, whoever it belongs to (a rotated token the guest remembers, a key
it found in a response):

- known formats: GitHub (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``,
  ``github_pat_``), OpenAI/Anthropic (``sk-``, ``sk-ant-``), AWS access key ids
  (``AKIA``/``ASIA``), Slack (``xoxb-``, ``xoxa-``, ``xoxp-``), JWTs
  (``eyJ...``.``eyJ...``.sig) and PEM private keys (``-----BEGIN ... PRIVATE KEY-----``);
- the same inside base64 (standard or URL-safe): a run of 24+ base64
  characters that decodes to text holding one of them is a finding as a whole;
- optionally (``entropy_bits``), strings of 24+ token characters, with letters
  and digits, whose Shannon entropy per character is at least the threshold.

A finding is ``{"kind", "path"}`` (a JSON pointer into the output, or
``/logs/N``); the value itself is never kept. :meth:`SecretScanner.redact`
replaces each finding with ``[REDACTED:kind]``.

>>> scanner = SecretScanner()
>>> scanner.redact_text("token ghp_" + "a1" * 18 + " ok")
('token [REDACTED:github_token] ok', ['github_token'])
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from typing import Any

__all__ = ["SecretScanner", "Finding"]

Finding = dict[str, str]

_KNOWN: list[tuple[str, str]] = [
    (
        "private_key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]{0,16384}?-----END [A-Z0-9 ]+-----)?",
    ),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,255}"),
    ("openai_key", r"\bsk-(?!ant-)(?=[A-Za-z0-9_-]{0,255}\d)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,255}"),
    ("aws_access_key_id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("slack_token", r"\bxox[bap]-[0-9A-Za-z-]{10,255}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{4,8192}\.eyJ[A-Za-z0-9_-]{4,8192}\.[A-Za-z0-9_-]{8,8192}"),
]
_KNOWN_RE = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in _KNOWN))
#: Every known format holds one of these: a text without any skips the regex (most outputs, at C speed).
_MARKERS = ("-----BEGIN", "gh", "github_pat_", "sk-", "AKIA", "ASIA", "xox", "eyJ")
_BASE64_RE = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_TOKEN_RE = re.compile(r"[A-Za-z0-9+/_=.-]{24,}")
#: Base64 runs longer than this are not decoded (a large embedded file is not a credential).
_MAX_DECODED = 256 * 1024


class SecretScanner:
    """Finds (and redacts) secret-shaped values; ``entropy_bits`` turns on the entropy rule."""

    def __init__(self, entropy_bits: float | None = None) -> None:
        self.entropy_bits = entropy_bits

    def may_hold(self, text: str) -> bool:
        """False when ``text`` surely holds no finding (a quick pass before :meth:`redact` copies a value)."""
        if "\\u" in text or _known(text):
            return True
        if _BASE64_RE.search(text) is not None and any(_decoded_kind(run.group()) for run in _BASE64_RE.finditer(text)):
            return True
        if self.entropy_bits is None:
            return False
        return any(_looks_random(token.group(), self.entropy_bits) for token in _TOKEN_RE.finditer(text))

    def redact_text(self, text: str) -> tuple[str, list[str]]:
        """``text`` with every finding replaced, and the kinds found (in order)."""
        kinds: list[str] = []

        def known(match: re.Match[str]) -> str:
            kind = match.lastgroup or "secret"
            kinds.append(kind)
            return f"[REDACTED:{kind}]"

        if _known(text):
            text = _KNOWN_RE.sub(known, text)

        def encoded(match: re.Match[str]) -> str:
            inner = _decoded_kind(match.group())
            if inner is None:
                return match.group()
            kinds.append(f"base64_{inner}")
            return f"[REDACTED:base64_{inner}]"

        text = _BASE64_RE.sub(encoded, text)
        if self.entropy_bits is not None:
            bits = self.entropy_bits

            def entropic(match: re.Match[str]) -> str:
                token = match.group()
                if "[REDACTED" in token or not _looks_random(token, bits):
                    return token
                kinds.append("high_entropy")
                return "[REDACTED:high_entropy]"

            text = _TOKEN_RE.sub(entropic, text)
        return text, kinds

    def redact(self, value: Any, path: str = "") -> tuple[Any, list[Finding]]:
        """A copy of the JSON value with every string (keys too) redacted, and the findings by path."""
        findings: list[Finding] = []
        root: list[Any] = [None]
        stack: list[tuple[Any, Any, Any, str]] = [(value, root, 0, path)]
        while stack:
            node, parent, key, where = stack.pop()
            if isinstance(node, str):
                parent[key] = self._string(node, where, findings)
            elif isinstance(node, dict):
                copy: dict[Any, Any] = {}
                parent[key] = copy
                for name, item in node.items():
                    shown = self._string(name, where, findings) if isinstance(name, str) else name
                    copy[shown] = None
                    stack.append((item, copy, shown, f"{where}/{_pointer(str(name))}"))
            elif isinstance(node, list):
                items: list[Any] = [None] * len(node)
                parent[key] = items
                stack.extend((item, items, index, f"{where}/{index}") for index, item in enumerate(node))
            else:
                parent[key] = node
        return root[0], findings

    def _string(self, text: str, where: str, findings: list[Finding]) -> str:
        redacted, kinds = self.redact_text(text)
        findings.extend({"kind": kind, "path": where or "/"} for kind in kinds)
        return redacted


def _decoded_kind(run: str) -> str | None:
    """The kind of secret a base64 run decodes to text holding, else None."""
    if len(run) > _MAX_DECODED:
        return None
    body = run.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    for alphabet in (b"+/", b"-_"):
        try:
            data = base64.b64decode(padded, altchars=alphabet, validate=True)
        except (binascii.Error, ValueError):
            continue
        decoded = data.decode("latin-1")
        found = _KNOWN_RE.search(decoded) if _known(decoded) else None
        if found:
            return found.lastgroup or "secret"
    return None


def _known(text: str) -> bool:
    """Whether ``text`` may hold a known format (a marker is in it)."""
    for marker in _MARKERS:  # a loop, not ``any(...)``: no generator on every call's output
        if marker in text:
            return True
    return False


def _looks_random(token: str, bits: float) -> bool:
    if not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
        return False
    counts = Counter(token)
    size = len(token)
    entropy = -sum(n / size * math.log2(n / size) for n in counts.values())
    return entropy >= bits


def _pointer(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
