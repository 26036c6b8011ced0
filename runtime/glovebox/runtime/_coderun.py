"""``Runtime.run`` and ``Runtime.runs``: code mode wired to this Runtime.

The runs package (``glovebox.runs``) knows nothing of the Runtime: it is given

- the code runner's compiled component (built once per engine and runner
  source in the toolchain directory, compiled once per engine's code settings);
- the Runtime's sandbox, in which each attempt runs;
- a function making one nested call: ``Runtime.call`` of the run's principal
  under a call id the journal wrote first, with ``meta.run`` (``run_id``,
  ``step``, ``parent_call_id``: the call id of the attempt's own row) so that
  the call's audit row names its run and attempt; a scale-out backend hands
  its own call path instead (``call``: a ProcessPool's workers, a RayRuntime's
  replicas), which carries the call id and ``RUN_CONTEXT`` to wherever the
  call runs, so the program runs here and its nested calls spread like any
  other call;
- a function writing each attempt's audit row (:func:`glovebox.audit._row.run_row`)
  to the Runtime's audit log;
- the policy's ``runs.lease_seconds`` (how long an attempt's lease lasts);
- the principal's visible tools (the typed wrappers) and a search over them.

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
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wasmtime.component import Component

from ..audit._row import run_row
from ..core._canonical import sha256_digest
from ..core._errors import PermissionDenied, RateLimited, ToolNotFound
from ..core._settings import toolchain_cache_dir
from ..engine._compile import precompile
from ..model._result import CallResult, ToolInfo
from ..runs._host import RunBounds
from ..runs._result import RunResult
from ..runs._runner import RUN_LIMITS, RunAttempt, Runner
from ..runs._store import JournalStep, RunRecord, RunStore
from ..runs._types import declarations
from ._envelope import RUN_CONTEXT, failure, new_meta
from ._gate import CallTrace, input_digest

#: The Runtime these runs belong to (not imported: ``_runtime`` imports this module).
Runtime = Any
#: One nested call, made while ``RUN_CONTEXT`` holds the run's context: (call_id, tool, input, principal) -> result.
NestedCall = Callable[[str, str, Any, str], CallResult]

logger = logging.getLogger("glovebox.runs")

__all__ = ["AUDIT_SCOPE", "NestedCall", "Runs", "search_tools"]

#: The scope that reads the audit log (the console's); with the approver scope, it lets a principal
#: resume or cancel another principal's run.
AUDIT_SCOPE = "glovebox:audit"

_SCRIPTS = 256  # transpiled programs (and principals' visible tools) kept per Runtime
_VISIBLE_TTL_S = 1.0
_LANGS = {".js": "js", ".mjs": "js", ".ts": "ts", ".mts": "ts"}


class Runs:
    """The runs of a Runtime's home: ``list``, ``show``, ``journal``, ``resume``, ``cancel``, ``collect``."""

    def __init__(
        self,
        runtime: Runtime,
        not_found: Callable[[str, str, builtins.list[str]], str],
        bounds: RunBounds | None = None,
        call: NestedCall | None = None,
    ) -> None:
        self._runtime = runtime
        self._call_as: NestedCall = call or runtime._call_as  # where a nested call runs once it may
        self._not_found = not_found  # the message of an unknown tool, as Runtime.call says it
        self.store = RunStore(runtime.home)
        self._lock = threading.Lock()
        self._component: Component | None = None
        self._scripts: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._visible: dict[str, tuple[float, builtins.list[str]]] = {}
        self.runner = Runner(
            self.store,
            lambda: runtime._sandbox,
            self._runner_component,
            self._nested_call,
            self._search,
            self._visible_names,
            limits=RUN_LIMITS,
            bounds=bounds,
            audit=self._audit_attempt,
            lease_s=lambda: runtime.policy.runs.lease_seconds,
        )

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
        limit = self._runtime.policy.runs.runs_per_minute
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
        return float(self._runtime.policy.runs.retention_days) * 86400.0

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

    def declarations(self, principal: str | None = None) -> str:
        """The TypeScript declaration (``.d.ts``) of the ``tools`` a program of ``principal`` sees."""
        visible = self._runtime.visible_tools(principal)
        return declarations([(i.name, i.description, i.input_schema, i.output_schema) for i in visible])

    def search(self, query: str, principal: str | None = None) -> builtins.list[dict[str, Any]]:
        """What ``tools.search(query)`` answers a program of ``principal``."""
        return self._search(query, principal or "anonymous")

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
        policy = self._runtime.policy
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

    # -- what the runner is given ---------------------------------------------

    def _audit_attempt(self, attempt: RunAttempt) -> None:
        """Write one attempt's audit row; a row that cannot be written is logged (the run's own
        nested calls were each audited, and its journal holds what it did)."""
        run: dict[str, Any] = {"run_id": attempt.run_id, "attempt": attempt.attempt, "by": attempt.by}
        run |= {"status": attempt.status, "steps": attempt.steps, "replayed": attempt.replayed}
        run["calls"] = attempt.calls
        if attempt.previous_call_id is not None:
            run["previous_call_id"] = attempt.previous_call_id
        if attempt.holder is not None:
            run["holder"] = attempt.holder
        if attempt.action is not None:  # a cancel's row, or an abandoned attempt's written by its successor
            run["action"] = attempt.action
        if attempt.taken_over_by is not None:
            run["taken_over_by"] = attempt.taken_over_by
        stored = self._runtime.policy.audit
        row = run_row(
            call_id=attempt.call_id, principal=attempt.principal, outcome=attempt.outcome, run=run,
            program_digest=sha256_digest(attempt.source.encode("utf-8", "surrogatepass")),
            input_digest=input_digest(attempt.input), value=attempt.input, output=attempt.output,
            duration_ms=attempt.duration_ms, fuel_used=attempt.fuel_used, attempt=attempt.attempt,
            first_call_id=attempt.first_call_id, store_inputs=stored.store_inputs, store_outputs=stored.store_outputs,
        )  # fmt: skip
        try:
            self._runtime.audit.append(row)
        except Exception:
            logger.exception("cannot write the audit row of run %s (attempt %s)", attempt.run_id, attempt.call_id)

    def _script(self, code: str, lang: str) -> str:
        from ..toolchains._build import sdk_dir
        from ..toolchains._jsrunner import transpile

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

    def _runner_component(self) -> Component:
        component = self._component
        if component is None:
            with self._lock:
                if self._component is None:
                    self._component = _load_runner(self._runtime)
                component = self._component
        return component

    def _nested_call(self, tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any]) -> CallResult:
        """A full call of ``principal``; a tool it cannot see does not exist (as in ``tool_not_found``)."""
        token = RUN_CONTEXT.set(run)
        try:
            visible = self._visible_names(principal)
            if tool.partition("@")[0] not in visible:
                missing = ToolNotFound(self._not_found(tool, principal, visible), details={"tool": tool})
                refused = failure(missing, new_meta(tool, principal, call_id))
                recorded: CallResult = self._runtime._record(refused, input, CallTrace())  # its audit row
                return recorded
            answer: CallResult = self._call_as(call_id, tool, input, principal)
            return answer
        finally:
            RUN_CONTEXT.reset(token)

    def _visible_names(self, principal: str) -> builtins.list[str]:
        """The names ``principal`` may see (kept for a second: a run's calls ask again and again)."""
        now = time.monotonic()
        with self._lock:
            kept = self._visible.get(principal)
            if kept is not None and now - kept[0] < _VISIBLE_TTL_S:
                return kept[1]
        names = sorted(info.name for info in self._runtime.visible_tools(principal))
        with self._lock:
            self._visible[principal] = (now, names)
            if len(self._visible) > _SCRIPTS:
                self._visible.pop(next(iter(self._visible)))
        return names

    def _search(self, query: str, principal: str) -> builtins.list[dict[str, Any]]:
        return search_tools(self._runtime.visible_tools(principal), query)


