"""The facade and the call pipeline: ``Runtime``, the call and its handlers, the executors.

- :mod:`._runtime` — ``Runtime``: composition (the handler chain, the executors) and its admin API.
- :mod:`._call` — ``Call``, the one request that flows down the chain; ``Handler`` and ``compose``.
- :mod:`.handlers` — one small class per step of a call, in the order a call meets them.
- :mod:`.executors` — what runs a tool (a wasm sandbox, a remote MCP server, a saved program, a fake for
  tests) and where calls run when not here (``Workers``: processes, Ray replicas).
- :mod:`._record` — the one place an audit row is written (a call, a refused one, a lost one).
- :mod:`._gate` — where a call meets the policy (scopes, rules, quotas, approvals).
- :mod:`._admission` — how many calls run at once and how many wait.
- :mod:`._callthreads` — the threads `acall` runs admitted calls on, started off the event loop.
- :mod:`._retry` — the attempts of one call: retries under the policy's guards.
- :mod:`._checks` — the policy's checks on a successful output.
- :mod:`._wasmparts` — the engine side of a Runtime, made on first need.
- :mod:`._envelope` — the one place a failure becomes a ``CallResult``.
- :mod:`._coderun`, :mod:`._runenv` — code mode's runs, and the Runtime as they see it.
- :mod:`._runbundle`, :mod:`._runrollback`, :mod:`._runreplay`, :mod:`._runsave` — what a run
  becomes afterwards: a signed evidence bundle, a rollback, a drift check, a saved program (a tool
  of kind ``program``, run by :mod:`.executors._program`).
- :mod:`._backend` — ``CallBackend``, the protocol every call surface implements.

Imports: every layer below; never scale, importers, servers, integrations or the CLI.
"""
