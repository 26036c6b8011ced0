"""What the OpenAPI and GraphQL importers share: names, servers, HTTP rules, limits, spec loading."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..core._errors import InvalidSpec
from ..model._grants import HttpRule
from ..model._manifest import Limits
from ..model._rules import ip_literal, parse_path_pattern

#: The largest spec an import reads by default (a file or a URL): well above GitHub's 13 MB REST description.
MAX_SPEC_BYTES = 64 * 1024 * 1024

__all__ = [
    "MAX_SPEC_BYTES",
    "OPERATION_LIMITS",
    "Server",
    "api_name",
    "http_rule",
    "title_api_name",
    "kebab",
    "parse_server",
    "parse_spec",
    "read_source",
    "read_spec",
    "tool_name",
    "unique_names",
]

#: The longest tool name (the manifest's name pattern).
MAX_NAME = 64
#: How long fetching a spec from a URL may take, in seconds, in all.
FETCH_TIMEOUT_S = 15.0
#: The limits of every imported operation: a small guest waiting on one upstream request.
OPERATION_LIMITS = Limits(fuel=200_000_000, memory_bytes=16 * 1024 * 1024, timeout_ms=15_000)
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
#: A run of path-template parameters: one ``*`` in the grant, however many are adjacent.
_PARAMETERS = re.compile(r"(?:\{[^}/]*\})+")


def kebab(text: str) -> str:
    """A name part in the tool-name alphabet: camelCase split, lower case, other characters to '-'.

    >>> kebab("getPetById"), kebab("GET /pets/{petId}"), kebab("HTTPServer_v2")
    ('get-pet-by-id', 'get-pets-pet-id', 'http-server_v2')
    """
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", text)
    return re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-_")


def api_name(name: str, where: str) -> str:
    """Validate (or derive) an API name: the tools' prefix and the scopes' prefix."""
    derived = kebab(name)[:40].strip("-_")
    if not _NAME.match(derived):
        raise InvalidSpec(f"{where}: cannot make an API name from {name!r}; give one with --name")
    return derived


#: Words a title shares with every API, left out of a derived API name.
_TITLE_NOISE = frozenset(
    "a an and api apis definition description for of official open openapi platform public rest s spec "
    "specification swagger the v1 v2 v3 web".split()
)


def title_api_name(title: str, where: str) -> str:
    """A short API name from a spec's title: its first telling word (two when the first is short).

    >>> title_api_name("GitHub's official OpenAPI spec + Octokit extension", "-")
    'github'
    >>> title_api_name("Swagger Petstore", "-"), title_api_name("Slack Web API", "-"), title_api_name("X API", "-")
    ('petstore', 'slack', 'x')
    """
    words = [w for w in re.split(r"[^a-z0-9]+", title.lower()) if w]
    telling = [w for w in words if w not in _TITLE_NOISE] or words
    return api_name("-".join(telling[: 1 if telling and len(telling[0]) >= 3 else 2]), where)


def tool_name(api: str, part: str, where: str) -> str:
    """``<api>-<part>`` in the tool-name pattern, at most 64 characters: past that, words already said and
    filler words (and, for, of...) are left out, then the name is cut between words where it can.

    >>> tool_name("github", "actions/get-github-actions-default-workflow-permissions-organization", "-")
    'github-actions-get-default-workflow-permissions-organization'
    >>> tool_name("gh", "list-" + "very-long-" * 12, "-")
    'gh-list-very-long'
    """
    name = f"{api}-{kebab(part)}"
    if len(name) > MAX_NAME:
        name = _shorten(api, kebab(part))
    if not _NAME.match(name) or name == api:
        raise InvalidSpec(f"{where}: cannot make a tool name from {part!r}", details={"place": where})
    return name


#: Words a name too long to keep whole leaves out first.
_FILLER = frozenset("a an and by for from in of on or the to with".split())


def _shorten(api: str, part: str) -> str:
    said = set(api.split("-")) | _FILLER
    words: list[str] = []
    for word in part.split("-"):
        if word not in said or not words:
            words.append(word)
        said.add(word)
    return _cut(f"{api}-{'-'.join(words)}", MAX_NAME, len(api))


def _cut(name: str, limit: int, keep: int) -> str:
    """``name`` at most ``limit`` characters, cut at a word boundary past ``keep`` where there is one."""
    if len(name) <= limit:
        return name
    head = name[: limit + 1]
    boundary = max(head.rfind("-"), head.rfind("_"))
    return (head[:boundary] if boundary > keep else name[:limit]).rstrip("-_")


def unique_names(names: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """Make ``(name, place)`` pairs unique: every name of a colliding group gets a short hash suffix
    of its place in the spec (the same whatever the order); return (names, one note per group).

    >>> unique_names([("gh-a", "x"), ("gh-b", "y"), ("gh-a", "z")])[0]
    ['gh-a-2d711642', 'gh-b', 'gh-a-594e519a']
    """
    import hashlib
    from collections import Counter

    counts = Counter(name for name, _ in names)
    result, notes = [], []
    for name, place in names:
        if counts[name] < 2:
            result.append(name)
            continue
        suffix = hashlib.sha256(place.encode()).hexdigest()[:8]
        stem = _cut(name, MAX_NAME - len(suffix) - 1, len(name) // 2)
        result.append(f"{stem}-{suffix}")
    for name in sorted(n for n, c in counts.items() if c > 1):
        made = sorted(r for (n, _), r in zip(names, result, strict=True) if n == name)
        notes.append(f"{counts[name]} operations make the tool name {name!r}: named {', '.join(made)}")
    return result, notes


class Server:
    """A server base URL, split into what an HTTP rule needs."""

    def __init__(self, url: str, where: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidSpec(f"{where}: server URL {url!r} must be an absolute http(s) URL", details={"place": where})
        if parts.username or parts.password or parts.query or parts.fragment:
            raise InvalidSpec(
                f"{where}: server URL {url!r} must not carry credentials, a query or a fragment",
                details={"place": where},
            )
        try:
            self.port = parts.port
        except ValueError as exc:
            raise InvalidSpec(f"{where}: server URL {url!r} has a bad port", details={"place": where}) from exc
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.base_path = parts.path.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{self.scheme}://{host}{f':{self.port}' if self.port else ''}{self.base_path}"

    @property
    def private(self) -> bool:
        """Whether the server is on this machine or a private network (the rule must allow it)."""
        address = ip_literal(self.host)
        if address is None:
            return self.host == "localhost"
        return address.is_private or address.is_loopback or address.is_link_local


def parse_server(url: str, where: str) -> Server:
    """A :class:`Server` from a base URL, refused with the place it came from."""
    return Server(url, where)


def http_rule(server: Server, method: str, path_template: str, where: str, *, path_params: bool = False) -> HttpRule:
    """The one HTTP rule of an operation: its host, scheme, port, method and path (``path_params``: it sends
    matrix-style ``;`` parameters; dot segments, ``..;`` included, stay refused).

    Each ``{x}`` matches within one segment: adjacent parameters (``{a}{b}``)
    become one ``*``, never ``**``, which would match any number of segments.

    >>> http_rule(parse_server("https://api.example.com/v1", "-"), "GET", "/x/{a}{b}.json", "-").paths
    ['/v1/x/*.json']
    """
    if "*" in server.base_path + path_template:
        raise InvalidSpec(f"{where}: path {path_template!r}: a literal '*' cannot be granted", details={"place": where})
    pattern = server.base_path + _PARAMETERS.sub("*", path_template)
    try:
        parse_path_pattern(pattern)
        return HttpRule(
            host=server.host,
            schemes=[server.scheme],
            ports=[server.port] if server.port else None,
            methods=[method],
            paths=[pattern],
            allow_private=server.private,
            allow_path_params=path_params,
        )
    except ValueError as exc:
        raise InvalidSpec(
            f"{where}: path {path_template!r} cannot be granted: {exc}", details={"place": where}
        ) from exc


def read_spec(source: str | Path, max_bytes: int = MAX_SPEC_BYTES) -> tuple[Any, str]:
    """Read and parse a spec (YAML or JSON) from a file or an http(s) URL; return (document, origin)."""
    text, origin = read_source(source, max_bytes)
    return parse_spec(text, origin), origin


def read_source(source: str | Path, max_bytes: int = MAX_SPEC_BYTES) -> tuple[str, str]:
    """The text of a spec file or URL and its origin, bounded by ``max_bytes`` (and, for a URL,
    :data:`FETCH_TIMEOUT_S` in all)."""
    return _fetch(str(source), max_bytes) if _is_url(source) else _read(Path(source), max_bytes)


def parse_spec(text: str, origin: str) -> Any:
    """Parse spec text: as JSON first when it looks like JSON (what JSON parsers accept, fast), else as
    YAML (a superset of JSON) without aliases; errors name the line."""
    import json

    import yaml

    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            pass  # YAML flow style, or JSON with an error: the YAML reader names the line

    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader without aliases
    except InvalidSpec as exc:
        raise InvalidSpec(f"{origin}: {exc.message}", details=exc.details) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "unknown place"
        raise InvalidSpec(f"{origin}: {line}: not valid YAML/JSON: {exc.problem}", details={"place": line}) from exc
    except yaml.YAMLError as exc:
        raise InvalidSpec(f"{origin}: not valid YAML/JSON: {exc}") from exc
    except RecursionError as exc:  # the parser recurses once per level
        raise InvalidSpec(f"{origin}: the document is nested too deeply to read") from exc


def _loader() -> Any:
    """A SafeLoader that refuses aliases: a spec of a few KB cannot expand into billions of nodes."""
    import yaml

    class NoAliases(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise InvalidSpec(
                    f"line {mark.line + 1}, column {mark.column + 1}: YAML aliases are not supported in a spec",
                    details={"place": f"line {mark.line + 1}"},
                )
            return super().compose_node(parent, index)

    return NoAliases


def _is_url(source: str | Path) -> bool:
    return isinstance(source, str) and source.startswith(("http://", "https://"))


def _read(path: Path, max_bytes: int) -> tuple[str, str]:
    """A regular file's text, at most ``max_bytes`` read (a FIFO or a device is refused unopened
    for reading: it is opened non-blocking, checked, and never read)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InvalidSpec(f"{path}: not a regular file")
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise InvalidSpec(f"{path}: over the {max_bytes}-byte spec limit (raise it with --max-spec-bytes)")
        return data.decode("utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidSpec(f"cannot read {path}: {exc}") from exc


def _fetch(url: str, max_bytes: int) -> tuple[str, str]:
    """GET a spec once: bounded in size and, in all (connect, headers, body), in time; no redirects followed.

    Every socket operation gets the time left before one deadline (the HTTP
    capability's transport), so a server trickling its headers or its body
    cannot hold an import past :data:`FETCH_TIMEOUT_S`.
    """
    import httpx

    from ..capabilities._deadline import Deadline, deadline_transport
    from ..capabilities._net import ssl_context

    deadline = Deadline()
    deadline.start(FETCH_TIMEOUT_S)
    chunks, size = [], 0
    transport = deadline_transport(deadline, ssl_context())
    try:
        with httpx.Client(transport=transport, trust_env=False, follow_redirects=False) as client:
            with client.stream("GET", url, timeout=FETCH_TIMEOUT_S) as response:
                if response.status_code != 200:
                    raise InvalidSpec(f"{url}: answered HTTP {response.status_code}")
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise InvalidSpec(
                            f"{url}: over the {max_bytes}-byte spec limit (raise it with --max-spec-bytes)"
                        )
                    chunks.append(chunk)
    except httpx.TimeoutException as exc:
        raise InvalidSpec(f"{url}: took over {FETCH_TIMEOUT_S:g} s (the whole fetch is bounded)") from exc
    except httpx.HTTPError as exc:
        raise InvalidSpec(f"{url}: cannot fetch the spec: {exc}") from exc
    try:
        return b"".join(chunks).decode("utf-8"), url
    except UnicodeDecodeError as exc:
        raise InvalidSpec(f"{url}: the spec is not UTF-8 text") from exc
