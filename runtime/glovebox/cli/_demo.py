"""``glovebox demo``: the examples built, registered and run, for a newcomer to read."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..model._result import CallResult
from ..runtime._runtime import Runtime
from ..toolchains._build import build, check_c_toolchain, sdk_dir
from ._base import CliError
from ._sqldemo import sql_scenarios

__all__ = ["run_demo"]

EXAMPLES = ("text-stats", "word-freq", "calc", "primes", "stress")
#: The examples written in TypeScript (``tool.ts``), built by esbuild and QuickJS-NG.
TS_EXAMPLES = ("ts-text-stats", "ts-weather")


@dataclass(frozen=True)
class Scenario:
    title: str
    tool: str
    input: Any
    expect: str  # "ok" or an error code


SCENARIOS = (
    Scenario("a successful call", "text-stats", {"text": "Agents call tools.\nTools run in a glovebox."}, "ok"),
    Scenario(
        "the same tool in TypeScript", "ts-text-stats", {"text": "Agents call tools.\nTools run in a glovebox."}, "ok"
    ),
    Scenario(
        "a TypeScript tool, no http grant", "ts-weather", {"latitude": 52.52, "longitude": 13.405}, "capability_denied"
    ),
    Scenario("a tool that logs", "word-freq", {"text": "the cat saw the other cat and the dog", "top": 2}, "ok"),
    Scenario("input rejected by the schema", "text-stats", {"txt": 42}, "invalid_input"),
    Scenario("the tool's own error", "calc", {"expression": "2 * (3 + "}, "guest_error"),
    Scenario("fuel exhausted", "primes", {"n": 100_000_000}, "fuel_exhausted"),
    Scenario("memory cap hit", "stress", {"mode": "allocate", "mib": 64}, "memory_limit"),
    Scenario("wall-clock timeout", "stress", {"mode": "spin"}, "timeout"),
)


#: What the demo's SQL part needs beyond the build extra.
SQL_EXTRA = "pip install 'glovebox-runtime[sql]'"


def _has_sql() -> bool:
    """Whether the sql extra (sqlglot) is installed: the demo needs only the build extra, and shows SQL with it."""
    try:
        import sqlglot  # noqa: F401
    except ImportError:
        return False
    return True


def _show_sql(sql_table: list[tuple[Scenario, CallResult]], intact: bool) -> None:
    click.secho("\nAn agent on a SQLite database (each statement judged on the host, then by SQLite):\n", bold=True)
    click.echo(_table(sql_table))
    for scenario, result in sql_table:
        if result.error is not None:
            click.echo(f"  {scenario.title}: {result.code}: {result.error.message}")
    click.echo(f"  the table is {'intact' if intact else 'NOT intact'}")


def _policy_file() -> Path:
    sdk = sdk_dir()
    for candidate in (sdk / "policies", sdk.parent / "policies"):
        if (candidate / "examples" / "team.yaml").is_file():
            return candidate / "examples" / "team.yaml"
    raise CliError("incomplete_install", "the example policy is not part of this installation")


def _examples_dir() -> Path:
    sdk = sdk_dir()
    for candidate in (sdk / "examples", sdk.parent / "guest" / "examples"):
        if candidate.is_dir():
            return candidate
    raise CliError("incomplete_install", "the example tools are not part of this installation")


def _build_examples(out_dir: Path) -> list[Path]:
    source = _examples_dir()
    click.secho("Building the example tools (C -> wasm32-wasi -> component)", bold=True)
    click.echo("  the very first build takes ~30 s while Zig compiles wasi-libc; later builds take ~0.1 s")
    built = []
    for name in EXAMPLES:
        started = time.perf_counter()
        path = build(source / name / "tool.c", out_dir / f"{name}.wasm")
        click.echo(f"  built {path.name:<16} {path.stat().st_size:>7} bytes  in {time.perf_counter() - started:.1f} s")
        built.append(path)
    click.secho("Building the TypeScript examples (esbuild -> QuickJS-NG, pre-initialised -> component)", bold=True)
    click.echo(
        "  the very first build installs esbuild and compiles QuickJS-NG (about a minute); later ones take ~0.3 s"
    )
    for name in TS_EXAMPLES:
        started = time.perf_counter()
        path = build(source / name / "tool.ts", out_dir / f"{name}.wasm")
        click.echo(f"  built {path.name:<16} {path.stat().st_size:>7} bytes  in {time.perf_counter() - started:.1f} s")
        built.append(path)
    return built


def _outcome(result: CallResult) -> str:
    return "ok" if result.ok else str(result.code)


def _table(rows: list[tuple[Scenario, CallResult]]) -> str:
    header = ("#", "scenario", "tool", "outcome", "expected", "ms", "fuel")
    lines = [header]
    for index, (scenario, result) in enumerate(rows, 1):
        lines.append(
            (
                str(index),
                scenario.title,
                scenario.tool,
                _outcome(result),
                scenario.expect,
                f"{result.meta['duration_ms']:.2f}",
                f"{result.meta['fuel_used']:,}",
            )
        )
    widths = [max(len(line[col]) for line in lines) for col in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) for line in lines)


def _short(envelope: dict[str, Any]) -> str:
    meta = envelope["meta"]
    meta["digest"] = meta["digest"][:19] + "…" if meta.get("digest") else meta.get("digest")
    return json.dumps(envelope, indent=2, ensure_ascii=False)


def _policy_scenarios(home: Path) -> list[tuple[Scenario, CallResult]]:
    """Scopes, a block rule and an approval, under the example team policy."""
    rows: list[tuple[Scenario, CallResult]] = []
    with Runtime(home=home, policy=_policy_file()) as rt:

        def run(title: str, principal: str, tool: str, value: Any, expect: str) -> CallResult:
            result = rt.call(tool, value, principal=principal)
            rows.append((Scenario(f"{title} ({principal})", tool, value, expect), result))
            return result

        run("allowed by a rule", "agent", "text-stats", {"text": "hello"}, "ok")
        run("blocked by a rule", "agent", "stress", {"mode": "spin"}, "permission_denied")
        asked = run("needs a person's approval", "agent", "primes", {"n": 1000}, "approval_required")
        if asked.error is not None and "approval_id" in asked.error.details:
            rt.approve(asked.error.details["approval_id"], principal="admin")
            run("approved by admin, run once", "agent", "primes", {"n": 1000}, "ok")
            run("the approval is used up", "agent", "primes", {"n": 1000}, "approval_required")
        check = rt.audit.verify()
        click.echo(f"  audit log: {check.rows} records, hash chain {'intact' if check.ok else 'BROKEN'}")
    return rows


def run_demo(home: Path | None = None) -> int:
    """Run the demo; return 0 when every scenario ended as expected.

    Raises:
        BuildError: the toolchain (the ``build`` extra) is not installed.
    """
    check_c_toolchain()  # before anything is printed: a bare install gets one line naming the extra
    with tempfile.TemporaryDirectory(prefix="glovebox-demo-") as tmp:
        home = home or Path(tmp) / "home"
        artifacts = _build_examples(Path(tmp) / "built")
        with Runtime(home=home) as rt:
            click.secho(f"\nRegistering them in {home}", bold=True)
            for path in artifacts:
                info = rt.register(path)
                click.echo(f"  {info.name}@{info.version}  {info.digest[:23]}…  {info.description}")
            rows = [(s, rt.call(s.tool, s.input, principal="demo")) for s in SCENARIOS]
        policy_rows = _policy_scenarios(home)
        sql_rows, intact = sql_scenarios(home, Path(tmp)) if _has_sql() else ([], True)
    click.secho("\nEach call ran in a fresh, isolated instance:\n", bold=True)
    click.echo(_table(rows))
    for index, (scenario, result) in enumerate(rows, 1):
        click.secho(
            f"\n[{index}] {scenario.title}: glovebox call {scenario.tool} --input '{json.dumps(scenario.input)}'",
            bold=True,
        )
        click.echo(_short(result.to_dict()))
    click.secho(f"\nThe same tools under {_policy_file().name} (who may call what):\n", bold=True)
    click.echo(_table(policy_rows))
    sql_table = [(Scenario(title, tool, value, expect), result) for title, tool, value, expect, result in sql_rows]
    if sql_table:
        _show_sql(sql_table, intact)
    else:
        click.secho(f"\nThe SQL part is left out: it needs the sql extra ({SQL_EXTRA}).", bold=True)
    failed = [s.title for s, r in rows + policy_rows + sql_table if _outcome(r) != s.expect]
    if not intact:
        failed.append("the table is intact")
    if failed:
        click.secho(f"\nunexpected outcomes: {', '.join(failed)}", fg="red")
        return 1
    click.secho("\nEvery scenario ended as expected; the host process is still running.", fg="green")
    return 0
