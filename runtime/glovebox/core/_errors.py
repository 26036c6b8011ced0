"""The glovebox exception tree and the stable error codes.

Every failure a caller can see has a stable ``code`` string (part of the public
contract), a ``retryable`` flag and, for the CLI, an ``exit_code``::

    GloveboxError                      (root; never raised directly)
    ├── CallError                      (ends a call; carried in the envelope)
    │   ├── ToolNotFound               tool_not_found
    │   ├── InvalidInput               invalid_input
    │   ├── PermissionDenied           permission_denied (also raised by approve)
    │   ├── ApprovalRequired           approval_required
    │   ├── CapabilityDenied           capability_denied
    │   ├── FuelExhausted              fuel_exhausted
    │   ├── MemoryLimit                memory_limit
    │   ├── CallTimeout                timeout
    │   ├── OutputTooLarge             output_too_large
    │   ├── GuestTrap                  guest_trap
    │   ├── GuestError                 guest_error
    │   ├── InvalidOutput              invalid_output
    │   ├── UpstreamError              upstream_error (retryable)
    │   ├── RateLimited                rate_limited (retryable)
    │   ├── Overloaded                 overloaded (retryable; details.retry_after_ms)
    │   ├── CircuitOpen                circuit_open (retryable; details.retry_after_ms, details.scope)
    │   ├── EvaluationFailed           evaluation_failed (details.check, details.reason)
    │   ├── RunDiverged                run_diverged (a resumed program left its journal; details.step)
    │   ├── RunLimit                   run_limit (a run's journal is full; details.bound, details.limit)
    │   ├── RunBusy                    run_busy (another process holds the run's lease; retryable; details.holder)
    │   ├── ProgramChanged             program_changed (a stored run's program is not the one it started with)
    │   ├── JournalTampered            journal_tampered (a stored run's journal step is not what the run wrote)
    │   └── InternalError              internal_error
    ├── RegistrationError              (refuses an artifact, a manifest or a build)
    │   ├── InvalidArtifact            invalid_artifact
    │   ├── InvalidManifest            invalid_manifest
    │   ├── SignatureError             invalid_signature
    │   │   └── SignatureRefused       signature_refused (an oci:// artifact unsigned or wrongly signed)
    │   ├── RegistryError              registry_error (an OCI registry refused, misbehaved or redirected)
    │   ├── BuildError                 build_failed
    │   ├── InvalidSpec                invalid_spec (an API spec given to ``import``)
    │   └── WideningRefused            widening_refused (a re-import asking for more)
    └── InvalidPolicy                  invalid_policy (a policy document is refused)
        └── InvalidGrants              invalid_grants (a grants file or dict is refused)

A ``CallError`` is returned in the result, never raised by ``call``; the
others are raised. ``InvalidGrants`` is an ``InvalidPolicy`` (grants are the
policy of a Runtime without one), with its own code so that the two
documents can be told apart.

Third-party errors are translated into this tree in exactly one place each,
with ``raise ... from`` keeping the cause: wasmtime failures in
:mod:`glovebox.sandbox._outcome` (which also decides every call's final code),
jsonschema failures in :mod:`glovebox.schema._schemas`, pydantic failures where each
document is loaded. Misuse of the API (a closed Runtime, a wrong argument
type, an unknown approval id) raises the usual ``TypeError`` / ``ValueError``
instead.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ApprovalRequired",
    "BuildError",
    "CallError",
    "CallTimeout",
    "CapabilityDenied",
    "CircuitOpen",
    "ERROR_CODES",
    "EvaluationFailed",
    "FuelExhausted",
    "GloveboxError",
    "GuestError",
    "GuestTrap",
    "InternalError",
    "InvalidArtifact",
    "InvalidGrants",
    "InvalidInput",
    "InvalidManifest",
    "InvalidOutput",
    "InvalidPolicy",
    "InvalidSpec",
    "JournalTampered",
    "ManifestWarning",
    "MemoryLimit",
    "OutputTooLarge",
    "Overloaded",
    "PermissionDenied",
    "ProgramChanged",
    "RateLimited",
    "RegistrationError",
    "RunBusy",
    "RunDiverged",
    "RunLimit",
    "RegistryError",
    "SignatureError",
    "SignatureRefused",
    "ToolNotFound",
    "UpstreamError",
    "WideningRefused",
]


class GloveboxError(Exception):
    """Root of every glovebox error.

    Attributes:
        code: the stable error code string.
        retryable: whether the same call may succeed if simply tried again.
        details: structured, JSON-serialisable facts about the failure.
    """

    code: ClassVar[str] = "internal_error"
    retryable: bool = False
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, details: dict[str, Any] | None = None, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        if retryable is not None:
            self.retryable = retryable

    def to_dict(self) -> dict[str, Any]:
        """The ``error`` object of the result envelope."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        }


