"""A real OAuth 2.1 authorization server for the tests, built on Authlib, and a resource it protects.

Authlib's grants do the protocol: the authorization code with PKCE required
(RFC 7636), refresh tokens rotated on every use (a replayed one is
``invalid_grant``), the device flow (RFC 8628), revocation (RFC 7009),
dynamic client registration (RFC 7591) and ``iss`` in authorization
responses (RFC 9207). This module only wires them to Starlette and keeps
their state in memory. Access tokens are HS256 JWTs whose ``aud`` is the
``resource`` the client asked for (RFC 8707).

The user signs in with a one-field form at ``/authorize`` (a name; approve).
``/api`` (and every path under it) is a protected resource: its RFC 9728 metadata is served at
``/.well-known/oauth-protected-resource/api`` and a request without a valid
token answers 401 naming it. ``Hostile`` switches turn the server against its
client: another ``aud``, another ``iss``, a token endpoint that redirects.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # the server listens on plain http on 127.0.0.1

from authlib.oauth2.rfc6749 import AuthorizationServer, ClientMixin, OAuth2Request
from authlib.oauth2.rfc6749 import grants as rfc6749_grants
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientMetadataClaims, ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc8628 import DeviceAuthorizationEndpoint, DeviceCodeGrant, DeviceCredentialDict
from authlib.oauth2.rfc9207 import IssuerParameter
from joserfc import jwt
from joserfc.jwk import OctKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

__all__ = ["AuthServer", "Hostile"]

KEY = OctKey.import_key(secrets.token_bytes(32))


@dataclass
class Client(ClientMixin):  # type: ignore[misc]
    client_id: str
    client_secret: str | None
    redirect_uris: list[str]
    auth_method: str = "none"
    grant_types: list[str] = field(default_factory=list)

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        return self.redirect_uris[0] if self.redirect_uris else None

    def get_allowed_scope(self, scope: str) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client_secret is not None and secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == self.auth_method if endpoint == "token" else True

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    code_challenge: str | None
    code_challenge_method: str | None
    resource: str | None

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_auth_time(self) -> None:
        return None

    def get_nonce(self) -> None:
        return None


@dataclass
class Token:
    client_id: str
    user: str
    scope: str
    access_token: str
    refresh_token: str | None
    issued_at: float
    expires_in: int
    resource: str | None
    revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return False  # a refresh token does not expire here

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> str:
        return self.user


@dataclass
class Hostile:
    """Ways the server turns against its client."""

    audience: str | None = None
    issuer: str | None = None
    token_redirect: str | None = None
    resource: str | None = None
    no_registration: bool = False


class _Answer(Response):
    """A response whose ``location`` Authlib's RFC 9207 extension can rewrite."""

    @property
    def location(self) -> str | None:
        return self.headers.get("location")

    @location.setter
    def location(self, value: str) -> None:
        self.headers["location"] = value


