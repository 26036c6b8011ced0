"""The tamper-evident audit log: what a call's row holds, the journal, the hash chain.

- :mod:`._log` — ``AuditLog``, the facade: append, read, verify, export.
- :mod:`._writer` — the journal writer (``append``): one line per record, before the call returns.
- :mod:`._fold` — the chain's keeper: folding the journal into the chain, and verifying it.
- :mod:`._queries` — the read queries (records, tail, filtered pages, a call's record).
- :mod:`._rowform` — how a row is stored and hashed: fields, bounds, journal lines, the chain hash.
- :mod:`._journal` — append-only files of rows written before they are chained.
- :mod:`._foldproc` — the home's fold process, started and watched by the writers.
- :mod:`._foldmain` — the fold process's own loop (run in that process only).
- :mod:`._chain` — hashing prepared rows onto the chain's head.
- :mod:`._row` — the content of one call's row, decided here and nowhere else.
- :mod:`._filter` — which records a reader wants (tool, principal, outcome, since, call id).

Imports: :mod:`glovebox.core`, :mod:`glovebox.storage`, :mod:`glovebox.model`.
"""
