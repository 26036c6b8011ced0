"""Where the runtime meets the policy: the policy in force (reloaded when its
file changes), admission of each call (scopes, rules, quotas), approvals, and
the call's audit record.

Reload: at most every ``RECHECK_S`` a call compares the file's
(mtime_ns, size, inode) with the loaded one and re-reads it when they differ.
The swap is atomic (a call uses the policy it started with); a broken file
keeps the previous policy in force and sets ``error``.

Decisions are pure functions of (policy, principal, tool): :class:`Decisions`
keeps them per policy object and registry entry, so a reload or a new
registration is a miss, never a stale answer. Nothing that changes from call
to call (approvals, quotas) is cached.
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..audit._row import call_row
from ..core._canonical import canonical_json, sha256_digest
from ..core._errors import ApprovalRequired, InvalidInput, InvalidPolicy, PermissionDenied
from ..model._result import CallResult, ToolInfo
from ..policy import NO_POLICY, Approval, ApprovalStore, Decision, Policy, QuotaUsage, decide, iso_time, load_policy

if TYPE_CHECKING:
    from ..policy._guards import Breaker, Guards
    from ..policy._quotas import QuotaTicket

__all__ = ["CallTrace", "Decisions", "PolicyGate", "input_digest"]

logger = logging.getLogger("glovebox")
RECHECK_S = 0.1
#: Decisions kept before the cache starts over (principals are not a bounded set).
MAX_DECISIONS = 4096


def input_digest(value: Any) -> str | None:
    """``sha256:`` of the canonical JSON of an input (None when it is not JSON)."""
    try:
        text = canonical_json(value, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return sha256_digest(text)


@dataclass
class CallTrace:
    """What the audit record needs to know about a call besides its result."""

    policy: Policy = NO_POLICY
    input_digest: str | None = None
    decision: str | None = None
    approval_id: str | None = None
    #: Who approved (or denied) the call's approval request.
    approved_by: str | None = None
    #: The reason an approver gave when it denied the call's request.
    denied_for: str | None = None
    #: The quota slots the call holds from admission until :meth:`PolicyGate.settle`.
    quota: QuotaTicket | None = None
    #: The parameters of each SQL statement the call sent (stored only with ``audit.store_inputs``).
    sql_params: list[list[Any]] | None = None
    #: The tool's name and circuit breaker, when the policy's guards give it one.
    breaker: tuple[str, Breaker] | None = None
    #: Hosts whose half-open probe this call took before it ran.
    probing: set[str] | None = None
    #: The guards the policy gives the tool (set when the call is admitted, or refused by a quota).
    guards: Guards | None = None

    def record(self, result: CallResult, value: Any) -> dict[str, Any]:
        """The call's audit row (its content is :func:`glovebox.audit._row.call_row`'s to decide)."""
        stored = self.policy.audit
        return call_row(
            result,
            value,
            input_digest=self.input_digest,
            decision=self.decision,
            approval=self._approval(),
            store_inputs=stored.store_inputs,
            store_outputs=stored.store_outputs,
            sql_params=self.sql_params,
        )

    def _approval(self) -> dict[str, Any] | None:
        if not self.approval_id:
            return None
        approval = {"id": self.approval_id, "by": self.approved_by}
        return approval if self.denied_for is None else {**approval, "reason": self.denied_for}


class Decisions:
    """The static decision per (policy, principal, tool entry), bounded by ``MAX_DECISIONS``.

    Entries are keyed by the identity of the policy and of the registry's
    ``ToolInfo`` and hold both, so an identity is never reused while cached.
    """

    def __init__(self) -> None:
        self._kept: dict[tuple[str, int, int], tuple[Policy, ToolInfo, Decision]] = {}

    def get(self, policy: Policy, principal: str, info: ToolInfo) -> Decision:
        if type(principal) is not str:
            return decide(policy, principal, info)
        key = (principal, id(policy), id(info))
        kept = self._kept.get(key)
        if kept is not None and kept[0] is policy and kept[1] is info:
            return kept[2]
        decision = decide(policy, principal, info)
        if len(self._kept) >= MAX_DECISIONS:
            self._kept = {}
        self._kept[key] = (policy, info, decision)
        return decision


class PolicyGate:
    """Holds the policy in force and admits, or refuses, each call."""

    def __init__(
        self, home: Path, source: str | os.PathLike[str] | Policy | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path: Path | None = None
        self.error: str | None = None
        self._policy = NO_POLICY
        self._stamp: tuple[int, int, int] | None = None
        #: Seconds on a monotonic clock: when the file was last checked for changes.
        self.clock = clock
        self._checked = clock()
        self._lock = threading.Lock()
        self._decisions = Decisions()
        self.quotas = QuotaUsage(clock)
        if isinstance(source, Policy):
            self._policy = source
        elif source is not None:
            self.path = Path(source)
            self._stamp = _stamp(self.path)
            self._policy = load_policy(self.path)
        home.mkdir(parents=True, exist_ok=True)  # only once the policy is known to be good
        self.approvals = ApprovalStore(home)

    def close(self) -> None:
        self.approvals.close()

    def current(self) -> Policy:
        """The policy in force, re-read first if the file changed (checked every RECHECK_S)."""
        if self.path is not None and self.clock() - self._checked >= RECHECK_S:
            self._checked = self.clock()
            if _stamp(self.path) != self._stamp:
                self.reload()
        return self._policy

    def reload(self) -> bool:
        """Re-read the file; swap atomically on success, keep the old policy on failure."""
        if self.path is None:
            return False
        with self._lock:
            stamp = _stamp(self.path)
            try:
                policy = load_policy(self.path)
            except InvalidPolicy as exc:
                if self.error != exc.message:
                    logger.error("policy reload failed, the previous policy stays in force: %s", exc.message)
                self.error, self._stamp = exc.message, stamp
                return False
            self._policy, self._stamp, self.error = policy, stamp, None
            logger.info("policy reloaded from %s", self.path)
            return True

    def decide(self, info: ToolInfo, principal: str) -> Decision:
        return self._decisions.get(self.current(), principal, info)

    def admit(self, trace: CallTrace, info: ToolInfo, principal: str) -> Decision:
        """The decision for this call; raise when the policy refuses it or a quota is used up.

        An admitted call holds its quota slots until :meth:`settle`.

        An approval is not looked at here: :meth:`spend_approval` does that
        once the input has been validated, so invalid input never uses one up.
        """
        decision = self._decisions.get(trace.policy, principal, info)
        trace.decision, trace.guards = decision.action, decision.guards
        if decision.missing_scopes:
            missing = list(decision.missing_scopes)
            raise PermissionDenied(decision.reason[0], details={"missing_scopes": missing})
        if decision.action == "block":
            raise PermissionDenied(
                f"the policy blocks {principal!r} from calling {info.name}", details={"reason": list(decision.reason)}
            )
        trace.quota = self.quotas.admit(trace.policy, decision.quotas, principal, decision.limits.timeout_ms)
        return decision

    def settle(self, trace: CallTrace, fuel_used: int) -> None:
        """End an admitted call: free its quota slots and charge its fuel (idempotent)."""
        ticket, trace.quota = trace.quota, None
        self.quotas.release(ticket, fuel_used)

    def spend_approval(self, trace: CallTrace, info: ToolInfo, principal: str, decision: Decision) -> None:
        """Use up the approval a ``require_approval`` call needs, or raise ApprovalRequired.

        Call it after the input has been validated.
        """
        if decision.action == "require_approval":
            self._approved(trace, info, principal)

    def _approved(self, trace: CallTrace, info: ToolInfo, principal: str) -> None:
        if trace.input_digest is None:
            raise InvalidInput("input is not a JSON value")
        tool = f"{info.name}@{info.version}"
        used = self.approvals.consume(principal, tool, trace.input_digest)
        if used is not None:
            trace.decision, trace.approval_id, trace.approved_by = "approved", used.id, used.approved_by
            return
        denied = self.approvals.denied(principal, tool, trace.input_digest)
        if denied is not None:
            trace.decision, trace.approval_id, trace.approved_by = "denied", denied.id, denied.approved_by
            trace.denied_for = denied.reason
            raise PermissionDenied(
                f"{denied.approved_by!r} denied calling {tool} with this input: {denied.reason}",
                details={"approval_id": denied.id, "denied_by": denied.approved_by, "reason": denied.reason},
            )
        request = self.approvals.request(principal, tool, trace.input_digest, trace.policy.approvals.ttl_s)
        trace.approval_id = request.id
        raise ApprovalRequired(
            f"calling {tool} needs approval (request {request.id}, until {iso_time(request.expires_at)}): "
            f"a principal with the {trace.policy.approvals.approver_scope!r} scope runs "
            f"`{self.approve_command(request.id)}` (or `{self.deny_command(request.id)}`)",
            details={
                "approval_id": request.id,
                "expires_at": request.expires_at,
                "expires_at_iso": iso_time(request.expires_at),
            },
        )

    def statement_approver(
        self, trace: CallTrace, info: ToolInfo, principal: str
    ) -> Callable[[str, dict[str, Any]], tuple[str, str, float, str]]:
        """For the SQL capability: spend the approval of one statement digest, or file its request.

        The approval is bound to this principal, this tool@version and the
        statement's digest (alias, text, parameters), and is used once.
        """
        tool = f"{info.name}@{info.version}"
        ttl_s = trace.policy.approvals.ttl_s

        store_inputs = trace.policy.audit.store_inputs

        def approver(digest: str, shown: dict[str, Any]) -> tuple[str, str, float, str]:
            used = self.approvals.consume(principal, tool, digest)
            if used is not None:
                trace.approval_id = trace.approval_id or used.id
                trace.approved_by = trace.approved_by or used.approved_by
                return "approved", used.id, used.expires_at, ""
            denied = self.approvals.denied(principal, tool, digest)
            if denied is not None:
                return "denied", denied.id, denied.expires_at, denied.reason or ""
            request = self.approvals.request(principal, tool, digest, ttl_s, _shown(shown, store_inputs))
            return "pending", request.id, request.expires_at, ""

        return approver

    def approve_command(self, approval_id: str) -> str:
        """The command an operator runs to approve ``approval_id`` under this policy."""
        return f"glovebox {self._policy_option()} approve {approval_id} --principal APPROVER"

    def deny_command(self, approval_id: str) -> str:
        """The command an operator runs to deny ``approval_id`` under this policy."""
        return f"glovebox {self._policy_option()} approvals deny {approval_id} --reason TEXT --principal APPROVER"

    def _policy_option(self) -> str:
        return f"--policy {shlex.quote(str(self.path))}" if self.path is not None else "--policy POLICY"

    def _check_approver(self, principal: str) -> None:
        policy = self.current()
        if policy is NO_POLICY and self.path is None:
            raise PermissionDenied(
                "no policy is loaded, so no principal holds the approver scope: "
                "give the policy that asked for the approval (glovebox --policy FILE, or GLOVEBOX_POLICY)",
                details={"missing_scopes": [policy.approvals.approver_scope]},
            )
        scope = policy.approvals.approver_scope
        if scope not in policy.scopes_of(principal):
            raise PermissionDenied(
                f"principal {principal!r} lacks the approver scope {scope!r}", details={"missing_scopes": [scope]}
            )

    def approve(self, approval_id: str, principal: str) -> Approval:
        """Approve ``approval_id`` as ``principal``; raise PermissionDenied without the approver scope."""
        self._check_approver(principal)
        return self.approvals.approve(approval_id, principal)

    def deny(self, approval_id: str, principal: str, reason: str) -> Approval:
        """Deny ``approval_id`` as ``principal`` with ``reason``; raise PermissionDenied without the approver scope."""
        self._check_approver(principal)
        return self.approvals.deny(approval_id, principal, reason)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _shown(statement: dict[str, Any], store_inputs: bool) -> dict[str, Any]:
    """What an approver is shown of a statement: as the audit keeps it (the text and the
    parameters, redacted, only when the policy stores inputs; else the fingerprint alone)."""
    from ..audit._log import redact
    from ..audit._row import plain_params

    shown: dict[str, Any] = {key: statement[key] for key in ("database", "kind", "fingerprint") if key in statement}
    if store_inputs:
        shown["statement"] = redact(statement.get("statement", ""))
        shown["params"] = redact(plain_params(list(statement.get("params", []))))
    return shown
