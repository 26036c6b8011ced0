"""Fixtures of the OCI tests: a real registry (``tests/ociregistry.py``) and a registered tool to push."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import glovebox

from ..ociregistry import OciRegistry, registry_binary, start_registry


@pytest.fixture(scope="session")
def oci_registry() -> Iterator[OciRegistry]:
    """One registry for the session (each test uses repositories of its own)."""
    binary = registry_binary()
    if binary is None:
        pytest.skip("no OCI registry binary (Debian's docker-registry; make test installs it)")
    server = start_registry(binary)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def echo_runtime(runtime: glovebox.Runtime, build_guest: Callable[[str], Path]) -> glovebox.Runtime:
    """A Runtime with the ``echo`` guest registered (the tool pushed by most tests)."""
    runtime.register(build_guest("echo"))
    return runtime


@pytest.fixture(autouse=True)
def _no_docker_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's docker logins never reach a test registry."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))


@pytest.fixture
def cosign_keys(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh ECDSA P-256 pair (what ``glovebox keys generate --oci`` writes): (private, public)."""
    from glovebox.oci import generate_oci_keypair

    return generate_oci_keypair("team", tmp_path / "keys")
