"""The ``glovebox`` command line. Thin: parse, call the library, format.

- :mod:`._main` — the root group and the commands on one tool.
- :mod:`._base` — the error boundary (exit codes) and the global options.
- :mod:`._policy`, :mod:`._breaker`, :mod:`._serve`, :mod:`._import`, :mod:`._sql` — command groups.
- :mod:`._demo` — ``glovebox demo``.

Imports: anything; nothing imports it.
"""
