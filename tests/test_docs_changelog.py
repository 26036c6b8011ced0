"""A change to the public surface comes with a CHANGELOG.md line.

The surface (``glovebox.__all__``, every command and option of the CLI, every error
code) is recorded in tests/surface.txt. A change to the code that is not recorded
fails here with what changed and what to do; an item added or removed since the last
release that CHANGELOG.md does not name fails too, and tests/docs_surface.py will
not rewrite the record until it is named.
"""

from __future__ import annotations

import re
from pathlib import Path

from .docs_surface import (
    BASELINE,
    CHANGELOG,
    HEADER,
    RELEASE,
    SNAPSHOT,
    named_in_changelog,
    read,
    surface,
    unnamed_changes,
)

ROOT = Path(__file__).resolve().parents[1]


def test_the_recorded_surface_is_the_codes() -> None:
    live, recorded = surface(), read(SNAPSHOT)
    added = sorted(set(live) - set(recorded))
    removed = sorted(set(recorded) - set(live))
    assert not (added or removed), (
        "the public surface changed: "
        + "; ".join([*(f"+ {item}" for item in added), *(f"- {item}" for item in removed)])
        + ". Add a line to CHANGELOG.md under [Unreleased] naming it, then run `python tests/docs_surface.py`."
    )


def test_every_change_since_the_release_is_named_in_the_changelog() -> None:
    missing = unnamed_changes(CHANGELOG.read_text(encoding="utf-8"), surface())
    assert not missing, "CHANGELOG.md does not name: " + "; ".join(missing)


def test_the_record_says_what_to_do_when_it_changes() -> None:
    text = SNAPSHOT.read_text(encoding="utf-8")
    assert text.startswith(HEADER) and "CHANGELOG.md" in HEADER
    assert BASELINE.is_file() and read(BASELINE), f"the surface of release {RELEASE} is missing"


def test_the_changelog_keeps_its_format() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.MULTILINE)
    assert headings[0] == "Unreleased" and RELEASE in headings
    assert re.search(rf"^## \[{re.escape(RELEASE)}\] - \d{{4}}-\d\d-\d\d$", text, re.MULTILINE)
    sections = set(re.findall(r"^### (\w+)", text, re.MULTILINE))
    assert sections <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_a_name_is_matched_only_in_a_code_span() -> None:
    changelog = "- `glovebox call NAME --repeat N`; `Runtime.audit` is a property; `overloaded`; ProcessPool"
    assert named_in_changelog("option glovebox call --repeat", changelog)
    assert named_in_changelog("cli glovebox call", changelog)
    assert named_in_changelog("api Runtime", changelog)
    assert named_in_changelog("code overloaded", changelog)
    assert not named_in_changelog("api ProcessPool", changelog)  # named, but not as code
    assert not named_in_changelog("option glovebox call --principal", changelog)
    assert not named_in_changelog("cli glovebox cal", changelog)


def test_a_new_name_without_its_line_is_caught() -> None:
    live = [*surface(), "api BrandNew", "option glovebox call --brand-new", "code brand_new"]
    missing = unnamed_changes(CHANGELOG.read_text(encoding="utf-8"), live)
    assert sorted(missing) == ["+ api BrandNew", "+ code brand_new", "+ option glovebox call --brand-new"]
