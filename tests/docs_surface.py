"""The public surface, one line per item, as tests/surface.txt records it.

The surface is what users build on: the names in ``glovebox.__all__``, every
``glovebox`` command with its options, and every error code. tests/test_docs_changelog.py
fails when the code and tests/surface.txt differ, and when an item added or removed
since the last release (``RELEASE`` below, ``surface-RELEASE.txt`` beside this file) is not
named in CHANGELOG.md.

``python tests/docs_surface.py`` rewrites tests/surface.txt, and refuses to while a
change is not named in CHANGELOG.md: write the CHANGELOG line first.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "surface.txt"
#: The last release; its surface is kept in ``tests/surface-<RELEASE>.txt`` (move both on a release).
RELEASE = "0.1.0"
BASELINE = ROOT / "tests" / f"surface-{RELEASE}.txt"
CHANGELOG = ROOT / "CHANGELOG.md"
HEADER = """\
# The public surface of glovebox: glovebox.__all__, every command and option, every error code.
# Checked by tests/test_docs_changelog.py. Changed it? Add a line to CHANGELOG.md under
# [Unreleased] naming what changed, then run `python tests/docs_surface.py` to rewrite this file.
"""


def _commands(group: click.Group, prefix: str) -> list[str]:
    lines = []
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        path = f"{prefix}{name}"
        lines.append(f"cli glovebox {path}")
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                lines.append(f"option glovebox {path} {max(param.opts, key=len)}")
        if isinstance(command, click.Group):
            lines += _commands(command, f"{path} ")
    return lines


def surface() -> list[str]:
    """The live surface, sorted, one item a line: ``api NAME``, ``cli glovebox PATH``, ``option ...``, ``code CODE``."""
    import glovebox
    from glovebox.cli._main import cli
    from glovebox.core import _errors

    api = [f"api {name}" for name in glovebox.__all__]
    codes = {cls.code for cls in vars(_errors).values() if isinstance(cls, type) and hasattr(cls, "code")}
    codes |= set(glovebox.ERROR_CODES)
    options = [f"option glovebox {max(p.opts, key=len)}" for p in cli.params if isinstance(p, click.Option)]
    lines = api + _commands(cli, "") + options + [f"code {code}" for code in codes if isinstance(code, str)]
    return sorted(set(lines))


def read(path: Path) -> list[str]:
    """The items of a surface file (its comment lines left out)."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]


def named_in_changelog(item: str, changelog: str) -> bool:
    """Whether CHANGELOG.md names ``item`` in a code span: `Name`, `glovebox.Name`, `glovebox cmd`,
    `glovebox cmd --option ...` (or the option alone in the command's entry), `code`."""
    kind, _, rest = item.partition(" ")
    spans = re.findall(r"`([^`]+)`", changelog)
    if kind == "api":
        return any(re.fullmatch(rf"(glovebox\.)?{re.escape(rest)}(\(.*\)|\..*)?", span) for span in spans)
    if kind == "code":
        return rest in spans
    if kind == "cli":
        return any(span == rest or span.startswith(rest + " ") for span in spans)
    command, _, option = rest.rpartition(" ")
    return any(span.startswith(command) and option in span.split() for span in spans)


def unnamed_changes(changelog: str, live: list[str]) -> list[str]:
    """The items added (+) or removed (-) since the release that CHANGELOG.md does not name."""
    baseline = set(read(BASELINE))
    # An option of a command new since the release comes with the command's own line.
    new_commands = {item[4:] for item in live if item.startswith("cli ") and item not in baseline}
    live = [item for item in live if not (item.startswith("option ") and item[7:].rpartition(" ")[0] in new_commands)]
    changed = [f"+ {item}" for item in live if item not in baseline]
    changed += [f"- {item}" for item in sorted(baseline - set(live))]
    return [change for change in changed if not named_in_changelog(change[2:], changelog)]


if __name__ == "__main__":
    live = surface()
    missing = unnamed_changes(CHANGELOG.read_text(encoding="utf-8"), live)
    if missing:
        sys.stderr.write("CHANGELOG.md does not name these changes yet; add its lines first:\n")
        sys.stderr.write("".join(f"  {change}\n" for change in missing))
        sys.exit(1)
    SNAPSHOT.write_text(HEADER + "\n".join(live) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {SNAPSHOT}\n")