class CallError(GloveboxError):
    """A failure that ends one tool call; it is returned, never raised, by ``call``."""


class ToolNotFound(CallError):
    code = "tool_not_found"


class InvalidInput(CallError):
    code = "invalid_input"


class PermissionDenied(CallError):
    code = "permission_denied"


class ApprovalRequired(CallError):
    code = "approval_required"


class CapabilityDenied(CallError):
    code = "capability_denied"


class FuelExhausted(CallError):
    code = "fuel_exhausted"


class MemoryLimit(CallError):
    code = "memory_limit"


class CallTimeout(CallError):
    code = "timeout"


class OutputTooLarge(CallError):
    code = "output_too_large"


class GuestTrap(CallError):
    code = "guest_trap"


class GuestError(CallError):
    code = "guest_error"


class InvalidOutput(CallError):
    code = "invalid_output"


class UpstreamError(CallError):
    code = "upstream_error"
    retryable = True


class RateLimited(CallError):
    """A policy quota of the calling principal is used up; ``details.retry_after_ms`` says when to retry."""

    code = "rate_limited"
    retryable = True


class Overloaded(CallError):
    """The host is at its in-flight bound (or its instance pool is full); retry after ``details.retry_after_ms``."""

    code = "overloaded"
    retryable = True


class CircuitOpen(CallError):
    """A circuit breaker of the policy's guards is open: the tool (``details.scope`` ``tool``) or an
    upstream host (``host``) failed too often lately, so the call failed fast; retry after
    ``details.retry_after_ms``."""

    code = "circuit_open"
    retryable = True


class EvaluationFailed(CallError):
    """An output check of the policy's guards refused the tool's output (``details.check``,
    ``details.reason``); the output is not returned."""

    code = "evaluation_failed"


class RunDiverged(CallError):
    """A resumed program asked for a different host call than its run's journal holds at that step
    (``details.step``, ``details.expected``, ``details.asked``): the program is not deterministic,
    or it was changed. Not retryable: resuming again replays the same journal."""

    code = "run_diverged"


class RunLimit(CallError):
    """A run reached a bound of its journal: ``details.bound`` is ``steps`` (host calls) or ``bytes``
    (requests and results recorded), ``details.limit`` its value."""

    code = "run_limit"


class RunBusy(CallError):
    """Another process holds the run's lease: it is executing the run now (``details.run_id``,
    ``details.holder``: its host, pid and lease id, ``details.retry_after_ms``: until the lease
    expires unless renewed). A resume that meets a live lease does nothing; a holder that died stops
    renewing, and once its lease expires the run resumes. An attempt whose lease was taken over
    (it stalled past its expiry) ends with this code too, and writes nothing more."""

    code = "run_busy"
    retryable = True


class ProgramChanged(CallError):
    """A resume found the run's stored program (its source, script, input or owner) changed since
    the run started: the source's digest is not the one recorded then (``details.program_digest``),
    or the run's MAC, made with the home's run key, does not cover what is stored. Nothing ran."""

    code = "program_changed"


