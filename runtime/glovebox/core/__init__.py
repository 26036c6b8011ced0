"""The ground floor: errors, settings, JSON rules, the world's names, canonical encoding.

- :mod:`._errors` — the exception tree and the stable error codes; every
  third-party failure is translated into it (see its docstring for where).
- :mod:`._settings` — every ``GLOVEBOX_*`` environment variable, read here only.
- :mod:`._jsonlimits` — the rules every JSON value crossing the host obeys.
- :mod:`._canonical` — the one canonical JSON encoder and the one digest helper
  (wire formats: signatures, descriptors, input digests, the audit chain).
- :mod:`._world` — the names of the ``glovebox:tool@0.1.0`` WIT world.
- :mod:`._frozen` — the base class of every configuration model.
- :mod:`._version` — ``__version__``.

Imports: the standard library and pydantic only; nothing else of glovebox.
"""
