"""The result envelope and the description of a registered tool."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core._errors import CallError, call_error
from ._manifest import Manifest

__all__ = ["CallResult", "ToolInfo", "succeeded"]


@dataclass(frozen=True)
class CallResult:
    """The outcome of one tool call.

    ``to_dict()`` gives the envelope every surface carries:
    ``{"ok": true, "output": ..., "meta": {...}}`` or
    ``{"ok": false, "error": {"code", "message", "retryable", "details"}, "meta": {...}}``.
    """

    ok: bool
    output: Any = None
    error: CallError | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def code(self) -> str | None:
        """The error code, or None for a successful call."""
        return self.error.code if self.error is not None else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-serialisable envelope."""
        if self.ok:
            return {"ok": True, "output": self.output, "meta": dict(self.meta)}
        assert self.error is not None
        return {"ok": False, "error": self.error.to_dict(), "meta": dict(self.meta)}

    @classmethod
    def from_dict(cls, envelope: dict[str, Any]) -> CallResult:
        """The result an envelope describes: ``CallResult.from_dict(r.to_dict()) == r``.

        The error becomes the ``CallError`` subclass of its code.

        Raises:
            ValueError: ``envelope`` is not an envelope, or names an unknown error code.
        """
        try:
            meta = dict(envelope["meta"])
            if envelope["ok"] is True:
                return cls(ok=True, output=envelope["output"], meta=meta)
            error = envelope["error"]
            made = call_error(error["code"], error["message"], error["details"], error["retryable"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a result envelope: missing or malformed {exc}") from exc
        return cls(ok=False, error=made, meta=meta)

    def raise_for_error(self) -> Any:
        """Return the output, or raise the call's error."""
        if self.error is not None:
            raise self.error
        return self.output


def succeeded(output: Any, meta: dict[str, Any]) -> CallResult:
    """``CallResult(ok=True, output=output, meta=meta)``, made without the frozen ``__init__``'s four
    ``object.__setattr__`` calls (every successful call makes one)."""
    result = _new_result(CallResult)
    result.__dict__.update(ok=True, output=output, error=None, meta=meta)
    return result


_new_result = object.__new__


@dataclass(frozen=True)
class ToolInfo:
    """A registered tool: its manifest, its artifact digest and when it arrived."""

    manifest: Manifest
    digest: str
    registered_at: str
    size_bytes: int
    signer: str | None = None
    deprecated: str | None = None

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def version(self) -> str:
        return self.manifest.version

    @property
    def description(self) -> str:
        return self.manifest.description

    @property
    def kind(self) -> str:
        return self.manifest.kind

    @property
    def input_schema(self) -> dict[str, Any] | bool:
        return self.manifest.input_schema

    @property
    def output_schema(self) -> dict[str, Any] | bool:
        return self.manifest.output_schema

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description (as ``glovebox tools --json`` prints it)."""
        return {
            **self.manifest.model_dump(mode="json"),
            "digest": self.digest,
            "registered_at": self.registered_at,
            "size_bytes": self.size_bytes,
            "signer": self.signer,
            "deprecated": self.deprecated,
        }
