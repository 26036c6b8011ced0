"""Policy documents: who may call what, with which grants and limits.

A policy is a versioned YAML document (``version: 1``); unknown versions and
unknown fields are errors. Every model is frozen and forbids extra fields.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import Field, model_validator

from ..core._frozen import Frozen
from ..model._capability import registered
from ..model._grants import HttpLimits, HttpRule, SecretRule, SqlGrant, compose
from ._guards import GuardRule

__all__ = [
    "Action",
    "ApprovalSettings",
    "AuditSettings",
    "ConnectionSettings",
    "Defaults",
    "GrantRule",
    "LimitOverride",
    "LimitValues",
    "Policy",
    "Principal",
    "Quota",
    "SignatureRule",
    "ToolRule",
]

Action = Literal["allow", "require_approval", "block"]

#: How restrictive each action is: the most restrictive matching rule wins.
SEVERITY: dict[str, int] = {"allow": 0, "require_approval": 1, "block": 2}


class Principal(Frozen):
    """Someone who calls tools: an agent, a person, a service."""

    description: str = Field("", description="Who this is.")
    scopes: list[str] = Field([], description="Scopes held; a tool's required_scopes must all be among them.")
    api_key_sha256: list[Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]] = Field(
        [],
        description="Hex SHA-256 digests of API keys that authenticate as this principal (for the servers).",
    )


class _Targeted(Frozen):
    tool: str = Field("*", description="Tool name pattern (fnmatch-style; 'name@version' when it contains '@').")
    principals: list[str] = Field(["*"], description="Principal name patterns this entry applies to.")


class ToolRule(_Targeted):
    """What happens when matching principals call matching tools."""

    action: Action = Field(description="allow, require_approval or block.")
    reason: str = Field("", description="Shown in explanations and denials.")


if TYPE_CHECKING:

    class GrantRule(_Targeted):
        """Capabilities granted to matching calls (the built-ins, for type checkers)."""

        http: list[HttpRule] = []
        http_limits: HttpLimits | None = None
        secrets: list[SecretRule] = []
        sql: list[SqlGrant] = []

        def __getattr__(self, name: str) -> Any: ...  # a registered capability's grant

else:
    GrantRule = compose(
        "GrantRule",
        __name__,
        _Targeted,
        "Capabilities granted to matching calls (intersected with the manifest's own).",
        {key: spec for capability in registered() for key, spec in capability.policy_fields().items()},
    )


class LimitValues(Frozen):
    """Limit overrides; a field left out keeps the manifest's value. Overrides only tighten."""

    fuel: int | None = Field(None, gt=0)
    memory_bytes: int | None = Field(None, gt=0)
    timeout_ms: int | None = Field(None, gt=0)
    output_bytes: int | None = Field(None, gt=0)
    log_bytes: int | None = Field(None, ge=0)
    max_timeout_ms: int | None = Field(
        None,
        gt=0,
        description="How far progress notifications of an MCP server's tool may extend its timeout_ms "
        "(a ceiling; the host maximum caps it; unset: no extension).",
    )


class LimitOverride(_Targeted):
    """Tighter limits for matching calls."""

    limits: LimitValues = Field(description="The limits to apply (never loosens a manifest).")


class Quota(_Targeted):
    """How much each matching principal may call matching tools (counted per principal, per entry)."""

    max_in_flight: int | None = Field(None, gt=0, description="Calls of one principal running at once.")
    calls_per_minute: int | None = Field(None, gt=0, description="Calls one principal may start in any 60 seconds.")
    fuel_per_minute: int | None = Field(
        None, gt=0, description="Fuel one principal's calls may use in any 60 seconds (charged when a call ends)."
    )

    @model_validator(mode="after")
    def _sets_a_bound(self) -> Self:
        if self.max_in_flight is None and self.calls_per_minute is None and self.fuel_per_minute is None:
            raise ValueError("a quota needs at least one of max_in_flight, calls_per_minute, fuel_per_minute")
        return self


class Defaults(Frozen):
    """What applies when no rule matches."""

    action: Action = Field("block", description="Action when no tool rule matches.")


class ApprovalSettings(Frozen):
    """How require_approval works."""

    approver_scope: str = Field("glovebox:approve", description="Scope a principal needs to approve calls.")
    ttl_s: int = Field(900, gt=0, description="Seconds an approval request stays valid (to approve and to use).")


