"""The reference pages document what the code has: their tables are parsed and compared row by row.

A row deleted from a table, or a command, field, error code or environment
variable added to the code without its row, fails here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

import glovebox
from glovebox.cli._main import cli
from glovebox.core._errors import CallError, GloveboxError
from glovebox.policy import _guards, _models

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "runtime" / "glovebox"
REFERENCE = ROOT / "docs" / "reference"


def page(name: str) -> str:
    """The text of the reference page ``docs/reference/<name>.md``."""
    return (REFERENCE / f"{name}.md").read_text(encoding="utf-8")


Table = list[dict[str, str]]


def _cells(line: str) -> list[str]:
    """The cells of one table row (``\\|`` is a pipe inside a cell)."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]


def parse_tables(markdown: str) -> Iterator[tuple[str, Table]]:
    """Every pipe table in ``markdown`` with the heading it sits under, as a list of rows keyed by header."""
    heading, block = "", []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            header, rule, *rows = block
            assert set(_cells(rule)) <= {"---", ":---", "---:", ":---:"}, f"not a table rule: {rule}"
            names = _cells(header)
            yield heading, [dict(zip(names, _cells(row), strict=True)) for row in rows]
            block = []
        if line.startswith("#"):
            heading = re.sub(r"\s*\{#[\w-]+\}$", "", line.lstrip("#").strip())


def table(name: str, heading: str, first_column: str) -> Table:
    """The one table of reference page ``name`` under ``heading`` whose first column is ``first_column``."""
    found = [rows for under, rows in parse_tables(page(name)) if under == heading and first_column in rows[0]]
    assert len(found) == 1, f"expected one `{first_column}` table under {heading!r}, found {len(found)}"
    return found[0]


def code_spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def column(rows: Table, name: str) -> list[str]:
    """The single code span of each row's ``name`` cell."""
    values = []
    for row in rows:
        spans = code_spans(row[name])
        assert len(spans) == 1, f"{name} cell {row[name]!r} should hold one `code` span"
        values.append(spans[0])
    assert len(values) == len(set(values)), f"duplicate rows in the {name} column"
    return values


# -- the parser itself -------------------------------------------------------------


def test_table_parser_reads_rows_cells_and_escaped_pipes() -> None:
    markdown = "# A\ntext\n\n| k | v |\n|---|---|\n| `x` | one \\| two |\n| `y` | |\n\n## B\n| k |\n|---|\n| z |\n"
    assert list(parse_tables(markdown)) == [
        ("A", [{"k": "`x`", "v": "one | two"}, {"k": "`y`", "v": ""}]),
        ("B", [{"k": "z"}]),
    ]


def test_table_parser_refuses_a_row_with_a_missing_cell() -> None:
    with pytest.raises(ValueError):
        list(parse_tables("| k | v |\n|---|---|\n| x |\n"))


# -- error codes -------------------------------------------------------------------

ERRORS = "The result envelope and error codes"  # the title of docs/reference/errors.md


