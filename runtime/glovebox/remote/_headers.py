"""The URL and the secret-carrying headers of a remote MCP server, checked at import, read at call time.

``--header-secret HEADER=NAME`` stores only ``NAME``, the environment variable
of the host process that holds the secret, or a secret reference
(``keyring://service/user``, ``encrypted://name``, ``exec://...``), or an OAuth
connection's token (``connection://NAME[/ACCOUNT]``, refreshed by the host). The value is read when a call (or
an import) starts, sent in ``HEADER`` (``Authorization`` gets ``Bearer
<value>``, any other header the value as it is) and scrubbed from everything
the server answers, in the encodings :class:`~glovebox.capabilities._secrets.Scrubber`
knows, before it can reach an output, an error, meta or the audit log.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ..capabilities._secrets import Scrubber, load_secrets
from ..core._errors import UpstreamError
from ..model._grants import SecretRule

__all__ = ["HeaderSecrets", "check_url", "parse_header_secrets", "read_secrets"]

HeaderSecrets = Mapping[str, str]
_HEADER = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")
#: An environment variable name, or a secret reference (``keyring://svc/user``, ``encrypted://name``, ...).
_SECRET = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}|[a-z][a-z0-9-]{0,31}://[!-~]{1,512}")
#: Headers the protocol or the HTTP stack sets; a secret may not replace them.
_RESERVED = {"host", "content-type", "content-length", "accept", "mcp-session-id", "mcp-protocol-version", "connection"}


def check_url(url: str) -> str:
    """Refuse a server URL that is not plain ``http(s)://host[:port]/path``.

    Raises:
        ValueError: naming what is wrong (scheme, host, credentials, fragment).
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise ValueError(f"server URL {url!r} is malformed: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"server URL {url!r}: the scheme must be http or https, not {parts.scheme!r}")
    if not parts.hostname:
        raise ValueError(f"server URL {url!r} has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"server URL of {parts.hostname!r} carries credentials; use --header-secret instead")
    if parts.fragment:
        raise ValueError(f"server URL {url!r} has a fragment")
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in url):
        raise ValueError(f"server URL {url!r} holds whitespace or control characters")
    return url


def parse_header_secrets(url: str, pairs: Iterable[str] | Mapping[str, str]) -> dict[str, str]:
    """``HEADER=SECRET_NAME`` pairs (or a mapping) checked into ``{header: secret name}``.

    A secret is never sent over plain ``http`` except to a loopback address.

    Raises:
        ValueError: a malformed pair, header or name; a repeated header; plain http elsewhere.
    """
    items = list(pairs.items()) if isinstance(pairs, Mapping) else [_split(pair) for pair in pairs]
    found: dict[str, str] = {}
    for header, name in items:
        if not _HEADER.fullmatch(header) or header.lower() in _RESERVED:
            raise ValueError(f"--header-secret {header}={name}: {header!r} is not a header a secret may be sent in")
        if not _SECRET.fullmatch(name):
            raise ValueError(
                f"--header-secret {header}={name}: {name!r} is not an environment variable name or a secret reference"
            )
        if header.lower() in {known.lower() for known in found}:
            raise ValueError(f"--header-secret: header {header!r} is given twice")
        found[header] = name
    if found and urlsplit(url).scheme == "http" and not _loopback(urlsplit(url).hostname or ""):
        raise ValueError(f"server URL {url!r}: secrets are sent over https only (plain http only to loopback)")
    return found


def _split(pair: str) -> tuple[str, str]:
    header, sep, name = pair.partition("=")
    if not sep or not header or not name:
        raise ValueError(f"--header-secret {pair!r}: expected HEADER=SECRET_NAME")
    return header.strip(), name.strip()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_secrets(
    url: str, headers: HeaderSecrets, principal: str | None = None, home: Path | None = None
) -> tuple[dict[str, str], Scrubber]:
    """The header values to send and the scrubber for what comes back.

    ``{principal}`` in a reference is the calling principal (``connection://notes/{principal}``: each
    principal's own OAuth connection; ``connection://notes/ops``: one team account); without a
    principal (listing the server's tools at import, watching them) it is the ``default`` account.
    ``home``: the call's home, where a connection's tokens are read (None: ``GLOVEBOX_HOME``).

    Raises:
        UpstreamError: (not retryable) a secret has no value on this host; the message names it, never a value.
    """
    rules = [
        SecretRule(
            name=re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64],
            source=name,
            host="localhost",  # unused: the header goes to this tool's server only
            header=header,
            format="Bearer {value}" if header.lower() == "authorization" else "{value}",
            schemes=["http", "https"],
        )
        for header, name in headers.items()
    ]
    secrets = load_secrets(rules, "default" if principal is None else principal, home)
    missing = sorted({rule.source for rule in rules} - {secret.rule.source for secret in secrets})
    if missing:
        raise UpstreamError(
            f"the secret(s) {', '.join(missing)} for {urlsplit(url).hostname or url} have no value on this host",
            details={"secrets": missing},
            retryable=False,
        )
    return {secret.rule.header: secret.header_value for secret in secrets}, Scrubber(secrets)
