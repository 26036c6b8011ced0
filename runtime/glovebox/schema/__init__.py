"""JSON Schema: what a tool's schema may contain, and bounded validation of values.

- :mod:`._schemarules` — the rules a schema is held to when its manifest is parsed.
- :mod:`._schemas` — cached validators that never fetch and stop at a deadline.
- :mod:`._fastschema` — a quick yes for values that plainly match simple schemas.
- :mod:`._ecmaregex` — ECMA-262 patterns matched under a time budget.
- :mod:`._objectroot` — schemas and values as object-rooted surfaces (MCP, LLM APIs) see them.

Imports: :mod:`glovebox.core` only.
"""