def _all_subclasses(cls: type[GloveboxError]) -> Iterator[type[GloveboxError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def test_every_call_error_code_has_a_row_and_every_row_is_a_code() -> None:
    assert set(column(table("errors", ERRORS, "code"), "code")) == set(glovebox.ERROR_CODES)


def test_every_call_error_class_has_a_listed_code() -> None:
    assert {cls.code for cls in _all_subclasses(CallError)} <= set(glovebox.ERROR_CODES)


def test_codes_raised_outside_calls_are_documented_beside_the_table() -> None:
    section = page("errors").split(f"# {ERRORS}", 1)[1].split("\n## ", 1)[0]
    section = re.sub(r"^```.*?^```", "", section, flags=re.MULTILINE | re.DOTALL)  # prose only
    raised = {cls.code for cls in _all_subclasses(GloveboxError)} - set(glovebox.ERROR_CODES)
    assert raised >= {"invalid_artifact", "invalid_manifest", "invalid_signature", "build_failed", "invalid_policy"}
    assert raised <= set(code_spans(section))


# -- manifest fields ---------------------------------------------------------------


def _manifest_paths() -> set[str]:
    nested = {"limits": glovebox.Limits, "capabilities": glovebox.Capabilities}
    paths = {name for name in glovebox.Manifest.model_fields if name not in nested}
    for prefix, model in nested.items():
        paths |= {f"{prefix}.{name}" for name in model.model_fields}
    return paths


def test_every_manifest_field_has_a_row_and_every_row_is_a_field() -> None:
    assert set(column(table("manifest", "Manifests", "field"), "field")) == _manifest_paths()


def test_every_http_rule_field_has_a_row_and_every_row_is_a_field() -> None:
    rows = table("manifest", "HTTP rules", "field")
    assert set(column(rows, "field")) == set(glovebox.HttpRule.model_fields)


def test_every_sql_rule_field_has_a_row_and_every_row_is_a_field() -> None:
    rows = table("manifest", "SQL rules", "field")
    assert set(column(rows, "field")) == set(glovebox.SqlRule.model_fields)
    assert set(glovebox.SqlGrant.model_fields) - set(glovebox.SqlRule.model_fields) == {"dsn", "password"}


@pytest.mark.parametrize(
    "model", [glovebox.HttpLimits, glovebox.SecretRule, glovebox.SqlActions], ids=lambda model: model.__name__
)
def test_http_limit_and_secret_fields_are_named_in_their_paragraph(model: type[glovebox.HttpRule]) -> None:
    # "`HttpLimits`: `max_requests` (16), ... `SecretRule`: `name`, ...": up to the next model's name.
    after = page("manifest").split(f"`{model.__name__}`:", 1)[1]
    described = re.split(r"`[A-Z]\w+`:", after.split("\n\n", 1)[0], maxsplit=1)[0]
    assert set(model.model_fields) <= set(code_spans(described))


# -- policy fields -----------------------------------------------------------------


def _policy_paths() -> set[str]:
    """The policy fields the table has a row for (a principal's ``description`` is named in its parent's row)."""
    paths = set(glovebox.Policy.model_fields) - {"defaults", "approvals", "audit", "runs"}
    paths |= {f"principals.*.{name}" for name in _models.Principal.model_fields if name != "description"}
    paths |= {f"rules[].{name}" for name in _models.ToolRule.model_fields}
    paths |= {"grants[].tool", "limits[].tool", "quotas[].tool"}
    paths |= {f"quotas[].{name}" for name in _models.Quota.model_fields if name not in {"tool", "principals"}}
    paths |= {f"guards[].{name}" for name in _guards.GuardRule.model_fields}
    paths |= {f"guards[].retries.{name}" for name in _guards.Retries.model_fields}
    paths |= {f"guards[].breaker.{name}" for name in _guards.Breaker.model_fields}
    paths |= {f"guards[].checks.{name}" for name in _guards.Checks.model_fields}
    paths |= {f"defaults.{name}" for name in _models.Defaults.model_fields}
    paths |= {f"approvals.{name}" for name in _models.ApprovalSettings.model_fields}
    paths |= {f"audit.{name}" for name in _models.AuditSettings.model_fields}
    paths |= {f"runs.{name}" for name in _models.RunSettings.model_fields}
    return paths


def test_every_policy_field_has_a_row_and_every_row_is_a_field() -> None:
    rows = table("policy", "Policies", "field")
    assert {span for row in rows for span in code_spans(row["field"])} == _policy_paths()


@pytest.mark.parametrize(
    ("row", "model"),
    [("principals", _models.Principal), ("grants", _models.GrantRule), ("limits", _models.LimitValues)],
)
def test_fields_of_policy_entries_are_named_in_their_row(row: str, model: type[glovebox.Limits]) -> None:
    (meaning,) = [r["meaning"] for r in table("policy", "Policies", "field") if r["field"] == f"`{row}`"]
    assert set(model.model_fields) - {"tool", "principals"} <= set(code_spans(meaning))


# -- CLI commands ------------------------------------------------------------------


def _command_paths(group: click.Group, prefix: str = "") -> set[str]:
    paths = set()
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            paths |= _command_paths(command, f"{prefix}{name} ")
        elif not command.hidden:
            paths.add(prefix + name)
    return paths


def _documented_command(usage: str) -> str:
    """``glovebox keys generate NAME [--dir D]`` → ``keys generate`` (walking the click tree)."""
    words, path, group = usage.removeprefix("glovebox ").split(), [], cli
    for word in words:
        command = group.commands.get(word)
        assert command is not None, f"`{usage}` names no command at {word!r}"
        path.append(word)
        if not isinstance(command, click.Group):
            return " ".join(path)
        group = command
    raise AssertionError(f"`{usage}` stops at a group")


def test_every_cli_command_has_a_row_and_every_row_is_a_command() -> None:
    rows = table("cli", "Command line", "command")
    documented = {_documented_command(usage) for row in rows for usage in code_spans(row["command"])}
    assert documented == _command_paths(cli)


def _command(path: str) -> click.Command:
    command: click.Command = cli
    for word in path.split():
        assert isinstance(command, click.Group)
        command = command.commands[word]
    return command


def test_every_cli_option_is_in_its_commands_row_and_every_documented_option_exists() -> None:
    documented: dict[str, set[str]] = {}
    for row in table("cli", "Command line", "command"):
        for usage in code_spans(row["command"]):
            spelled = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", usage.replace("/", " ")))
            documented.setdefault(_documented_command(usage), set()).update(spelled)
    for path, spelled in documented.items():
        options = [p for p in _command(path).params if isinstance(p, click.Option)]
        names = {name for option in options for name in (*option.opts, *option.secondary_opts)}
        assert spelled <= names, f"`glovebox {path}` documents options it lacks: {sorted(spelled - names)}"
        for option in options:
            if option.hidden and option.name in {"home", "policy"}:
                continue  # the global option, accepted after the command too: documented once, as global
            given = {*option.opts, *option.secondary_opts}
            assert given & spelled, f"`glovebox {path}`'s row lacks {'/'.join(sorted(given))}"


# -- environment variables ---------------------------------------------------------


def _variables_read() -> set[str]:
    """Every ``GLOVEBOX_*`` name the package's source mentions, wherever it is read, and every
    variable ``_settings`` (the one reader of the environment) passes to its reader."""
    names = {
        name for path in PACKAGE.rglob("*.py") for name in re.findall(r"\bGLOVEBOX_[A-Z][A-Z_]*", path.read_text())
    }
    settings = (PACKAGE / "core" / "_settings.py").read_text()
    return names | set(re.findall(r"_get\(\"([A-Z][A-Z_]*)\"\)", settings))


def test_every_environment_variable_has_a_row_and_every_row_is_read() -> None:
    variables = _variables_read()
    assert {"GLOVEBOX_HOME", "GLOVEBOX_POLICY"} <= variables
    assert set(column(table("environment", "Environment", "variable"), "variable")) == variables


# -- SECURITY.md -------------------------------------------------------------------


def _security_references() -> list[tuple[str, str]]:
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    return re.findall(r"`(tests/[\w/]+\.py)::(\w+)(?:\[[^\]`]*\])?`", text)


def test_security_cites_a_test_for_every_promise() -> None:
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    promises = [row for heading, rows in parse_tables(text) for row in rows if "promise" in row]
    assert len(promises) >= 30
    for row in promises:
        assert "tests/" in row["test"], f"no test backs: {row['promise']}"


def test_every_test_security_cites_exists() -> None:
    references = _security_references()
    assert len(references) >= 30
    for path, name in references:
        source = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^(?:async )?def {name}\(", source, re.MULTILINE), f"{path}::{name} is cited but missing"


# -- the generated CLI reference ---------------------------------------------------


def test_the_cli_page_shows_what_help_prints() -> None:
    from .docs_cli import page_with, render

    text = page("cli")
    assert page_with(render(), text) == text, "docs/reference/cli.md is stale: run .venv/bin/python tests/docs_cli.py"


def test_the_cli_page_has_a_help_section_for_every_command() -> None:
    sections = set(re.findall(r"^### `glovebox ?([^`]*)`$", page("cli"), re.MULTILINE))
    assert _command_paths(cli) <= sections


@pytest.mark.parametrize("path", ["", "call", "policy explain", "import mcp"])
def test_the_cli_page_matches_the_installed_command(path: str) -> None:
    """The generator renders what the ``glovebox`` command itself prints for ``--help``."""
    import os
    import subprocess
    import sys

    shown = page("cli").split(f"### `{' '.join(['glovebox', *path.split()])}`\n\n```text\n", 1)[1].split("\n```", 1)[0]
    command = [str(Path(sys.executable).parent / "glovebox"), *path.split(), "--help"]
    printed = subprocess.run(
        command, capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "100"}
    ).stdout
    assert printed.rstrip() == shown


# -- the Python API page -----------------------------------------------------------


def test_every_public_name_has_an_entry_on_the_api_page() -> None:
    entries = set(re.findall(r"^::: glovebox\.(\w+)$", page("python-api"), re.MULTILINE))
    assert entries >= set(glovebox.__all__) - {"__version__"}
    assert entries - set(glovebox.__all__) == set(), "the API page names something outside glovebox.__all__"


# -- pages read on a code host -------------------------------------------------------


def test_a_page_that_includes_a_file_links_to_it_for_a_code_host() -> None:
    """A code host shows an include line as it is: the page must say where its text is."""
    including = []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        for included in re.findall(r'^--8<-- "([^":]+)(?::[\w-]+)?"$', text, re.MULTILINE):
            including.append(path)
            target = Path(included).name
            # A root-relative link: a code host resolves it from the repository's root, and mkdocs
            # leaves it as it is (a ../ link out of docs/ fails its strict build).
            assert re.search(rf"\]\(/{re.escape(target)}(#[\w-]+)?\)", text), (
                f"{path.relative_to(ROOT)} includes {included} without a link to it"
            )
    assert ROOT / "docs" / "getting-started.md" in including