class _Request(OAuth2Request):  # type: ignore[misc]
    def __init__(self, method: str, url: str, headers: Any, query: dict[str, str], form: dict[str, str]) -> None:
        super().__init__(method, url, headers=headers)
        self._query, self._form = query, form
        self.payload = BasicOAuth2Payload({**query, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._query

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _JsonRequest:
    def __init__(self, method: str, url: str, headers: Any, body: dict[str, Any]) -> None:
        self.method, self.uri, self.headers = method, url, headers
        self.payload = type("Payload", (), {"data": body})()
        self.credential: Any = None


class AuthServer(AuthorizationServer):  # type: ignore[misc]
    """The authorization server and its protected resource, on one Starlette app."""

    def __init__(self, expires_in: int = 3600) -> None:
        super().__init__(scopes_supported=["read", "write"])
        self.base = ""  # set once the server listens
        self.expires_in = expires_in
        self.hostile = Hostile()
        self.clients: dict[str, Client] = {}
        self.codes: dict[str, Code] = {}
        self.tokens: list[Token] = []
        self.devices: dict[str, DeviceCredentialDict] = {}
        self.device_users: dict[str, tuple[str, bool]] = {}
        self.refreshes = 0
        self.lock = threading.Lock()
        self._resource: str | None = None
        self.register_token_generator("default", self._generate)
        self.register_grant(_CodeGrant, [CodeChallenge(required=True)])
        self.register_grant(_RefreshGrant)
        self.register_grant(_DeviceGrant)
        self.register_endpoint(_Revocation)
        self.register_endpoint(_Device)
        self.register_endpoint(_Registration(claims_classes=[ClientMetadataClaims]))
        self.register_extension(_Issuer(self))

    # -- Authlib's framework hooks ------------------------------------------------------------
    def query_client(self, client_id: str) -> Client | None:
        return self.clients.get(client_id)

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        user = request.user or (request.credential.user if isinstance(request.credential, Token) else "")
        self.tokens.append(
            Token(
                request.client.client_id, user, token.get("scope", ""), token["access_token"],
                token.get("refresh_token"), time.time(), token.get("expires_in", 0), self._resource,
            )
        )  # fmt: skip

    def create_oauth2_request(self, request: Any) -> Any:
        return request

    def create_json_request(self, request: Any) -> Any:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> Response:
        headers = dict(headers or [])
        if isinstance(body, dict):
            return JSONResponse(body, status_code=status, headers=headers)
        return _Answer(body or b"", status_code=status, headers=headers)

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    def _generate(
        self, grant_type: str, client: Client, user: Any = None, scope: str | None = None,
        expires_in: int | None = None, include_refresh_token: bool = True,
    ) -> dict[str, Any]:  # fmt: skip
        audience = self.hostile.audience or self._resource or self.base
        claims = {"iss": self.base, "sub": str(user), "aud": audience, "exp": int(time.time()) + self.expires_in}
        claims["jti"] = secrets.token_hex(8)
        token: dict[str, Any] = {
            "token_type": "Bearer",
            "access_token": jwt.encode({"alg": "HS256"}, claims, KEY),
            "expires_in": self.expires_in,
        }
        if include_refresh_token:
            token["refresh_token"] = secrets.token_urlsafe(32)
        if scope:
            token["scope"] = scope
        return token

    # -- the Starlette app ---------------------------------------------------------------------
    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", self.metadata),
                Route("/.well-known/oauth-protected-resource/api", self.resource_metadata),
                Route("/authorize", self.authorize, methods=["GET", "POST"]),
                Route("/token", self.token, methods=["POST"]),
                Route("/revoke", self.revoke, methods=["POST"]),
                Route("/device", self.device, methods=["POST"]),
                Route("/register", self.register, methods=["POST"]),
                Route("/api", self.api, methods=["GET", "POST"]),
                Route("/api/{rest:path}", self.api, methods=["GET", "POST"]),  # an imported API's operations
            ]
        )

    async def _wrap(self, request: Request) -> _Request:
        form = {key: str(value) for key, value in (await request.form()).items()}
        return _Request(request.method, str(request.url), request.headers, dict(request.query_params), form)

    async def metadata(self, request: Request) -> Response:
        base = self.base
        return JSONResponse(
            {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "revocation_endpoint": f"{base}/revoke",
                "registration_endpoint": f"{base}/register",
                "device_authorization_endpoint": f"{base}/device",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token", DeviceCodeGrant.GRANT_TYPE],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
                "authorization_response_iss_parameter_supported": True,
                "scopes_supported": ["read", "write"],
            }
            | ({"registration_endpoint": None} if self.hostile.no_registration else {})
        )

    async def resource_metadata(self, request: Request) -> Response:
        resource = self.hostile.resource or f"{self.base}/api"
        return JSONResponse({"resource": resource, "authorization_servers": [self.base]})

    async def authorize(self, request: Request) -> Response:
        wrapped = await self._wrap(request)
        if request.method == "GET":
            fields = "".join(
                f'<input type="hidden" name="{k}" value="{v}">' for k, v in wrapped.args.items()
            )  # the test's own server: the values are the client's URL-safe parameters
            return HTMLResponse(
                f'<form method="post" action="/authorize?{urlencode(wrapped.args)}">{fields}'
                '<label>User <input id="user" name="user"></label>'
                '<button id="approve" type="submit">Approve</button></form>'
            )
        with self.lock:
            self._resource = wrapped.args.get("resource")
            grant = self.get_consent_grant(wrapped)
            return self.create_authorization_response(wrapped, grant_user=wrapped.form["user"], grant=grant)

    async def token(self, request: Request) -> Response:
        if self.hostile.token_redirect:
            return RedirectResponse(self.hostile.token_redirect, status_code=307)
        wrapped = await self._wrap(request)
        with self.lock:
            self._resource = wrapped.form.get("resource")
            return self.create_token_response(wrapped)

    async def revoke(self, request: Request) -> Response:
        wrapped = await self._wrap(request)
        with self.lock:
            return self.create_endpoint_response("revocation", wrapped)

    async def device(self, request: Request) -> Response:
        wrapped = await self._wrap(request)
        with self.lock:
            return self.create_endpoint_response("device_authorization", wrapped)

    async def register(self, request: Request) -> Response:
        wrapped = _JsonRequest(request.method, str(request.url), request.headers, await request.json())
        with self.lock:
            return self.create_endpoint_response("client_registration", wrapped)

    def approve_device(self, user_code: str, user: str, approved: bool = True) -> None:
        """The user typed ``user_code`` at the verification page and approved (or refused)."""
        self.device_users[user_code] = (user, approved)

    def live(self, access_token: str) -> Token | None:
        with self.lock:
            for token in self.tokens:
                if token.access_token == access_token and not token.revoked:
                    return token
        return None

    async def api(self, request: Request) -> Response:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        found = self.live(value) if scheme.lower() == "bearer" else None
        if found is None or (found.resource or self.base) != f"{self.base}/api":
            metadata = f"{self.base}/.well-known/oauth-protected-resource/api"
            header = f'Bearer resource_metadata="{metadata}"'
            return JSONResponse({"error": "invalid_token"}, status_code=401, headers={"WWW-Authenticate": header})
        return JSONResponse({"user": found.user, "scope": found.scope})


