"""JSON Schema: what a tool's schema may contain, and bounded validation of values.

- :mod:`._schemarules` — the rules a schema is held to when its manifest is parsed.
- :mod:`._schemas` — cached validators that never fetch and stop at a deadline.
- :mod:`._linear` — jsonschema-rs, the linear-time validator, for the schemas it may check.
- :mod:`._ecmaregex` — ECMA-262 patterns: linear-time where possible, else under a time budget.
- :mod:`._objectroot` — schemas and values as object-rooted surfaces (MCP, LLM APIs) see them.

Imports: :mod:`glovebox.core` only (and jsonschema, jsonschema-rs, regex, referencing).
"""
