"""One invocation: a fresh Store and instance, the host interface, how a call ended.

- :mod:`._sandbox` — instantiate, set fuel, memory and deadline, run ``call``, drop.
- :mod:`._host` — the host side of ``glovebox:tool/host`` (one linker per engine).
- :mod:`._hostabi` — host-function values read and written through wasmtime's C API.
- :mod:`._fastcall` — a direct path for calling ``call``.
- :mod:`._callstate` — the state of one call as its host functions see it.
- :mod:`._outcome` — how an invocation ended, decided in one place.
- :mod:`._validate` — that an artifact is a component of the glovebox world.
- :mod:`._compute` — compute slots: how many admitted calls run at once.
- :mod:`._typed` — a component's own typed exports, found and called with JSON;
  :mod:`._wittypes` — their WIT types and JSON Schemas; :mod:`._witvalues` — JSON ↔ WIT values.
- :mod:`._wasi` — the WASI 0.2 configuration of one call (stdio into its logs, a ``files`` grant).

Imports: :mod:`glovebox.core`, :mod:`glovebox.model`, :mod:`glovebox.schema`,
:mod:`glovebox.engine`.
"""
