"""The capability grant model, shared by manifests (what a tool asks for),
policies (what an operator grants) and the host functions (what is enforced).

A request is allowed when it matches at least one rule the tool's manifest
declares AND at least one rule the call was granted: the effective grant is
the intersection of the two, computed per request by one matcher. Nothing is
granted by default.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Grants", "HttpLimits", "HttpRule", "SecretRule"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HttpRule(_Frozen):
    """One family of HTTP requests: scheme, host, port, method and path patterns."""

    host: str = Field(description="Exact host name or a '*.example.com' wildcard (one or more labels).")
    schemes: list[Literal["http", "https"]] = Field(default=["https"], description="Allowed URL schemes.")
    ports: list[int] | None = Field(default=None, description="Allowed ports; None means the scheme's default.")
    methods: list[str] = Field(default=["GET"], description="Allowed methods, upper case; '*' for any.")
    paths: list[str] = Field(default=["/*"], description="Path patterns; '*' matches within one segment, '**' across.")
    allow_private: bool = Field(
        default=False, description="Allow this host to resolve to loopback/private/link-local addresses."
    )
    follow_redirects: bool = Field(default=False, description="Follow redirects (each hop is re-checked).")


class HttpLimits(_Frozen):
    """Per-call limits on HTTP use."""

    max_requests: int = Field(default=16, ge=0)
    max_request_bytes: int = Field(default=1024 * 1024, ge=0)
    max_response_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    request_timeout_ms: int = Field(default=10_000, gt=0)
    max_redirects: int = Field(default=5, ge=0)


class SecretRule(_Frozen):
    """A named secret the host adds to matching requests; the guest never sees it."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    provider: Literal["env", "file"] = "env"
    source: str = Field(description="Environment variable name (env) or file path (file).")
    host: str = Field(description="Host (or '*.example.com') whose requests receive the secret.")
    header: str = "Authorization"
    format: str = Field(default="Bearer {value}", description="Header value template; {value} is the secret.")


class Grants(_Frozen):
    """What one call may use beyond its own memory: the default is nothing."""

    http: list[HttpRule] = []
    http_limits: HttpLimits = HttpLimits()
    secrets: list[SecretRule] = []
