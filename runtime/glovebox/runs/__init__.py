"""Code mode: a program that calls tools, run in a sandbox, journaled, resumable.

- :mod:`._store` — runs and their journals in ``HOME/runs.sqlite``.
- :mod:`._host` — the program's host calls, answered from the journal or live.
- :mod:`._runner` — one attempt of a run: the code runner's sandbox, how it ended.
- :mod:`._result` — ``RunResult``.
- :mod:`._types` — the ``.d.ts`` of the tools a program sees, from their schemas.

The nested calls are the Runtime's: the runner is handed a function that makes
one (``glovebox.runtime._coderun`` wires it), so this package never imports the
runtime. Imports: :mod:`glovebox.core`, :mod:`glovebox.model`,
:mod:`glovebox.storage`, :mod:`glovebox.sandbox` and :mod:`glovebox.toolchains`.
"""
