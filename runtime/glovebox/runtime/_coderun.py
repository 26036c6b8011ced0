"""``Runtime.run`` and ``Runtime.runs``: code mode, given a Runtime's run environment.

The runs package (``glovebox.runs``) knows nothing of the Runtime: :class:`Runs`
is handed one :class:`~glovebox.runs._env.RunEnvironment` (the Runtime's is
``glovebox.runtime._runenv.RuntimeRunEnvironment``), from which it takes the
sandbox, the nested calls, the visible tools, the audit log and the policy's
``runs`` settings (``lease_seconds``, ``runs_per_minute``, ``retention_days``).
Programs are transpiled here (esbuild), once per source; a Python program
(``lang="py"``) is parsed here and runs as it was written.

A resume or cancel made by another principal than the run's owner (an operator)
needs :data:`AUDIT_SCOPE` and the policy's approver scope; who it was is kept in
the run (``resumed_by``; a cancelled run's ``meta.cancelled_by``) and in the
audit row (``egress.run.by``).
"""

from __future__ import annotations

import builtins
import contextvars
import functools
import hashlib
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._errors import PermissionDenied, RateLimited
from ..runs._env import RunEnvironment
from ..runs._host import RunBounds
from ..runs._result import RunResult
from ..runs._runner import RUN_LIMITS, Runner
from ..runs._store import JournalStep, RunRecord, RunStore
from ..runs._tools import search_tools
from ..runs._types import declarations

if TYPE_CHECKING:
    pass

__all__ = ["AUDIT_SCOPE", "LANGS", "Runs", "lang_of", "search_tools"]

#: The scope that reads the audit log (the console's); with the approver scope, it lets a principal
#: resume or cancel another principal's run.
AUDIT_SCOPE = "glovebox:audit"

_SCRIPTS = 256  # transpiled programs kept per Runtime
_LANGS = {".js": "js", ".mjs": "js", ".ts": "ts", ".mts": "ts", ".py": "py"}
#: The languages of a program: TypeScript, JavaScript (QuickJS-NG) and Python (CPython).
LANGS = ("ts", "js", "py")


