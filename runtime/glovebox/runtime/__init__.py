"""The facade and the call pipeline: ``Runtime``, the policy gate, admission, envelopes.

- :mod:`._runtime` — ``Runtime``: register, list, call, and the call's steps.
- :mod:`._gate` — where a call meets the policy (scopes, rules, quotas, approvals).
- :mod:`._admission` — how many calls run at once and how many wait.
- :mod:`._retry` — the attempts of one call: retries under the policy's guards.
- :mod:`._checks` — the policy's checks on a successful output.
- :mod:`._wasmparts` — the engine side of a Runtime, made on first need.
- :mod:`._envelope` — the one place a failure becomes a ``CallResult``.
- :mod:`._backend` — ``CallBackend``, the protocol every call surface implements,
  and ``open_backend``, the one factory of backends.

Imports: every layer below; never scale, importers, servers, integrations or the CLI.
"""
