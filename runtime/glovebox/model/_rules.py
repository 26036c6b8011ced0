"""The one matcher for HTTP grants: hosts, paths, methods, schemes and ports.

Grant models validate their patterns with the ``parse_*`` functions here, and
the HTTP capability enforces requests with :func:`check_rules`, so a pattern
that validates is a pattern that matches as documented.

Host patterns are an exact name (``api.example.com``), an IP literal, or
``*.example.com``, which matches one or more labels in front of the suffix but
not the suffix itself:

>>> host_matches("*.example.com", "a.b.example.com"), host_matches("*.example.com", "example.com")
(True, False)

Path patterns start with ``/``; ``*`` matches within one segment and a ``**``
segment matches any number of segments (including none):

>>> path_matches("/users/*", "/users/42"), path_matches("/users/*", "/users/42/keys")
(True, False)
>>> path_matches("/api/**", "/api"), path_matches("/api/**", "/api/v1/x")
(True, True)

Patterns see the path as sent, so what a server might read differently is
refused before any pattern is tried: dot segments, backslashes and encoded
control characters always (also percent-decoded once or more, and ``..;``):

>>> path_refusal("/users/..;/admin"), path_refusal("/users/%252e%252e/admin")
('dot segments', 'dot segments twice decoded')

and ``;`` path parameters or percent-encoded ``.``, ``/`` or ``\\`` (also
multiply encoded) unless the rule allows them (``allow_path_params``,
``allow_encoded_separators``):

>>> path_extras("/users/1;jsessionid=x"), path_extras("/users/a%252fb")
(('path parameters', False), (None, True))
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote

__all__ = [
    "DEFAULT_PORTS",
    "Target",
    "check_rules",
    "host_matches",
    "ip_literal",
    "method_matches",
    "parse_host_pattern",
    "parse_method",
    "parse_path_pattern",
    "path_extras",
    "path_matches",
    "path_refusal",
]

DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_TOKEN = re.compile(r"^[A-Z][A-Z0-9_-]{0,31}$")
_SEGMENT = re.compile(r"^[A-Za-z0-9._~!$&'()+,;=:@%*-]*$")
#: Percent-encoded '.', '/' and '\\', overlong UTF-8 forms included.
_ENCODED_SEPARATOR = re.compile(r"%(?:2e|2f|5c|c0%ae|c0%af|c1%9c)", re.IGNORECASE)
_MAX_DECODINGS = 8
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Rule(Protocol):
    """What the matcher reads from a grant rule (``glovebox.HttpRule``)."""

    @property
    def host(self) -> str: ...
    @property
    def schemes(self) -> Sequence[str]: ...
    @property
    def ports(self) -> Sequence[int] | None: ...
    @property
    def methods(self) -> Sequence[str]: ...
    @property
    def paths(self) -> Sequence[str]: ...
    @property
    def allow_path_params(self) -> bool: ...
    @property
    def allow_encoded_separators(self) -> bool: ...


@dataclass(frozen=True)
class Target:
    """The parts of one request that rules are matched against."""

    scheme: str
    host: str
    port: int
    method: str
    path: str

    @property
    def url(self) -> str:
        """The request's URL without its query, for messages."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = DEFAULT_PORTS.get(self.scheme) == self.port
        return f"{self.scheme}://{host}{'' if default else f':{self.port}'}{self.path}"


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address when ``host`` is an IP literal (brackets allowed), else None.

    >>> ip_literal("[::1]"), ip_literal("example.com")
    (IPv6Address('::1'), None)
    """
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def parse_host_pattern(pattern: str) -> str:
    """Validate a host pattern and return its canonical (lower-case) form.

    >>> parse_host_pattern("*.Example.COM")
    '*.example.com'
    >>> parse_host_pattern("*.com")
    Traceback (most recent call last):
    ...
    ValueError: host pattern '*.com': a wildcard needs a suffix of at least two labels
    """
    address = ip_literal(pattern)
    if address is not None:
        return str(address)
    name = pattern.lower().rstrip(".")
    wildcard = name.startswith("*.")
    labels = name[2:].split(".") if wildcard else name.split(".")
    if not all(_LABEL.match(label) for label in labels):
        raise ValueError(f"host pattern {pattern!r}: not a host name, an IP literal or '*.<domain>'")
    if wildcard and len(labels) < 2:
        raise ValueError(f"host pattern {pattern!r}: a wildcard needs a suffix of at least two labels")
    return name


def host_matches(pattern: str, host: str) -> bool:
    """Whether ``host`` (a name or an IP literal) matches a host pattern.

    >>> host_matches("api.example.com", "API.example.com."), host_matches("*.example.com", "evil-example.com")
    (True, False)
    """
    pattern = parse_host_pattern(pattern)
    address = ip_literal(host)
    host = str(address) if address is not None else host.lower().rstrip(".")
    if pattern.startswith("*."):
        return address is None and host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


@functools.lru_cache(maxsize=1024)
def parse_path_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a path pattern; raise ValueError when it is malformed.

    >>> bool(parse_path_pattern("/v1/*.json").fullmatch("/v1/a.json"))
    True
    >>> parse_path_pattern("users")
    Traceback (most recent call last):
    ...
    ValueError: path pattern 'users': must start with '/'
    """
    if not pattern.startswith("/"):
        raise ValueError(f"path pattern {pattern!r}: must start with '/'")
    regex = ""
    for segment in pattern[1:].split("/"):
        if segment == "**":
            regex += "(?:/.*)?"
        elif "**" in segment or not _SEGMENT.match(segment):
            raise ValueError(f"path pattern {pattern!r}: bad segment {segment!r} ('**' must be a whole segment)")
        else:
            regex += "/" + "[^/]*".join(re.escape(part) for part in segment.split("*"))
    return re.compile(regex)


