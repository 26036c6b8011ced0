"""What a tool is and what it may use: manifests, grants, results, the grant matcher.

- :mod:`._manifest` — the tool manifest (name, schemas, capabilities, limits).
- :mod:`._checks` — output checks (``Checks``), declared by a manifest or a policy's guards.
- :mod:`._grants` — the capability grant model shared by manifests, policies and host functions.
- :mod:`._rules` — the one matcher for hosts, paths, methods, schemes and ports,
  used both to validate grants and to enforce them.
- :mod:`._result` — ``CallResult`` (the envelope) and ``ToolInfo``.

Imports: :mod:`glovebox.core` and :mod:`glovebox.schema`.
"""
