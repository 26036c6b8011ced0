"""Host capabilities: one package each, registered the way a third party registers one.

- :mod:`glovebox.model._capability` — the :class:`Capability` base class and the
  registry (built-ins in ``DEFAULT_CAPABILITIES``, others from the entry-point group
  ``glovebox.capabilities``); it lives in the model layer because manifests,
  grants, policies, the linker and the build all loop over it.
- :mod:`.http` — ``http-fetch``; :mod:`.sql` — ``query`` on a database alias;
  :mod:`.kv` — a namespaced key-value store in the home; :mod:`.files` — one directory
  under the home, preopened for a WASI 0.2 component (no host functions); :mod:`.client`
  — ``sample`` and ``elicit``: requests to the MCP client of the call.
- :mod:`._bind` — :func:`bind_capabilities`: a call's capabilities (declared ∩ granted).
- :mod:`glovebox.model._rules` — the one matcher for hosts, paths, methods, schemes and
  ports, used both to validate grant models and to enforce them.
- :mod:`._fetch` — the enforcing HTTP client behind ``http-fetch``; :mod:`._wire` — its
  HTTP/1.1 exchange (h11 on a socket to the pinned address); :mod:`._deadline` — one
  deadline per request at every socket operation.
- :mod:`._secrets` — secret providers and the scrubbing of secret values.
- :mod:`._sql` — the ``sql`` capability of one call; :mod:`._sqlstatement` — what the
  classifiers make of a statement; :mod:`._sqlcheck` (SQLite, sqlglot) and :mod:`._pgcheck`
  (PostgreSQL, pglast) — the host's classifiers; :mod:`._sqlite` and :mod:`._postgres`
  (psycopg) — the engines, which enforce the grant again.

This package imports nothing heavy: ``_fetch`` (httpx) is imported only when a
call is granted HTTP, and the SQL parsers and drivers only when a statement is checked or run.
"""

from ..model._capability import Capability, HostFunction, registered
from ._bind import BoundCapabilities, CapabilityContext, bind_capabilities

__all__ = [
    "BoundCapabilities",
    "Capability",
    "CapabilityContext",
    "HostFunction",
    "bind_capabilities",
    "registered",
]