def path_matches(pattern: str, path: str) -> bool:
    """Whether a request path (without its query) matches a path pattern."""
    return parse_path_pattern(pattern).fullmatch(path) is not None


@functools.lru_cache(maxsize=1024)
def path_refusal(path: str) -> str | None:
    """What makes ``path`` unsafe under any rule, or None.

    A ``.`` or ``..`` segment (``;`` parameters stripped, as Tomcat and Spring
    do) as sent or percent-decoded any number of times, a backslash, or an
    encoded control character.

    >>> path_refusal("/a%2f..%2fadmin"), path_refusal("/a%00b"), path_refusal("/users/1") is None
    ('dot segments once decoded', 'an encoded control character', True)
    """
    if "\\" in path:
        return "a backslash"
    if len(_decodings(path)) > _MAX_DECODINGS:
        return f"percent-encoding nested {_MAX_DECODINGS} times or more"
    for level, text in enumerate(_decodings(path)):
        if any(segment.split(";")[0].strip() in (".", "..") for segment in re.split(r"[/\\]", text)):
            return "dot segments" + (
                ("", " once decoded", " twice decoded")[level] if level < 3 else f" decoded {level} times"
            )
        if level and _CONTROL.search(text):
            return "an encoded control character"
    return None


@functools.lru_cache(maxsize=1024)
def path_extras(path: str) -> tuple[str | None, bool]:
    """What ``path`` carries that a rule must allow: ``;`` parameters, and
    whether it percent-encodes ``.``, ``/`` or ``\\`` (also multiply encoded)."""
    params = "path parameters" if ";" in path else None
    return params, any(_ENCODED_SEPARATOR.search(text) for text in _decodings(path))


@functools.lru_cache(maxsize=1024)
def _decodings(path: str) -> tuple[str, ...]:
    """``path`` as sent, then percent-decoded until nothing changes (one level past the maximum at most)."""
    levels = [path]
    while "%" in levels[-1] and len(levels) <= _MAX_DECODINGS:
        decoded = unquote(levels[-1], errors="surrogateescape")
        if decoded == levels[-1]:
            break
        levels.append(decoded)
    return tuple(levels)


def _path_unallowed(rule: Rule, path: str) -> str | None:
    params, encoded = path_extras(path)
    if params and not rule.allow_path_params:
        return f"path {path} has ';' parameters (allow_path_params is off)"
    if encoded and not rule.allow_encoded_separators:
        return f"path {path} has a percent-encoded '.', '/' or '\\' (allow_encoded_separators is off)"
    return None


def parse_method(method: str) -> str:
    """Validate a method (or ``*``) and return it upper-cased.

    >>> parse_method("get")
    'GET'
    """
    upper = method.upper()
    if upper != "*" and not _TOKEN.match(upper):
        raise ValueError(f"method {method!r}: not an HTTP method token")
    return upper


def method_matches(allowed: Sequence[str], method: str) -> bool:
    """Whether ``method`` is in ``allowed`` (``*`` allows any).

    >>> method_matches(["GET"], "DELETE"), method_matches(["*"], "DELETE")
    (False, True)
    """
    return "*" in allowed or method.upper() in allowed


def _mismatch(rule: Rule, target: Target) -> tuple[int, str] | None:
    """None when ``rule`` allows ``target``; else (how far it got, what failed)."""
    if not host_matches(rule.host, target.host):
        return 0, f"host {target.host} not allowed"
    if target.scheme not in rule.schemes:
        return 1, f"scheme {target.scheme} not allowed for {target.host}"
    ports = rule.ports if rule.ports is not None else [DEFAULT_PORTS[s] for s in rule.schemes]
    if target.port not in ports:
        return 2, f"port {target.port} not allowed for {target.host}"
    if not method_matches(rule.methods, target.method):
        return 3, f"method {target.method} not allowed for {target.url}"
    if not any(path_matches(p, target.path) for p in rule.paths):
        return 4, f"path {target.path} not allowed for {target.host}"
    unallowed = _path_unallowed(rule, target.path)
    return None if unallowed is None else (5, unallowed)


def _allowed(rules: Sequence[Rule], part: int) -> list[str]:
    field = ("host", "schemes", "ports", "methods", "paths")[part]
    values: list[str] = []
    for rule in rules:
        value = getattr(rule, field)
        for item in [value] if isinstance(value, str) else value or ["default"]:
            if str(item) not in values:
                values.append(str(item))
    return values


def check_rules(rules: Sequence[Rule], target: Target, side: str) -> tuple[Rule | None, str]:
    """The first rule allowing ``target``, or None and a reason naming the failing part.

    ``side`` names whose rules these are in the reason (e.g. ``granted``,
    ``declared by the tool``).
    """
    best: tuple[int, str] | None = None
    for rule in rules:
        failure = _mismatch(rule, target)
        if failure is None:
            return rule, ""
        if best is None or failure[0] > best[0]:
            best = failure
    if best is None:
        return None, f"the http capability is not {side} for this call (requested {target.method} {target.url})"
    part, reason = best
    if part == 5:
        return None, f"{reason} ({side})"
    near = [r for r in rules if part == 0 or host_matches(r.host, target.host)]
    return None, f"{reason} ({side}: {', '.join(_allowed(near, part))})"