def lang_of(path: str | os.PathLike[str]) -> str:
    """``js`` or ``ts`` from a program file's suffix.

    Raises:
        ValueError: the suffix is none of .js, .mjs, .ts, .mts.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in _LANGS:
        raise ValueError(f"{path}: a program is a .js, .mjs, .ts or .mts file")
    return _LANGS[suffix]


def search_tools(tools: builtins.list[ToolInfo], query: str, limit: int = 20) -> builtins.list[dict[str, Any]]:
    """The tools whose name or description holds the query's words, best first (every word counts)."""
    words = [word for word in query.lower().replace("-", " ").replace("_", " ").split() if word]
    scored = []
    for info in tools:
        name = info.name.lower().replace("-", " ").replace("_", " ")
        text = f"{name} {info.description.lower()}"
        score = sum(3 if word in name else 1 for word in words if word in text)
        if score or not words:
            scored.append((-score, info.name, info))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [
        {"name": info.name, "version": info.version, "description": info.description} for _, _, info in scored[:limit]
    ]


def _load_runner(runtime: Runtime) -> Component:
    from ..toolchains._build import sdk_dir
    from ..toolchains._jsrunner import runner_component

    cache = toolchain_cache_dir()
    wasm = runner_component(sdk_dir(), cache)
    shared = runtime._wasm().shared
    compiled = cache / f"{wasm.stem}-{shared.fingerprint}.cwasm"
    if not compiled.is_file():
        partial = compiled.with_name(f"{compiled.name}.tmp{os.getpid()}.{threading.get_ident()}")
        try:
            precompile(wasm, partial, shared.settings, "the code runner")
            os.replace(partial, compiled)
        finally:
            partial.unlink(missing_ok=True)
    loaded: Component = shared.load(compiled)
    return loaded


async def arun(runs: Runs, code: str, *, input: Any, principal: str | None, lang: str) -> RunResult:
    """``Runs.start`` on a worker thread (a run blocks while its nested calls run)."""
    import asyncio  # not at import time: import glovebox leaves asyncio alone

    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    job = functools.partial(context.run, runs.start, code, input=input, principal=principal, lang=lang)
    return await loop.run_in_executor(None, job)
