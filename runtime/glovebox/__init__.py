"""glovebox: run AI-agent tools as WebAssembly components, one fresh sandbox per call.

The whole public API is listed in ``__all__``; everything else is private.
"""

from ._build import build
from ._errors import (
    ERROR_CODES,
    ApprovalRequired,
    BuildError,
    CallError,
    CallTimeout,
    CapabilityDenied,
    FuelExhausted,
    GloveboxError,
    GuestError,
    GuestTrap,
    InternalError,
    InvalidArtifact,
    InvalidInput,
    InvalidManifest,
    InvalidOutput,
    MemoryLimit,
    OutputTooLarge,
    PermissionDenied,
    RegistrationError,
    SignatureError,
    ToolNotFound,
    UpstreamError,
)
from ._grants import Grants, HttpLimits, HttpRule, SecretRule
from ._manifest import Capabilities, Limits, Manifest
from ._result import CallResult, ToolInfo
from ._runtime import Runtime

__version__ = "0.1.0"

__all__ = [
    "ApprovalRequired",
    "BuildError",
    "CallError",
    "CallResult",
    "CallTimeout",
    "Capabilities",
    "CapabilityDenied",
    "ERROR_CODES",
    "FuelExhausted",
    "GloveboxError",
    "Grants",
    "GuestError",
    "GuestTrap",
    "HttpLimits",
    "HttpRule",
    "InternalError",
    "InvalidArtifact",
    "InvalidInput",
    "InvalidManifest",
    "InvalidOutput",
    "Limits",
    "Manifest",
    "MemoryLimit",
    "OutputTooLarge",
    "PermissionDenied",
    "RegistrationError",
    "Runtime",
    "SecretRule",
    "SignatureError",
    "ToolInfo",
    "ToolNotFound",
    "UpstreamError",
    "build",
    "__version__",
]
