"""``glovebox.replay_run``: a Runtime's run replayed against today's tools (:mod:`glovebox.runs._drift`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..runs._drift import DriftCheck, DriftReport

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["replay_run"]

#: What a run can be replayed against: the tool versions registered now.
AGAINST = ("current",)


def replay_run(rt: Runtime, run_id: str, *, against: str = "current") -> DriftReport:
    """Re-run run ``run_id``'s program against today's tool versions, writes answered from its journal,
    reads made live, and report the first step whose answer diverges (see Code mode: Replay against today's tools).

    Args:
        rt: the Runtime whose home holds the run (and whose registry holds today's tools).
        run_id: the run.
        against: ``current``: the versions registered now.

    Raises:
        ValueError: there is no run ``run_id``, or ``against`` is not ``current``.
        ProgramChanged, JournalTampered: the stored run is not what it wrote.
    """
    if against not in AGAINST:
        raise ValueError(f"a run is replayed against 'current' (the versions registered now), not {against!r}")
    record = rt.runs.record(run_id)
    if record is None:
        raise ValueError(f"no run {run_id!r} in this home")
    rt.runs.store.check(run_id)
    runner = rt.runs.runner
    return DriftCheck(runner, runner.tools, rt.runs.env.visible_tools, rt.policy).check(record, rt.runs.journal(run_id))