class JournalTampered(CallError):
    """A resume found a step of the run's journal that the run did not write (``details.step``): its
    MAC, chained to the step before and made with the home's run key, does not match. Nothing ran."""

    code = "journal_tampered"


class InternalError(CallError):
    """An opaque host-side failure: the detail goes to the log, never to the caller."""

    code = "internal_error"

    def __init__(
        self, message: str = "internal error", *, details: dict[str, Any] | None = None, retryable: bool = False
    ) -> None:
        super().__init__(message, details=details, retryable=retryable)


class RegistrationError(GloveboxError):
    """Refuses an artifact, a manifest or a build; raised by ``register`` and ``build``."""


class InvalidArtifact(RegistrationError):
    code = "invalid_artifact"


class InvalidManifest(RegistrationError):
    code = "invalid_manifest"


class SignatureError(RegistrationError):
    """A signature is missing where required, does not verify, or names an untrusted key."""

    code = "invalid_signature"


class SignatureRefused(SignatureError):
    """An artifact from an OCI registry (or an OCI layout) has no signature the policy accepts: none at
    all, one over another digest, or one by a key or identity the policy does not trust. Raised before
    the component is compiled; ``details`` names the reference and the manifest digest."""

    code = "signature_refused"


class RegistryError(RegistrationError):
    """An OCI registry could not be used as asked: unreachable, refusing (with its HTTP status), sending
    a redirect to another host, or answering a digest with other content than it names."""

    code = "registry_error"


class BuildError(RegistrationError):
    code = "build_failed"


class InvalidSpec(RegistrationError):
    """An OpenAPI document or GraphQL schema that cannot be imported; the message names the place in it."""

    code = "invalid_spec"


class WideningRefused(RegistrationError):
    """A re-import would let an existing tool reach more: a new host, method or path, or for a remote MCP
    tool a new secret (``accept_widening`` allows it)."""

    code = "widening_refused"


class InvalidPolicy(GloveboxError):
    """A policy document that cannot be used; the message names the file, line and field."""

    code = "invalid_policy"


class InvalidGrants(InvalidPolicy):
    """A grants file (or dict) that cannot be used; the message names the file and the field."""

    code = "invalid_grants"


def call_error(code: str, message: str, details: dict[str, Any], retryable: bool) -> CallError:
    """The ``CallError`` an envelope's ``error`` object describes (the inverse of ``to_dict``).

    Raises:
        ValueError: ``code`` is not a call error code.
    """
    kind = next((k for k in _call_error_classes() if k.code == code), None)
    if kind is None:
        raise ValueError(f"{code!r} is not a call error code")
    return kind(message, details=details, retryable=retryable)


def _call_error_classes() -> list[type[CallError]]:
    found: list[type[CallError]] = []
    pending = list(CallError.__subclasses__())
    while pending:
        kind = pending.pop()
        found.append(kind)
        pending.extend(kind.__subclasses__())
    return found


#: Every call error code, in the order DESIGN.md lists them.
ERROR_CODES: tuple[str, ...] = (
    "tool_not_found",
    "invalid_input",
    "permission_denied",
    "approval_required",
    "capability_denied",
    "fuel_exhausted",
    "memory_limit",
    "timeout",
    "output_too_large",
    "guest_trap",
    "guest_error",
    "invalid_output",
    "upstream_error",
    "internal_error",
    "overloaded",
    "rate_limited",
    "circuit_open",
    "evaluation_failed",
    "run_diverged",
    "run_limit",
    "run_busy",
    "program_changed",
    "journal_tampered",
)


class ManifestWarning(UserWarning):
    """A manifest that works but leaves callers guessing: no description, an input schema that
    accepts anything, a folder's ``glovebox.toml`` that names another tool. The CLI prints
    each as ``warning: message`` on stderr; filter them with :mod:`warnings` like any other."""
