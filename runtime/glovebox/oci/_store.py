"""What reading an artifact needs from where it lies: a registry's repository or an OCI layout."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Store"]


class Store(Protocol):
    """A registry repository (:class:`~._client.OciClient`) or a layout (:class:`~._layout.LayoutStore`)."""

    base_url: str

    def tag_exists(self, repository: str, tag: str, accept: str) -> str | None: ...
    def manifest(self, repository: str, digest: str, accept: str) -> bytes: ...
    def blob(self, repository: str, digest: str, size: int, cap: int) -> bytes: ...
    def close(self) -> None: ...
