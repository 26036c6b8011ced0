"""A real Authlib authorization server on 127.0.0.1 and a console (``glovebox serve``) for its callback."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import glovebox
from glovebox.capabilities._providers import provider
from glovebox.connections import CALLBACK_PATH, ConnectionRecord, ConnectionStore, ConnectSettings, begin, prepare
from glovebox.servers import create_app

pytest.importorskip("authlib", reason="the dev extra (authlib) is not installed")

from .oauthserver import AuthServer  # noqa: E402

#: The console's API keys of the test principals, and their scopes.
KEYS = {
    "admin": ("admin-key-oauth", ""),
    "alice": ("alice-key", ""),
    "bob": ("bob-key", ""),
    "auditor": ("auditor-key", "glovebox:audit"),
}


@dataclass
class Served:
    """The authorization server, its base URL, and the console whose callback completes flows."""

    auth: AuthServer
    url: str
    console: str
    home: Path
    policy: Path

    @property
    def resource(self) -> str:
        return f"{self.url}/api"

    @property
    def redirect(self) -> str:
        return self.console + CALLBACK_PATH

    def store(self) -> ConnectionStore:
        return ConnectionStore(self.home)

    def begin(self, account: str = "default", name: str = "notes", resource: str | None = None) -> str:
        settings = ConnectSettings(name=name, resource=resource or self.resource, account=account, scope="read")
        prepared = prepare(settings, [self.url], self.redirect)
        url, _state = begin(prepared, self.redirect, self.store())
        return url

    def authorize_as(self, user: str, url: str) -> httpx.Response:
        """What a browser does: open the URL, approve as ``user``, follow redirects to the console."""
        with httpx.Client(follow_redirects=True, timeout=30) as browser:
            browser.get(url).raise_for_status()
            query = dict(httpx.URL(url).params)
            return browser.post(url, data={**query, "user": user})

    def connect(self, user: str, account: str = "default", name: str = "notes") -> ConnectionRecord:
        answer = self.authorize_as(user, self.begin(account, name))
        assert answer.status_code == 200, answer.text
        return self.store().get(name, account)


@pytest.fixture(autouse=True)
def _fresh_connection_cache() -> Iterator[None]:
    provider("connection").forget()
    yield
    provider("connection").forget()


@pytest.fixture
def served(_isolated_env: Path, tmp_path: Path, serve_app: Callable[[object], str]) -> Iterator[Served]:
    auth = AuthServer()
    auth.base = serve_app(auth.app())
    policy = tmp_path / "policy.yaml"
    principals = "".join(
        f"  {name}: {{scopes: [{scopes}], api_key_sha256: [{hashlib.sha256(key.encode()).hexdigest()}]}}\n"
        for name, (key, scopes) in KEYS.items()
    )
    policy.write_text(f"version: 1\nconnections:\n  issuers: [{auth.base}]\nprincipals:\n{principals}")
    with glovebox.Runtime(home=_isolated_env, policy=policy) as rt:
        console = serve_app(create_app(rt))
        yield Served(auth, auth.base, console, _isolated_env, policy)
