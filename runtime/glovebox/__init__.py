"""glovebox: run AI-agent tools as WebAssembly components, one fresh sandbox per call.

The whole public API is listed in ``__all__``; everything else is private.
"""

from .audit._log import AuditLog, AuditVerification
from .core._errors import (
    ERROR_CODES,
    ApprovalRequired,
    BuildError,
    CallError,
    CallTimeout,
    CapabilityDenied,
    CircuitOpen,
    EvaluationFailed,
    FuelExhausted,
    GloveboxError,
    GuestError,
    GuestTrap,
    InternalError,
    InvalidArtifact,
    InvalidGrants,
    InvalidInput,
    InvalidManifest,
    InvalidOutput,
    InvalidPolicy,
    InvalidSpec,
    JournalTampered,
    ManifestWarning,
    MemoryLimit,
    OutputTooLarge,
    Overloaded,
    PermissionDenied,
    ProgramChanged,
    RateLimited,
    RegistrationError,
    RegistryError,
    RunBusy,
    RunDiverged,
    RunLimit,
    SignatureError,
    SignatureRefused,
    ToolNotFound,
    UpstreamError,
    WideningRefused,
)
from .core._version import __version__
from .engine._settings import EngineSettings
from .importers import ImportResult, import_graphql, import_openapi, import_sql
from .integrations._export import export_tools, tool_input, tool_name_map
from .model._grants import Grants, HttpLimits, HttpRule, SecretRule, SqlActions, SqlGrant, SqlRule
from .model._manifest import Capabilities, Limits, Manifest
from .model._result import CallResult, ToolInfo
from .policy import Approval, Decision, Policy, load_policy
from .registry._keyring import Keyring, generate_keypair, sign
from .runs._drift import DriftReport
from .runs._result import RunResult
from .runs._rollback import RollbackResult
from .runtime._backend import CallBackend
from .runtime._runbundle import RunBundleCheck, export_run, verify_run_bundle
from .runtime._runreplay import replay_run
from .runtime._runrollback import rollback_run
from .runtime._runsave import save_run
from .runtime._runtime import Runtime
from .scale._factory import open_backend
from .scale._procpool import ProcessPool
from .toolchains._base import BuildContext, Toolchain
from .toolchains._build import build

__all__ = [
    "Approval",
    "ApprovalRequired",
    "AuditLog",
    "AuditVerification",
    "BuildContext",
    "BuildError",
    "CallBackend",
    "CallError",
    "CallResult",
    "CallTimeout",
    "Capabilities",
    "CapabilityDenied",
    "CircuitOpen",
    "Decision",
    "DriftReport",
    "ERROR_CODES",
    "EngineSettings",
    "EvaluationFailed",
    "FuelExhausted",
    "GloveboxError",
    "Grants",
    "GuestError",
    "GuestTrap",
    "HttpLimits",
    "HttpRule",
    "ImportResult",
    "InternalError",
    "InvalidArtifact",
    "InvalidGrants",
    "InvalidInput",
    "InvalidManifest",
    "InvalidOutput",
    "InvalidPolicy",
    "InvalidSpec",
    "JournalTampered",
    "Keyring",
    "Limits",
    "Manifest",
    "ManifestWarning",
    "MemoryLimit",
    "OutputTooLarge",
    "Overloaded",
    "PermissionDenied",
    "Policy",
    "ProcessPool",
    "ProgramChanged",
    "RateLimited",
    "RegistrationError",
    "RegistryError",
    "RollbackResult",
    "RunBundleCheck",
    "RunBusy",
    "RunDiverged",
    "RunLimit",
    "RunResult",
    "Runtime",
    "SecretRule",
    "SignatureError",
    "SignatureRefused",
    "SqlActions",
    "SqlGrant",
    "SqlRule",
    "ToolInfo",
    "ToolNotFound",
    "Toolchain",
    "UpstreamError",
    "WideningRefused",
    "build",
    "export_run",
    "export_tools",
    "generate_keypair",
    "import_graphql",
    "import_openapi",
    "import_sql",
    "load_policy",
    "open_backend",
    "replay_run",
    "rollback_run",
    "save_run",
    "sign",
    "tool_input",
    "tool_name_map",
    "verify_run_bundle",
    "__version__",
]
