"""The handlers of the call pipeline, one small class per module, in the order a call meets them.

Outside one attempt (a ``Call`` in, a ``CallResult`` out):

- :mod:`._tracing` — ``Tracing``: the call's ``glovebox.call`` span and its log line.
- :mod:`._admission` — ``Admission``: one of ``max_in_flight`` slots, or ``overloaded`` at once.
- :mod:`._compute` — ``Compute``: a compute slot while the call runs Python or wasm.
- :mod:`._attempts` — ``Attempts``: retries and fallbacks under the policy's guards.
- :mod:`._audit` — ``Audit``: one attempt's envelope and its audit row; every refusal below ends here.

Inside one attempt (each raises a ``CallError`` to refuse):

- :mod:`._resolve` — ``Resolve``: the tool version a name means.
- :mod:`._policy` — ``Policy``: scopes, rules and quotas; the decision and its limits.
- :mod:`._breakers` — ``Breakers``: fail fast while a circuit is open; report how the call went.
- :mod:`._validate` — ``ValidateInput``: the input against the tool's schema.
- :mod:`._approvals` — ``Approvals``: spend the approval a ``require_approval`` call needs.
- :mod:`._checks` — ``OutputChecks``: the policy's and the manifest's checks of a successful output.
- :mod:`._scan` — ``SecretScan``: secret-shaped values in the output, logs and error redacted or refused.
- :mod:`._output` — ``Execute``: the executor runs the tool; its output decoded and validated.

Imports: the layers below ``runtime`` and the runtime's own modules; never the Runtime facade.
"""

from ._admission import Admission
from ._approvals import Approvals
from ._attempts import Attempts
from ._audit import Audit
from ._breakers import Breakers
from ._checks import OutputChecks
from ._compute import Compute
from ._output import Execute
from ._policy import Policy
from ._resolve import Resolve
from ._scan import SecretScan
from ._tracing import Tracing
from ._validate import ValidateInput

__all__ = [
    "Admission",
    "Approvals",
    "Attempts",
    "Audit",
    "Breakers",
    "Compute",
    "Execute",
    "OutputChecks",
    "Policy",
    "Resolve",
    "SecretScan",
    "Tracing",
    "ValidateInput",
]
