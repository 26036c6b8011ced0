"""Host capabilities built per call from the effective grant.

- :mod:`glovebox.model._rules` — the one matcher for hosts, paths, methods, schemes and
  ports, used both to validate grant models and to enforce them.
- :mod:`._fetch` — the enforcing HTTP client behind ``http-fetch``.
- :mod:`._secrets` — secret providers and the scrubbing of secret values.

This package imports nothing heavy: ``_fetch`` (httpx) is imported only when a
call is granted HTTP.
"""