class AuditSettings(Frozen):
    """What the audit log keeps besides the call record."""

    store_inputs: bool = Field(False, description="Store call inputs (secret-looking keys redacted).")
    store_outputs: bool = Field(False, description="Store call outputs (secret-looking keys redacted).")


class RunSettings(Frozen):
    """Code mode (``Runtime.run``): how many runs a principal may start, how long finished ones are kept."""

    runs_per_minute: int | None = Field(
        None, gt=0, description="Runs one principal may start in any 60 seconds (counted in the home's run store)."
    )
    retention_days: float = Field(
        30.0, gt=0, description="Days a finished run and its journal are kept before `glovebox runs gc` deletes them."
    )
    lease_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Seconds an executing run's lease lasts unless renewed (renewed every third of it): a resume"
        " meanwhile answers run_busy; once a dead holder's lease expires, the run resumes.",
    )


class ConnectionSettings(Frozen):
    """OAuth connections (``glovebox connect``): which authorization servers may issue their tokens.

    Which account a call uses is chosen where the token is named: a grant's secret
    ``connection://NAME/{principal}`` (each principal's own), or ``connection://NAME/ACCOUNT``
    in a grant that targets a team's principals.
    """

    issuers: list[Annotated[str, Field(pattern=r"^https?://[^\s#?]+$")]] = Field(
        [],
        description="Issuer URLs (exact, as in their RFC 8414 metadata) a connection may be made with;"
        " empty: none (glovebox connect refuses every server).",
    )


class SignatureRule(Frozen):
    """Artifacts registered from matching ``oci://`` sources (and OCI layouts pulled from them) must carry a
    cosign signature by one of these keys, checked before the component is compiled."""

    source: str = Field(
        "*", description="HOST/REPOSITORY pattern (fnmatch-style) of the oci:// sources this entry covers."
    )
    keys: list[str] = Field(
        min_length=1,
        description="cosign public keys (PEM, ECDSA P-256): paths, relative ones from the policy file's directory;"
        " a valid signature by any one of them is required.",
    )


class Policy(Frozen):
    """A policy document (``version: 1``)."""

    version: Literal[1] = Field(description="Format version; only 1 exists.")
    description: str = Field("", description="What this policy is for.")
    principals: dict[str, Principal] = Field({}, description="Known principals by name; others hold no scopes.")
    rules: list[ToolRule] = Field([], description="Tool rules; the most restrictive match wins.")
    grants: list[GrantRule] = Field([], description="Capability grants (network, secrets).")
    limits: list[LimitOverride] = Field([], description="Limit overrides.")
    quotas: list[Quota] = Field([], description="Quotas per principal; every matching entry applies.")
    guards: list[GuardRule] = Field(
        [],
        description="Guards per tool (idempotence, retries, breaker, checks); per field, the first matching one wins.",
    )
    defaults: Defaults = Field(Defaults(), description="What applies when no rule matches.")
    approvals: ApprovalSettings = Field(ApprovalSettings(), description="Approval settings.")
    audit: AuditSettings = Field(AuditSettings(), description="Audit settings.")
    runs: RunSettings = Field(RunSettings(), description="Code mode: runs per principal and their retention.")
    connections: ConnectionSettings = Field(
        ConnectionSettings(), description="OAuth connections: the allowlist of authorization servers."
    )
    signatures: list[SignatureRule] = Field(
        [],
        description="Signatures required of oci:// sources: every matching entry applies (one valid signature each).",
    )

    def scopes_of(self, principal: str) -> frozenset[str]:
        """The scopes a principal holds (none for an unknown principal)."""
        entry = self.principals.get(principal)
        return frozenset(entry.scopes) if entry is not None else frozenset()

    def principal_for_api_key(self, api_key: str) -> str | None:
        """The principal an API key authenticates as (compared by SHA-256, in constant time), or None."""
        digest = hashlib.sha256(api_key.encode("utf-8")).hexdigest()
        found = None
        for name, entry in self.principals.items():
            for known in entry.api_key_sha256:
                if hmac.compare_digest(known, digest):
                    found = name
        return found


#: The behaviour when no policy is configured: tools without required scopes
#: run, tools with required scopes are refused, nothing is granted.
NO_POLICY = Policy(version=1, description="no policy configured", defaults=Defaults(action="allow"))
