"""``oci://HOST[:PORT]/REPOSITORY[:TAG][@sha256:HEX]``: an artifact in a registry, parsed once.

The grammar is the distribution spec's: a repository is lowercase path
components (``[a-z0-9]+`` joined by ``.``, ``_``, ``__`` or ``-``), a tag is at
most 128 characters of ``[A-Za-z0-9_.-]`` not starting with ``.`` or ``-``, a
digest is ``sha256:`` and 64 lowercase hex digits. Plain ``http`` is used for a
loopback host (``127.0.0.1``, ``::1``, ``localhost``) or when asked (``insecure``);
every other host is reached over https.

>>> ref = OciReference.parse("oci://127.0.0.1:5000/team/echo:1.0")
>>> (ref.host, ref.repository, ref.tag, ref.digest, ref.scheme)
('127.0.0.1:5000', 'team/echo', '1.0', None, 'http')
>>> OciReference.parse("oci://ghcr.io/o/t@sha256:" + "a" * 64).pinned
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

__all__ = ["LOOPBACK_HOSTS", "OciReference", "check_digest"]

_REPOSITORY = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_HOST = re.compile(r"^(?:\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::[0-9]{1,5})?$")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
PREFIX = "oci://"
#: Registries whose API lives on another host than the name people write.
_API_HOSTS = {"docker.io": "registry-1.docker.io", "index.docker.io": "registry-1.docker.io"}


def check_digest(digest: str, what: str = "digest") -> str:
    """``digest`` when it is ``sha256:`` and 64 lowercase hex digits; else ValueError."""
    if not _DIGEST.match(digest):
        raise ValueError(f"{what} {digest!r} is not sha256:<64 lowercase hex digits>")
    return digest


@dataclass(frozen=True)
class OciReference:
    """One artifact in one registry: by tag, by digest, or both (the digest wins)."""

    host: str
    repository: str
    tag: str | None = None
    digest: str | None = None
    insecure: bool = False

    @classmethod
    def parse(cls, text: str, *, insecure: bool = False) -> OciReference:
        """Parse ``oci://HOST/REPO[:TAG][@sha256:...]`` (no tag and no digest: ``latest``).

        Raises:
            ValueError: not an ``oci://`` reference, or a part breaks the grammar (named).
        """
        if not text.startswith(PREFIX):
            raise ValueError(f"{text!r} is not an oci:// reference (oci://HOST/REPOSITORY:TAG)")
        rest = text[len(PREFIX) :]
        host, slash, path = rest.partition("/")
        if not slash or not _HOST.match(host):
            raise ValueError(f"{text!r}: expected oci://HOST[:PORT]/REPOSITORY[:TAG][@sha256:...]")
        path, at, digest = path.partition("@")
        repository, tag = path, None
        last = path.rsplit("/", 1)[-1]
        if ":" in last:
            repository, _, tag = path.rpartition(":")
            if not _TAG.match(tag):
                raise ValueError(f"{text!r}: tag {tag!r} is not [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}")
        if not _REPOSITORY.match(repository) or len(repository) > 255:
            raise ValueError(f"{text!r}: repository {repository!r} is not lowercase path components")
        if at:
            check_digest(digest, f"{text!r}: digest")
        elif tag is None:
            tag = "latest"
        return cls(host, repository, tag, digest or None, insecure)

    @property
    def scheme(self) -> str:
        """``http`` for a loopback host or an insecure reference, else ``https``."""
        hostname = self.host.rsplit(":", 1)[0] if not self.host.startswith("[") else self.host.split("]")[0] + "]"
        return "http" if self.insecure or hostname in LOOPBACK_HOSTS else "https"

    @property
    def base_url(self) -> str:
        """``SCHEME://HOST`` (the registry's root, where ``/v2/`` lives; Docker Hub's API for ``docker.io``)."""
        return f"{self.scheme}://{_API_HOSTS.get(self.host, self.host)}"

    @property
    def pinned(self) -> bool:
        """Whether the reference names a digest (nothing to resolve)."""
        return self.digest is not None

    @property
    def name(self) -> str:
        """``HOST/REPOSITORY`` (the docker reference a cosign signature names)."""
        return f"{self.host}/{self.repository}"

    @property
    def ref(self) -> str:
        """What the registry's manifest endpoint takes: the digest when known, else the tag."""
        return self.digest or self.tag or "latest"

    def at(self, digest: str) -> OciReference:
        """The same artifact pinned to ``digest`` (the tag kept for the record)."""
        return replace(self, digest=check_digest(digest))

    def with_tag(self, tag: str) -> OciReference:
        """Another tag in the same repository (unpinned)."""
        return replace(self, tag=tag, digest=None)

    def __str__(self) -> str:
        text = f"{PREFIX}{self.host}/{self.repository}"
        if self.tag is not None:
            text += f":{self.tag}"
        if self.digest is not None:
            text += f"@{self.digest}"
        return text
