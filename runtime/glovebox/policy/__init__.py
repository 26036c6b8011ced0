"""Policies: documents, the one matcher, the scope checker, guards (``_guards``), approvals and quota counters."""

from ._approvals import Approval, ApprovalStore, iso_time
from ._checker import Decision, dead_entries, decide
from ._loader import load_policy, parse_policy, policy_schema
from ._models import NO_POLICY, Policy
from ._patterns import match_name, match_tool
from ._quotas import QuotaUsage

__all__ = [
    "Approval",
    "ApprovalStore",
    "Decision",
    "NO_POLICY",
    "Policy",
    "QuotaUsage",
    "dead_entries",
    "decide",
    "iso_time",
    "load_policy",
    "match_name",
    "match_tool",
    "parse_policy",
    "policy_schema",
]
