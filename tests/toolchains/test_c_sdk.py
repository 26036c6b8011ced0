"""The C SDK's one return convention (0 when a helper did what it says), and the old name kept working."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import glovebox

ROOT = Path(__file__).resolve().parents[2]
#: The one C source that still uses the deprecated name, on purpose.
LEGACY = ROOT / "tests" / "guests" / "legacy_find.c"


def test_a_tool_using_the_deprecated_gb_json_find_builds_and_answers_as_before(
    tmp_path: Path, build_guest: Callable[[str], Path]
) -> None:
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        rt.register(build_guest("legacy_find"), {"name": "legacy", "description": "Old-style C."})
        assert rt.call("legacy", {"name": "ada"}).output == {"name": "ada"}
        missing = rt.call("legacy", {"other": 1})
        assert missing.code == "guest_error" and missing.error is not None and missing.error.message == "no name"


def _code(path: Path) -> str:
    """The C a file holds: all of a source, the ```c blocks of a page (its prose may name the old helper)."""
    text = path.read_text()
    return "\n".join(re.findall(r"```c\n(.*?)```", text, re.S)) if path.suffix == ".md" else text


def test_every_shipped_c_source_and_doc_uses_gb_json_get() -> None:
    places = [*ROOT.glob("guest/**/*.c"), *ROOT.glob("tests/guests/*.c"), *ROOT.glob("examples/**/*.c")]
    places += [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), ROOT / "runtime/glovebox/toolchains/_scaffold.py"]
    old = [str(p.relative_to(ROOT)) for p in places if p != LEGACY and re.search(r"gb_json_find\(", _code(p))]
    assert old == []
    assert "gb_json_get(" in _code(ROOT / "README.md")
    header = (ROOT / "guest" / "c" / "glovebox.h").read_text()
    assert re.search(r'GB_DEPRECATED\("use gb_json_get[^"]*"\)\nstatic int gb_json_find\(', header)
