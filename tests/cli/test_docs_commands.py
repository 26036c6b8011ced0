"""Every ``glovebox ...`` command line the docs print parses as written, and ``--home``/``--policy``
work after the subcommand as well as before it.

The command lines come from the console blocks of README.md and docs/ (illustrative
ones included: a reader copies those too). Each is split as bash would split it,
shell variables become a placeholder, and the real click parser of the ``glovebox``
group parses the real arguments, down to the command that would run, without
running it: a server would not stop, a build would take a minute. Files the line
names are created empty in a scratch directory first, as a reader would have them.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from glovebox.cli._main import cli

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from docs_blocks import page_blocks, pages, parse_console  # noqa: E402

#: What ends one command of a bash line (a pipe, a list, a background job, a redirection).
_SEPARATORS = {"|", "&&", "||", ";", "&"}
#: A redirection and its target (``> out.json``, ``2>&1``, ``< in.json``), taken out before splitting.
_REDIRECT = re.compile(r"\s\d*(>>?&\d+|>>?\s*[^\s|&;]+|<\s*[^\s|&;]+)")
_PATHLIKE = re.compile(r"^[\w.-]+(/[\w.-]+)*\.[a-z]+$")


def _readme_and_pages() -> list[Path]:
    return [ROOT / "README.md", *pages()]


def documented_commands() -> list[tuple[str, list[str]]]:
    """(where, argv after ``glovebox``) for every ``glovebox`` command in a console block."""
    found = []
    for path in _readme_and_pages():
        for block in page_blocks(path):
            if block.lang != "console":
                continue
            for command in parse_console(block.text):
                for argv in _glovebox_argvs(command.line):
                    found.append((block.where, argv))
    return found


def _glovebox_argvs(line: str) -> list[list[str]]:
    line = _REDIRECT.sub(" ", line.replace("\\\n", " "))
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    argvs: list[list[str]] = [[]]
    for word in lexer:
        if word in _SEPARATORS:
            argvs.append([])
        else:
            argvs[-1].append(word)
    return [[_placeholder(w) for w in argv[1:]] for argv in argvs if argv[:1] == ["glovebox"]]


def _placeholder(word: str) -> str:
    """A shell variable (``$ID``, ``"$ID"`` after shlex) becomes a value of the same shape."""
    return re.sub(r"\$\{?\w+\}?", "ID1", word)


def parse_only(argv: list[str]) -> click.Context:
    """Parse ``argv`` with the ``glovebox`` group down to its last command; run nothing."""
    ctx = cli.make_context("glovebox", list(argv))
    command: click.Command = cli
    while isinstance(command, click.Group):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not rest:
            break
        name, sub, args = command.resolve_command(ctx, rest)
        assert sub is not None and name is not None
        ctx = sub.make_context(name, args, parent=ctx)
        command = sub
    return ctx


DOCUMENTED = documented_commands()


def documented_spans() -> list[tuple[str, list[str]]]:
    """(page, argv) for every ``glovebox ...`` code span in prose that is a command line, not a name.

    Usage notation (``[--opt X]``, ``a|b``, ``...``) is the CLI reference's, checked by tests/test_docs.py;
    a span of command names alone (`glovebox approve`) names a command. A placeholder in capitals
    (``ID``, ``--principal P``, ``FILE.ts``) becomes a value of its shape.
    """
    found = []
    for path in _readme_and_pages():
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
        for span in re.findall(r"(?<!`)`(glovebox [^`]+)`(?!`)", text):
            span = " ".join(span.split())
            if re.search(r"[\[|…]|\.\.\.", span):
                continue
            argv = [_placeholder_value(word) for word in shlex.split(span)[1:]]
            if _names_only(argv):
                continue
            found.append((str(path.relative_to(ROOT)), argv))
    return found


def _placeholder_value(word: str) -> str:
    """``N`` is a number, ``D``/``DIR``/``*_HOME`` a folder, any other capitals a file (made empty)."""
    match = re.fullmatch(r"[A-Z][A-Z_]*(\.\w+)?", word)
    if match is None:
        return word
    if word == "N":
        return "2"
    if word in {"D", "DIR"} or word.endswith("HOME"):
        return "a-folder"
    return f"placeholder{match[1] or '.txt'}"


def _names_only(argv: list[str]) -> bool:
    command: click.Command = cli
    for word in argv:
        if not isinstance(command, click.Group) or word not in command.commands:
            return False
        command = command.commands[word]
    return True


SPANS = documented_spans()


def test_the_docs_print_command_lines_to_check() -> None:
    assert len(DOCUMENTED) >= 60
    assert any(argv[:1] == ["serve"] for _, argv in DOCUMENTED)


@pytest.mark.parametrize(("where", "argv"), DOCUMENTED, ids=[f"{w} {' '.join(a)[:40]}" for w, a in DOCUMENTED])
def test_every_documented_command_line_parses(
    where: str, argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for word in argv:
        if _PATHLIKE.match(word) and not word.startswith("."):
            (tmp_path / word).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / word).touch()
    try:
        parse_only(argv)
    except click.UsageError as error:
        pytest.fail(f"{where}: `glovebox {shlex.join(argv)}` is refused: {error.format_message()}")


@pytest.mark.parametrize(("where", "argv"), SPANS, ids=[f"{w} {' '.join(a)[:40]}" for w, a in SPANS])
def test_every_command_line_in_prose_parses(
    where: str, argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    test_every_documented_command_line_parses(where, argv, tmp_path, monkeypatch)


def test_a_wrong_option_fails_the_parse() -> None:
    with pytest.raises(click.NoSuchOption):
        parse_only(["serve", "--polcy", "p.yaml"])


# -- --home and --policy on either side of the command ----------------------------


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), prog_name="glovebox", catch_exceptions=False)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--policy", "p.yaml", "--port", "8080"],
        ["mcp", "--home", "h", "--policy", "p.yaml"],
        ["approvals", "deny", "ID1", "--reason", "no", "--principal", "admin", "--policy", "p.yaml"],
        ["call", "calc", "--home", "h", "--input", "{}"],
        ["runs", "list", "--home", "h"],
    ],
)
def test_home_and_policy_parse_after_the_command(argv: list[str]) -> None:
    root = parse_only(argv).find_root()
    for name in ("home", "policy"):
        if f"--{name}" in argv:
            assert root.params[name] == argv[argv.index(f"--{name}") + 1]


def test_home_after_the_command_is_the_home_used(tmp_path: Path) -> None:
    home = tmp_path / "h"
    before = _run("--home", str(home), "tools", "--json")
    after = _run("tools", "--json", "--home", str(home))
    assert before == after == (0, "[]\n")
    assert home.is_dir()


def test_policy_after_the_command_is_the_policy_used(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.yaml")
    code, output = _run("approvals", "list", "--policy", missing, "--home", str(tmp_path / "h"))
    assert code == 1 and f"cannot read policy {missing}" in output


def test_a_command_with_its_own_policy_option_keeps_it() -> None:
    explain = cli.commands["policy"].commands["explain"]  # type: ignore[attr-defined]
    assert [p.name for p in explain.params].count("policy_file") == 1
    assert sum("--policy" in getattr(p, "opts", ()) for p in explain.params) == 1
