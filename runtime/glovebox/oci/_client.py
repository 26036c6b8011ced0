"""A client of the OCI distribution API (v2) over httpx: the few calls push and pull need.

- ``HEAD|GET|PUT /v2/<repo>/manifests/<ref>``: resolve a tag to its digest, fetch a manifest
  by digest (its bytes hashed and compared), publish one.
- ``HEAD|GET /v2/<repo>/blobs/<digest>``, ``POST`` + ``PUT /v2/<repo>/blobs/uploads/``: check,
  fetch (streamed, refused as soon as it passes its declared size or the cap), upload (monolithic).
- Auth: an anonymous request first; a ``401`` names the scheme in ``WWW-Authenticate``:
  ``Basic`` (the credentials of :mod:`._auth`) or ``Bearer`` (a token from the ``realm``, asked
  with the credentials when there are any, for ``repository:<repo>:pull[,push]``).

What it refuses (``registry_error``), because each is how a hostile or broken registry attacks:
a redirect of an API call to another origin; a redirect of a blob download to another origin
unless over https (credentials are never sent along); a manifest or blob whose bytes do not hash
to the digest asked for (``invalid_artifact``); a blob larger than its descriptor or the cap; a
manifest over 4 MiB. httpx errors are translated here, once, into :class:`RegistryError`.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from ..core._errors import InvalidArtifact, RegistryError
from ._auth import Credentials, credentials_for
from ._reference import OciReference, check_digest

if TYPE_CHECKING:
    import httpx

__all__ = ["MANIFEST_MAX_BYTES", "OciClient"]

#: The distribution spec lets a registry refuse manifests past 4 MiB; so does glovebox.
MANIFEST_MAX_BYTES = 4 * 1024 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_HOPS = 5
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_CHUNK_BYTES = 1024 * 1024


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying TLS context per process (making one costs ~50 ms: every client shares it)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class OciClient:
    """Talks to one registry (``ref.base_url``); use as a context manager.

    Args:
        ref: any reference on the registry (its host and scheme are used).
        transport: an ``httpx`` transport (tests wrap the real one); default: real connections.
        credentials: who to log in as; default: :func:`credentials_for` the host.
        timeout_s: the deadline of each request.
    """

    def __init__(
        self,
        ref: OciReference,
        *,
        transport: httpx.BaseTransport | None = None,
        credentials: Credentials | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        import httpx

        self.base_url = ref.base_url
        self._credentials = credentials if credentials is not None else credentials_for(ref.host)
        self._http = httpx.Client(transport=transport, timeout=timeout_s, follow_redirects=False, verify=_tls())
        self._auth: dict[str, str] = {}  # scope → Authorization header value

    def __enter__(self) -> OciClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- manifests -------------------------------------------------------

    def resolve(self, ref: OciReference, accept: str) -> str:
        """The digest ``ref``'s tag points at now (``ref.digest`` when pinned)."""
        if ref.digest is not None:
            return ref.digest
        with self._send("HEAD", ref.repository, f"manifests/{ref.tag}", headers={"Accept": accept}) as response:
            digest = response.headers.get("Docker-Content-Digest")
        if digest is None:  # a registry need not send it on HEAD: hash what GET returns
            body = self._get_manifest(ref.repository, ref.tag or "latest", accept)
            return "sha256:" + hashlib.sha256(body).hexdigest()
        try:
            return check_digest(digest, f"the digest {self.base_url} gave for {ref}")
        except ValueError as exc:
            raise RegistryError(str(exc)) from exc

    def manifest(self, repository: str, digest: str, accept: str) -> bytes:
        """The manifest stored under ``digest``; its bytes must hash to ``digest``."""
        body = self._get_manifest(repository, digest, accept)
        actual = "sha256:" + hashlib.sha256(body).hexdigest()
        if actual != digest:
            raise InvalidArtifact(
                f"{self.base_url}/{repository}: the manifest served for {digest} hashes to {actual}",
                details={"expected": digest, "actual": actual},
            )
        return body

    def tag_exists(self, repository: str, tag: str, accept: str) -> str | None:
        """The digest ``tag`` points at, or None when there is no such tag."""
        try:
            with self._send("HEAD", repository, f"manifests/{tag}", headers={"Accept": accept}) as response:
                found: str | None = response.headers.get("Docker-Content-Digest")
                return found
        except RegistryError as exc:
            if exc.details.get("status") == 404:
                return None
            raise

    def _get_manifest(self, repository: str, reference: str, accept: str) -> bytes:
        with self._send("GET", repository, f"manifests/{reference}", headers={"Accept": accept}) as response:
            return _read_capped(response, MANIFEST_MAX_BYTES, f"the manifest {repository}@{reference}")

    def put_manifest(self, repository: str, reference: str, body: bytes, media_type: str) -> str:
        """Publish ``body`` under ``reference`` (a tag or its digest); return its digest."""
        headers = {"Content-Type": media_type}
        with self._send("PUT", repository, f"manifests/{reference}", content=body, headers=headers, push=True):
            pass
        return "sha256:" + hashlib.sha256(body).hexdigest()

    # -- blobs -----------------------------------------------------------

    def has_blob(self, repository: str, digest: str) -> bool:
        try:
            with self._send("HEAD", repository, f"blobs/{digest}"):
                return True
        except RegistryError as exc:
            if exc.details.get("status") == 404:
                return False
            raise

    def push_blob(self, repository: str, data: bytes) -> str:
        """Upload ``data`` (unless the registry has it); return its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if self.has_blob(repository, digest):
            return digest
        with self._send("POST", repository, "blobs/uploads/", push=True) as response:
            location = response.headers.get("Location")
        if not location:
            raise RegistryError(f"{self.base_url} started an upload to {repository} without a Location")
        url = urljoin(self.base_url + "/", location)
        if _origin(url) != _origin(self.base_url):
            raise RegistryError(
                f"{self.base_url} sent the upload to another host ({_origin(url)}): refused",
                details={"location": _origin(url)},
            )
        joiner = "&" if "?" in url else "?"
        headers = {"Content-Type": "application/octet-stream"}
        with self._send("PUT", repository, None, url=f"{url}{joiner}digest={digest}", content=data, headers=headers):
            pass
        return digest

    def blob(self, repository: str, digest: str, size: int, cap: int) -> bytes:
        """The blob ``digest`` of declared ``size``: refused past ``size`` or ``cap`` bytes, or if it
        does not hash to ``digest`` (checked before anything of it is used)."""
        what = f"{self.base_url}/{repository}@{digest}"
        if size > cap:
            raise InvalidArtifact(
                f"{what} declares {size} bytes, over the {cap}-byte limit: not downloaded",
                details={"size": size, "limit": cap},
            )
        with self._send("GET", repository, f"blobs/{digest}", blob=True) as response:
            data = _read_capped(response, size, what)
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if len(data) != size or actual != digest:
            raise InvalidArtifact(
                f"{what}: the registry sent {len(data)} bytes hashing to {actual}, not the {size} bytes of {digest}",
                details={"expected": digest, "actual": actual},
            )
        return data

    # -- requests, auth and redirects --------------------------------------

    @contextmanager
    def _send(
        self,
        method: str,
        repository: str,
        path: str | None,
        *,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        push: bool = False,
        blob: bool = False,
    ) -> Iterator[httpx.Response]:
        """One request (authenticated on demand, redirects checked); the response open for reading.

        Raises:
            RegistryError: unreachable, a refusal (``details.status``), a redirect refused.
        """
        import httpx

        scope = f"repository:{repository}:pull,push" if push else f"repository:{repository}:pull"
        target = url or f"{self.base_url}/v2/{repository}/{path}"
        try:
            response = self._open(method, target, scope, headers or {}, content, blob)
        except httpx.HTTPError as exc:
            raise RegistryError(
                f"cannot reach the registry {self.base_url}: {exc}", details={"url": self.base_url}, retryable=True
            ) from exc
        try:
            if response.status_code >= 400:
                response.read()
                raise RegistryError(
                    f"{self.base_url} answered {method} {urlsplit(target).path} with HTTP {response.status_code}"
                    + _error_text(response),
                    details={"status": response.status_code, "url": self.base_url},
                    retryable=response.status_code in (429, 502, 503, 504),
                )
            yield response
        finally:
            response.close()

    def _open(
        self, method: str, url: str, scope: str, headers: dict[str, str], content: bytes | None, blob: bool
    ) -> httpx.Response:
        response = self._request(method, url, scope, headers, content, authorized=True)
        if response.status_code == 401:
            response.read()
            response.close()
            self._authenticate(response, scope)
            response = self._request(method, url, scope, headers, content, authorized=True)
        hops = 0
        while response.status_code in _REDIRECTS:
            response.close()
            hops += 1
            location = urljoin(url, response.headers.get("Location", ""))
            same = _origin(location) == _origin(self.base_url)
            if hops > _MAX_HOPS or not (same or (blob and location.startswith("https://"))):
                raise RegistryError(
                    f"{self.base_url} redirected {method} {urlsplit(url).path} to another host "
                    f"({_origin(location)}): refused",
                    details={"redirect": _origin(location), "url": self.base_url},
                )
            url = location
            response = self._request(method, url, scope, headers, content, authorized=same)
        return response

    def _request(
        self, method: str, url: str, scope: str, headers: dict[str, str], content: bytes | None, authorized: bool
    ) -> httpx.Response:
        sent = dict(headers)
        if authorized and scope in self._auth:
            sent["Authorization"] = self._auth[scope]
        request = self._http.build_request(method, url, headers=sent, content=content)
        return self._http.send(request, stream=True)

    def _authenticate(self, response: httpx.Response, scope: str) -> None:
        challenge = response.headers.get("WWW-Authenticate", "")
        kind, _, params_text = challenge.partition(" ")
        params = dict(_CHALLENGE.findall(params_text))
        creds = self._credentials
        if kind.lower() == "basic":
            if creds is None:
                raise RegistryError(
                    f"{self.base_url} requires a login and no credentials are configured for it "
                    "(docker config.json, or GLOVEBOX_OCI_USERNAME/GLOVEBOX_OCI_PASSWORD with GLOVEBOX_OCI_HOST)",
                    details={"status": 401, "url": self.base_url},
                )
            token = base64.b64encode(f"{creds.username}:{creds.password}".encode()).decode()
            self._auth[scope] = f"Basic {token}"
        elif kind.lower() == "bearer" and params.get("realm"):
            self._auth[scope] = f"Bearer {self._token(params, scope)}"
        else:
            raise RegistryError(f"{self.base_url} asked for an unsupported login: {challenge[:200]!r}")

    def _token(self, params: dict[str, str], scope: str) -> str:
        import httpx

        realm = params["realm"]
        if not (realm.startswith("https://") or _origin(realm) == _origin(self.base_url) or _loopback(realm)):
            raise RegistryError(
                f"{self.base_url} sent its token realm over plain http to another host ({_origin(realm)}): refused",
                details={"realm": _origin(realm), "url": self.base_url},
            )
        query = {"scope": params.get("scope", scope)}
        if params.get("service"):
            query["service"] = params["service"]
        auth = None
        if self._credentials is not None and self._credentials.identity_token is None:
            auth = (self._credentials.username, self._credentials.password)
        try:
            answer = self._http.get(realm, params=query, auth=auth)
        except httpx.HTTPError as exc:
            raise RegistryError(f"cannot reach the token service of {self.base_url}: {exc}", retryable=True) from exc
        if answer.status_code != 200:
            raise RegistryError(
                f"the token service of {self.base_url} refused a token for {scope} (HTTP {answer.status_code})",
                details={"status": answer.status_code, "url": self.base_url},
            )
        try:
            body: Any = answer.json()
            token = body.get("token") or body.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"the token service of {self.base_url} answered without a token")
        return token


def _loopback(url: str) -> bool:
    """A plain-http URL on a loopback host (the one exception references make to https too)."""
    return url.startswith("http://") and urlsplit(url).hostname in {"127.0.0.1", "localhost", "::1"}


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _read_capped(response: httpx.Response, limit: int, what: str) -> bytes:
    """The body, refused as soon as it passes ``limit`` bytes (a Content-Length over it: before reading)."""
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise InvalidArtifact(
            f"{what} is {declared} bytes, over the {limit} bytes expected: not downloaded",
            details={"size": int(declared), "limit": limit},
        )
    chunks: list[bytes] = []
    received = 0
    for chunk in response.iter_bytes(_CHUNK_BYTES):
        received += len(chunk)
        if received > limit:
            raise InvalidArtifact(
                f"{what} sent more than the {limit} bytes expected: download stopped",
                details={"received": received, "limit": limit},
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _error_text(response: httpx.Response) -> str:
    try:
        errors = response.json().get("errors") or []
        first = errors[0]
        return f": {first.get('code', '')} {first.get('message', '')}".rstrip()[:300]
    except (ValueError, AttributeError, IndexError, TypeError):
        return ""
