"""``SecretScan``: no secret-shaped value leaves in an output, a log line or an error message.

Runs on every call, just above the executor (so the output checks and the
evaluators see what the caller would). The action comes from the tool's
checks (``secret_scan`` of the policy's guards and of its manifest, the
tighter of the two; ``redact`` when neither says):

- ``redact``: each finding is replaced by ``[REDACTED:kind]`` in the output,
  the logs and a failed call's error message;
- ``refuse``: a finding in the output ends the call as ``evaluation_failed``
  (``details.check`` = ``secret_scan``); logs and error messages are redacted;
- ``warn``: nothing is changed;
- ``off``: nothing is scanned.

What was found goes into ``meta["secret_scan"]`` (and the audit row):
``{"action", "findings": [{"kind", "path"}]}`` — never the value.
"""

from __future__ import annotations

from typing import Any

from ...capabilities._scan import Finding, SecretScanner
from ...core._canonical import canonical_json
from ...core._errors import CallError, EvaluationFailed
from ...model._checks import SCAN_ORDER, Checks, SecretScanAction
from ...model._result import CallResult
from .._call import Call, Handler

__all__ = ["SecretScan"]

#: The action when neither the policy nor the manifest names one.
DEFAULT_ACTION: SecretScanAction = "redact"
#: Findings kept in meta and the audit row (the count is always exact).
MAX_FINDINGS = 32
#: Pairs of checks whose settings are kept before the cache starts over.
_MAX_SETTLED = 1024


class SecretScan(Handler):
    """Scans what the rest of the chain answered and acts as the tool's checks say."""

    __slots__ = ("_scanners", "_settled")

    def __init__(self) -> None:
        super().__init__()
        self._scanners: dict[float | None, SecretScanner] = {}
        #: The settings of each (policy checks, manifest checks) pair, by identity (both held, so never reused).
        self._settled: dict[tuple[int, int], tuple[Checks | None, Checks | None, SecretScanAction, SecretScanner]] = {}

    def handle(self, call: Call) -> CallResult:
        state = call.state
        try:
            result = self.next(call)
        except CallError as failed:
            if state is not None and state.decision is not None and state.info is not None:
                action, scanner = self._settings(state.decision.guards.checks, state.info.manifest.checks)
                if action != "off":
                    findings = self._logs(state.meta, scanner, action)
                    message, kinds = scanner.redact_text(failed.message)
                    findings.extend({"kind": kind, "path": "/error/message"} for kind in kinds)
                    if kinds and action != "warn":
                        failed.message = message
                    _record(state.meta, action, findings)
            raise
        assert state is not None and state.info is not None and state.decision is not None
        action, scanner = self._settings(state.decision.guards.checks, state.info.manifest.checks)
        if action == "off":
            return result
        findings = self._logs(state.meta, scanner, action)
        found: list[Finding] = []
        text = state.output_text
        if text is None or scanner.may_hold(text):
            output, found = scanner.redact(result.output, "/output")
            findings.extend(found)
        _record(state.meta, action, findings)
        if found and action == "refuse":
            kinds = sorted({finding["kind"] for finding in found})
            reason = f"the output holds a secret-shaped value ({', '.join(kinds)})"
            state.meta["evaluation"] = {"verdict": "fail", "check": "secret_scan"}
            raise EvaluationFailed(
                f"an output check refused the result (secret_scan): {reason}",
                details={"check": "secret_scan", "reason": reason, "findings": found[:MAX_FINDINGS]},
            )
        if found and action == "redact":
            state.output_text = canonical_json(output)
            return CallResult(ok=True, output=output, meta=result.meta)
        return result

    def _settings(self, policy: Checks | None, manifest: Checks | None) -> tuple[SecretScanAction, SecretScanner]:
        """The action and the scanner for these checks (frozen models: worked out once per pair)."""
        key = (id(policy), id(manifest))
        kept = self._settled.get(key)
        if kept is not None and kept[0] is policy and kept[1] is manifest:
            return kept[2], kept[3]
        action, scanner = self._work_out(policy, manifest)
        if len(self._settled) >= _MAX_SETTLED:
            self._settled = {}
        self._settled[key] = (policy, manifest, action, scanner)
        return action, scanner

    def _work_out(self, policy: Checks | None, manifest: Checks | None) -> tuple[SecretScanAction, SecretScanner]:
        said = [c.secret_scan for c in (policy, manifest) if c is not None and c.secret_scan is not None]
        action = max(said, key=SCAN_ORDER.index) if said else DEFAULT_ACTION
        bits = [c.secret_entropy_bits for c in (policy, manifest) if c is not None and c.secret_entropy_bits]
        threshold = min(bits) if bits else None
        scanner = self._scanners.get(threshold)
        if scanner is None:
            scanner = self._scanners[threshold] = SecretScanner(threshold)
        return action, scanner

    @staticmethod
    def _logs(meta: dict[str, Any], scanner: SecretScanner, action: SecretScanAction) -> list[Finding]:
        findings: list[Finding] = []
        logs = meta.get("logs")
        if not isinstance(logs, list):
            return findings
        for index, line in enumerate(logs):
            message, kinds = scanner.redact_text(str(line.get("message", "")))
            if kinds:
                findings.extend({"kind": kind, "path": f"/logs/{index}"} for kind in kinds)
                if action != "warn":
                    logs[index] = {**line, "message": message}
        return findings


def _record(meta: dict[str, Any], action: SecretScanAction, findings: list[Finding]) -> None:
    if findings:
        meta["secret_scan"] = {"action": action, "count": len(findings), "findings": findings[:MAX_FINDINGS]}