class _Issuer(IssuerParameter):  # type: ignore[misc]
    def __init__(self, server: AuthServer) -> None:
        self.server = server

    def get_issuer(self) -> str:
        return self.server.hostile.issuer or self.server.base


class _CodeGrant(rfc6749_grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic"]

    def save_authorization_code(self, code: str, request: Any) -> None:
        args = request.args
        self.server.codes[code] = Code(
            code, request.client.client_id, args.get("redirect_uri", ""), request.scope or "", request.user,
            args.get("code_challenge"), args.get("code_challenge_method"), args.get("resource"),
        )  # fmt: skip

    def query_authorization_code(self, code: str, client: Client) -> Code | None:
        found = self.server.codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        self.server.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: Code) -> str:
        return authorization_code.user


class _RefreshGrant(rfc6749_grants.RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
        for token in self.server.tokens:
            if token.refresh_token == refresh_token and not token.revoked:
                return token
        return None

    def authenticate_user(self, refresh_token: Token) -> str:
        return refresh_token.user

    def revoke_old_credential(self, refresh_token: Token) -> None:
        refresh_token.revoked = True
        self.server.refreshes += 1


class _DeviceGrant(DeviceCodeGrant):  # type: ignore[misc]
    def query_device_credential(self, device_code: str) -> DeviceCredentialDict | None:
        return self.server.devices.get(device_code)

    def query_user_grant(self, user_code: str) -> tuple[str, bool] | None:
        return self.server.device_users.get(user_code)

    def should_slow_down(self, credential: Any) -> bool:
        return False


class _Device(DeviceAuthorizationEndpoint):  # type: ignore[misc]
    INTERVAL = 0

    def get_verification_uri(self) -> str:
        return f"{self.server.base}/activate"

    def save_device_credential(self, client_id: str, scope: str, data: dict[str, Any]) -> None:
        credential = DeviceCredentialDict(client_id=client_id, scope=scope, **data)
        credential["expires_at"] = int(time.time()) + data["expires_in"]
        self.server.devices[data["device_code"]] = credential


class _Revocation(RevocationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = ["none", "client_secret_basic"]

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        for token in self.server.tokens:
            if token_string in (token.access_token, token.refresh_token):
                return token
        return None

    def revoke_token(self, token: Token, request: Any) -> None:
        token.revoked = True


class _Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
    def authenticate_token(self, request: Any) -> bool:
        return True  # open registration, as MCP servers offer it

    def resolve_public_key(self, request: Any) -> None:
        return None

    def get_server_metadata(self) -> dict[str, Any]:
        return {
            "scopes_supported": ["read", "write"],
            "grant_types_supported": ["authorization_code", "refresh_token", DeviceCodeGrant.GRANT_TYPE],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
            "response_types_supported": ["code"],
        }

    def save_client(self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any) -> Client:
        method = client_metadata.get("token_endpoint_auth_method", "client_secret_basic")
        client = Client(
            client_info["client_id"],
            None if method == "none" else client_info["client_secret"],
            list(client_metadata.get("redirect_uris", [])),
            method,
            list(client_metadata.get("grant_types", ["authorization_code"])),
        )
        self.server.clients[client.client_id] = client
        return client
