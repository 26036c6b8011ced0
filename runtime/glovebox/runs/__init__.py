"""Code mode: a program that calls tools, run in a sandbox, journaled, resumable.

- :mod:`._env` — ``RunEnvironment``: all a run needs from outside (the sandbox, nested
  calls, the visible tools, the audit log, the policy).
- :mod:`._runner` — start, resume and cancel a run; each attempt one invocation of the
  code runner (:mod:`._component`).
- :mod:`._attempt` — an attempt as its audit row tells it, and how it ended.
- :mod:`._leases` — an attempt's lease: its owner, the renewing thread, fenced writes, dead holders.
- :mod:`._host` — the program's host calls, answered from the journal or live.
- :mod:`._tools` — what a program sees of the tools: names, search, a nested call.
- :mod:`._store` — runs and their journals in ``HOME/runs.sqlite``, a facade over
  :mod:`._schema` (tables and upgrades), :mod:`._records`, :mod:`._claims` (the lease in
  the database), :mod:`._journal` and :mod:`._gc`.
- :mod:`._seal` — the program's digest and the journal's MAC chain (keyed from the home), checked
  before a resume.
- :mod:`._rollback` — rolling a finished run back through its tools' compensations, journaled by
  :mod:`._compensations`.
- :mod:`._drift` — replaying a run against today's tools: where the new versions diverge.
- :mod:`._result` — ``RunResult``.
- :mod:`._types` — the ``.d.ts`` of the tools a program sees, from their schemas.

The nested calls are the environment's (``glovebox.runtime._runenv`` makes a
Runtime's), so this package never imports the runtime. Imports:
:mod:`glovebox.core`, :mod:`glovebox.model`, :mod:`glovebox.storage`,
:mod:`glovebox.policy`, :mod:`glovebox.engine`, :mod:`glovebox.sandbox` and
:mod:`glovebox.toolchains`.
"""
