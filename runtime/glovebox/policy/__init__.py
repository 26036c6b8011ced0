"""Policies: documents, the one matcher, the scope checker and approvals."""

from ._approvals import Approval, ApprovalStore
from ._checker import Decision, dead_entries, decide
from ._loader import load_policy, parse_policy, policy_schema
from ._models import NO_POLICY, Policy
from ._patterns import match_name, match_tool

__all__ = [
    "Approval",
    "ApprovalStore",
    "Decision",
    "NO_POLICY",
    "Policy",
    "dead_entries",
    "decide",
    "load_policy",
    "match_name",
    "match_tool",
    "parse_policy",
    "policy_schema",
]
