"""The scope checker: pure functions from (policy, principal, tool) to a decision.

Deny by default. The principal's scopes must cover the tool's
``required_scopes``; then every tool rule matching the tool and the principal
is collected and the most restrictive wins (block > require_approval >
allow); with none, the policy's default action applies. Grants and limit
overrides of every matching entry are combined: grants add up, limits only
tighten. Every matching quota entry is listed; each applies on its own.
The tool's guards (``glovebox.policy._guards``) ride along in the decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..model._capability import registered
from ..model._grants import Grants
from ..model._manifest import Limits
from ..model._result import ToolInfo
from ._guards import NO_GUARDS, Guards, plan_guards
from ._models import SEVERITY, Action, Policy, Quota, _Targeted
from ._patterns import match_name, match_tool

__all__ = ["Decision", "dead_entries", "decide"]


@dataclass(frozen=True)
class Decision:
    """What the policy says about one principal calling one tool, and why."""

    action: Action
    reason: tuple[str, ...]
    grants: Grants
    limits: Limits
    missing_scopes: tuple[str, ...] = ()
    #: The matching ``quotas`` entries, with their index in the policy.
    quotas: tuple[tuple[int, Quota], ...] = ()
    #: The tool's guards (idempotence, retries), the same for every principal.
    guards: Guards = NO_GUARDS
    #: How far progress may extend ``limits.timeout_ms`` (an MCP server's tool); None: no extension.
    max_timeout_ms: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "action": self.action,
            "reason": list(self.reason),
            "missing_scopes": list(self.missing_scopes),
            "grants": self.grants.model_dump(mode="json"),
            "limits": self.limits.model_dump(),
            "quotas": [quota_dict(index, quota) for index, quota in self.quotas],
            "guards": self.guards.to_dict(),
            **({"max_timeout_ms": self.max_timeout_ms} if self.max_timeout_ms is not None else {}),
        }


def quota_dict(index: int, quota: Quota) -> dict[str, object]:
    """One matching quota as ``policy explain --json`` shows it: where it is and its bounds."""
    return {"entry": f"quotas[{index}]", **quota.model_dump(exclude_none=True)}


def applies(entry: _Targeted, principal: str, info: ToolInfo) -> bool:
    """Whether a rule, grant or limit entry covers this principal and tool."""
    if not match_tool(entry.tool, info.name, info.version):
        return False
    return any(match_name(pattern, principal) for pattern in entry.principals)


def decide(policy: Policy, principal: str, info: ToolInfo) -> Decision:
    """The decision for ``principal`` calling ``info`` under ``policy``."""
    grants = _grants(policy, principal, info)
    limits = _limits(policy, principal, info)
    ceiling = _ceiling(policy, principal, info)
    quotas = tuple((i, quota) for i, quota in enumerate(policy.quotas) if applies(quota, principal, info))
    guards = plan_guards(policy.guards, info)
    held = policy.scopes_of(principal)
    missing = tuple(sorted(set(info.manifest.required_scopes) - held))
    if missing:
        why = f"principal {principal!r} lacks the scopes {list(missing)} that {info.name} requires"
        return Decision("block", (why,), grants, limits, missing, quotas, guards, ceiling)
    action, reason = _action(policy, principal, info)
    return Decision(action, tuple(reason), grants, limits, quotas=quotas, guards=guards, max_timeout_ms=ceiling)


def _action(policy: Policy, principal: str, info: ToolInfo) -> tuple[Action, list[str]]:
    reason: list[str] = []
    if info.manifest.required_scopes:
        reason.append(f"principal {principal!r} holds the required scopes {sorted(info.manifest.required_scopes)}")
    matched = [(i, rule) for i, rule in enumerate(policy.rules) if applies(rule, principal, info)]
    if not matched:
        reason.append(f"no rule matches; the default action is {policy.defaults.action}")
        return policy.defaults.action, reason
    for index, rule in matched:
        note = f": {rule.reason}" if rule.reason else ""
        reason.append(f"rules[{index}] (tool {rule.tool!r}, principals {rule.principals}) says {rule.action}{note}")
    winner = max((rule.action for _, rule in matched), key=SEVERITY.__getitem__)
    if len(matched) > 1:
        reason.append(f"the most restrictive matching rule wins: {winner}")
    return winner, reason


def _grants(policy: Policy, principal: str, info: ToolInfo) -> Grants:
    matching = [g for g in policy.grants if applies(g, principal, info)]
    if not matching:
        return Grants()
    return Grants(**{key: value for capability in registered() for key, value in capability.combine(matching).items()})


def _limits(policy: Policy, principal: str, info: ToolInfo) -> Limits:
    limits = info.manifest.limits
    for entry in policy.limits:
        if applies(entry, principal, info):
            override = entry.limits.model_dump(exclude_none=True, exclude={"max_timeout_ms"})
            limits = limits.tighter(limits.model_copy(update=override))
    return limits


def _ceiling(policy: Policy, principal: str, info: ToolInfo) -> int | None:
    """The smallest ``max_timeout_ms`` of the matching limit entries (None when none sets one)."""
    found = [
        entry.limits.max_timeout_ms
        for entry in policy.limits
        if entry.limits.max_timeout_ms is not None and applies(entry, principal, info)
    ]
    return min(found, default=None)


def dead_entries(policy: Policy, tools: Iterable[ToolInfo]) -> list[str]:
    """Entries that can never apply: their tool pattern matches no registered tool,
    or none of their principal patterns matches a declared principal or ``anonymous``."""
    infos = list(tools)
    known = [*policy.principals, "anonymous"]
    problems: list[str] = []
    for section in ("rules", "grants", "limits", "quotas"):
        entries: list[_Targeted] = list(getattr(policy, section))
        for index, entry in enumerate(entries):
            where = f"{section}[{index}]"
            if not any(match_tool(entry.tool, i.name, i.version) for i in infos):
                problems.append(f"{where}: tool pattern {entry.tool!r} matches no registered tool")
            if not any(match_name(p, name) for p in entry.principals for name in known):
                problems.append(f"{where}: principals {entry.principals} match no principal in the policy")
    for index, guard in enumerate(policy.guards):
        if not any(match_tool(guard.tool, i.name, i.version) for i in infos):
            problems.append(f"guards[{index}]: tool pattern {guard.tool!r} matches no registered tool")
        named = [("fallback", n) for n in guard.fallback or ()]
        named += [("checks.evaluators", n) for n in (guard.checks.evaluators if guard.checks else ())]
        for field, name in named:  # a missing fallback or evaluator: the route is dead, the check fails closed
            if not any(match_tool(name, i.name, i.version) for i in infos):
                problems.append(f"guards[{index}].{field}: {name!r} is not a registered tool")
    return problems
