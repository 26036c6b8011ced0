"""SQLite and files under a home, shared by threads and processes.

- :mod:`._sqlite` — a small pool of WAL connections per database.
- :mod:`._walindex` — a one-``pread`` change signal for a WAL database.
- :mod:`._staging` — temporary files under a home and the sweep of dead ones.
- :mod:`._private` — small owner-only JSON documents, replaced whole under a lock.

Imports: :mod:`glovebox.core` only.
"""