class Runs:
    """The runs of a home: ``list``, ``show``, ``journal``, ``resume``, ``cancel``, ``collect``.

    Args:
        env: what the runs need from the Runtime (see the module docstring).
        bounds: how far one run may go (steps, journal bytes).
    """

    def __init__(
        self,
        env: RunEnvironment,
        *,
        bounds: RunBounds | None = None,
    ) -> None:
        self.env = env
        self.store = RunStore(self.env.home)
        self.runner = Runner(self.store, self.env, limits=RUN_LIMITS, bounds=bounds)
        self._lock = threading.Lock()
        self._scripts: OrderedDict[tuple[str, str], str] = OrderedDict()

    def close(self) -> None:
        """Close the run store."""
        self.store.close()

    # -- the public face (Runtime.run, Runtime.runs.*) --------------------------

    def start(self, code: str, *, input: Any, principal: str | None, lang: str) -> RunResult:
        """A new run of ``code`` (see ``Runtime.run``)."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        if principal is not None and not isinstance(principal, str):
            raise TypeError(f"principal must be a str or None, not {type(principal).__name__}")
        script = self._script(code, lang)
        who = principal or "anonymous"
        refused = self._over_quota(who)
        if refused is not None:
            return self.runner.refuse(who, refused, source=code, input=input)
        return self.runner.start(script, lang=lang, source=code, input=input, principal=who)

    def _over_quota(self, principal: str) -> RateLimited | None:
        """``rate_limited`` when ``principal`` started the policy's ``runs.runs_per_minute`` in the last minute."""
        limit = self.env.policy.runs.runs_per_minute
        if limit is None:
            return None
        started = self.store.starts_since(principal, time.time() - 60.0, limit)
        if len(started) < limit:
            return None
        retry_ms = max(1, int((started[-1] + 60.0 - time.time()) * 1000))
        return RateLimited(
            f"{principal!r} started {limit} runs in the last minute (runs.runs_per_minute)",
            details={"quota": "runs.runs_per_minute", "limit": limit, "retry_after_ms": retry_ms},
        )

    def retention_s(self) -> float:
        """How long finished runs are kept: the policy's ``runs.retention_days``."""
        return float(self.env.policy.runs.retention_days) * 86400.0

    def list(
        self, *, principal: str | None = None, status: str | None = None, limit: int = 100, offset: int = 0
    ) -> builtins.list[RunRecord]:
        """The home's runs, newest first (``offset`` skips the newest ones: a page)."""
        return self.store.list(principal=principal, status=status, limit=limit, offset=offset)

    def record(self, run_id: str) -> RunRecord | None:
        """The run ``run_id`` as the home's run store holds it (owner, status, attempts, lease,
        ``resumed_by``, source), or None when there is none."""
        return self.store.get(run_id) if isinstance(run_id, str) else None

    def show(self, run_id: str) -> RunResult:
        """A run's last known result.

        Raises:
            ValueError: there is no run ``run_id``.
        """
        record = self.store.get(run_id)
        if record is None:
            raise ValueError(f"no run {run_id!r} in this home")
        return self.runner.result_of(record)

    def declarations(self, principal: str | None = None, *, lang: str = "ts") -> str:
        """The declaration of the ``tools`` a program of ``principal`` sees: TypeScript (``.d.ts``;
        ``lang`` ``ts`` or ``js``) or, with ``lang="py"``, typed Python stubs (a ``.pyi``)."""
        visible = self.env.visible_tools(principal)
        described = [(i.name, i.description, i.input_schema, i.output_schema) for i in visible]
        if lang == "py":
            from ..runs._pytypes import python_stubs  # (not at import time: import glovebox stays cheap)

            return python_stubs(described)
        return declarations(described)

    def search(self, query: str, principal: str | None = None) -> builtins.list[dict[str, Any]]:
        """What ``tools.search(query)`` answers a program of ``principal``."""
        return self.runner.tools.search(query, principal or "anonymous")

    def journal(self, run_id: str) -> builtins.list[JournalStep]:
        """A run's journal, step by step."""
        return self.store.journal(run_id)

    def resume(self, run_id: str, *, by: str | None = None) -> RunResult:
        """Continue a paused run (or one whose process died): recorded steps replay, the rest runs live.

        ``by`` is who resumes (default: the run's own principal); it is kept in
        the run (``resumed_by``) and in the attempt's audit row. The nested calls
        stay the run's principal's. A run another process is executing now
        answers ``status: running`` with ``run_busy``, and nothing runs.

        Raises:
            ValueError: there is no run ``run_id``.
            PermissionDenied: ``by`` is another principal than the run's and lacks
                ``glovebox:audit`` or the policy's approver scope.
        """
        if by is not None:
            self._check_operator(run_id, by, "resume")
        return self.runner.resume(run_id, by=by)

    def _check_operator(self, run_id: str, by: str, action: str) -> None:
        if not isinstance(by, str):
            raise TypeError(f"by must be a str or None, not {type(by).__name__}")
        record = self.record(run_id)
        if record is None or record.principal == by:
            return
        policy = self.env.policy
        needed = (AUDIT_SCOPE, policy.approvals.approver_scope)
        held = policy.scopes_of(by)
        if not all(scope in held for scope in needed):
            raise PermissionDenied(
                f"principal {by!r} may not {action} run {run_id!r} of {record.principal!r}:"
                f" that takes the scopes {needed[0]!r} and {needed[1]!r}",
                details={"run_id": run_id, "principal": by, "scopes": list(needed)},
            )

    def cancel(self, run_id: str, *, by: str | None = None) -> RunResult:
        """Cancel a run that has not finished, as ``by`` (default: the run's own principal).

        The cancel leaves one audit row (tool ``glovebox:run``, outcome
        ``cancelled``, ``egress.run.by`` the canceller, ``egress.run.action``
        ``cancel``), and the run's result names the canceller
        (``meta.cancelled_by``). Cancelling a finished run changes nothing,
        writes no row, and answers the run as it ended.

        Raises:
            ValueError: there is no run ``run_id``.
            PermissionDenied: ``by`` is another principal than the run's and lacks
                ``glovebox:audit`` or the policy's approver scope (as for ``resume``).
        """
        if by is not None:
            self._check_operator(run_id, by, "cancel")
        return self.runner.cancel(run_id, by=by)

    def collect(self, older_than_s: float) -> builtins.list[str]:
        """Delete runs that finished more than ``older_than_s`` seconds ago; their ids."""
        return self.store.collect(time.time() - older_than_s)

    def _script(self, code: str, lang: str) -> str:
        """``code`` transpiled for the runner (kept for the latest :data:`_SCRIPTS` programs)."""
        from ..toolchains._build import sdk_dir
        from ..toolchains._jsrunner import transpile

        if lang not in LANGS:
            raise ValueError(f"a program is one of {', '.join(LANGS)}, not {lang!r}")
        if lang == "py":
            from ..toolchains._pyrunner import check_program

            check_program(code)
            return code
        key = (lang, hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest())
        with self._lock:
            script = self._scripts.get(key)
            if script is not None:
                self._scripts.move_to_end(key)
                return script
        script = transpile(code, lang, sdk_dir())
        with self._lock:
            self._scripts[key] = script
            while len(self._scripts) > _SCRIPTS:
                self._scripts.popitem(last=False)
        return script


def lang_of(path: str | os.PathLike[str]) -> str:
    """``js``, ``ts`` or ``py`` from a program file's suffix.

    Raises:
        ValueError: the suffix is none of .js, .mjs, .ts, .mts, .py.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in _LANGS:
        raise ValueError(f"{path}: a program is a .js, .mjs, .ts, .mts or .py file")
    return _LANGS[suffix]


async def arun(runs: Runs, code: str, *, input: Any, principal: str | None, lang: str) -> RunResult:
    """``Runs.start`` on a worker thread (a run blocks while its nested calls run)."""
    import asyncio  # not at import time: import glovebox leaves asyncio alone

    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    job = functools.partial(context.run, runs.start, code, input=input, principal=principal, lang=lang)
    return await loop.run_in_executor(None, job)
