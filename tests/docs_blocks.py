"""Run the code blocks of README.md and docs/ as a reader would, and compare what they print.

A page's blocks run in order, in a work directory of their own where ``guest``,
``policies`` and ``examples`` of the checkout are linked (as in a checkout), with
``HOME`` pointing into it (so the default ``GLOVEBOX_HOME`` is a fresh one) and a
``PATH`` of the venv's ``bin`` and the system's ``/usr/bin:/bin`` only.

What a block is, by its fence and the HTML comment on the line before it:

- ```` ```console ````: every ``$ command`` (continued by a trailing ``\\``) runs in
  bash; the lines after it, up to the next ``$``, are what it must print (stdout and
  stderr together). ``…`` matches any text within a line; a line that is only ``…``
  matches any number of lines; a command followed by no lines is not compared. A
  command must exit 0 unless its comment says ``# exit N``. Variables exported in
  one block are set in the page's later blocks. ``&`` jobs still running at the end
  of a block are killed.
- ```` ```python ````: written to a file and run with the venv's Python; it must
  exit 0. When the next block is a ```` ```text ```` block marked
  ``<!-- output -->``, that is what it must print (``…`` as above), and it
  must print nothing on stderr (a warning the page does not show).
- ``<!-- file: PATH -->`` before any block: its text is written to ``PATH`` in the
  work directory first (a tool's source, a manifest, a policy).
- ``<!-- illustrative: REASON -->``: not run. The reason is required.
- ``<!-- setup -->`` before a console block: it installs glovebox; it runs only when
  the quick start is tried in a fresh copy (tests/test_docs_quickstart.py).

One rewrite is made, and only in commands: the port ``8080`` becomes a free port of
127.0.0.1, so a page's server cannot collide with anything else on the machine.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINKED = ("guest", "policies", "examples")
MARKER = "@@glovebox-docs-exit@@"
DOC_PORT = "8080"


@dataclass
class Block:
    """One fenced block of a page and the directives before it."""

    page: str
    line: int
    lang: str
    text: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang in {"console", "python"} and "illustrative" not in self.directives


_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>[^`]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*(?P<name>[a-z-]+)(?::\s*(?P<value>.*?))?\s*-->\s*$")


def parse_blocks(markdown: str, page: str) -> list[Block]:
    """The fenced blocks of ``markdown``, each with the directives written on the lines just before it."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = len(match["indent"]), match["fence"]
        lang = match["info"].strip().split(" ")[0]
        directives: dict[str, str] = {}
        j = i - 1
        while j >= 0 and (directive := _DIRECTIVE.match(lines[j])):
            directives[directive["name"]] = directive["value"] or ""
            j -= 1
        body, i = [], i + 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:])
            i += 1
        blocks.append(Block(page, i - len(body), lang, "\n".join(body) + "\n", directives))
        i += 1
    return blocks


@dataclass
class Command:
    line: str
    expected: list[str]
    exit_code: int


def parse_console(text: str) -> list[Command]:
    """The ``$`` commands of a console block with the output shown after each."""
    commands: list[Command] = []
    lines = text.rstrip("\n").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            raise ValueError(f"console output before any command: {line!r}")
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command + "\n" + lines[i]
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        code = re.search(r"#.*\bexit (\d+)", command)
        commands.append(Command(command, expected, int(code[1]) if code else 0))
    return commands


def output_matches(expected: list[str], actual: str) -> bool:
    """Whether ``actual`` is ``expected`` line by line, ``…`` matching any text (a lone ``…``: any lines)."""
    parts = []
    for line in expected:
        if line.strip() == "…":
            parts.append(r"(?:.*\n)*?")
        else:
            parts.append(r".*?".join(re.escape(piece) for piece in line.rstrip().split("…")) + r"[ \t]*\n")
    text = "".join(f"{line.rstrip()}\n" for line in actual.rstrip("\n").splitlines())
    return re.fullmatch("".join(parts), text) is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_in_group(
    argv: list[str], block: Block, timeout_s: float, *, cwd: Path, env: dict[str, str], merge: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run one block in its own process group, and leave nothing of it running.

    A block that outlives ``timeout_s`` (a server a page starts in the foreground) fails with its output, and
    everything it started is killed with it, not only its shell; so is whatever it left in the background.
    """
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
        message = f"{block.where}: still running after {timeout_s:g} s, so it was stopped:\n{stdout}"
        raise AssertionError(message) from None
    finally:
        _kill_group(proc.pid)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr or "")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Page:
    """A work directory and the environment a page's blocks share."""

    def __init__(self, work: Path, bin_dir: Path, *, link_checkout: bool = True, cache: Path | None = None) -> None:
        self.work = work
        self.bin_dir = bin_dir
        work.mkdir(parents=True, exist_ok=True)
        if link_checkout:
            for name in LINKED:
                if not (work / name).exists():
                    (work / name).symlink_to(ROOT / name)
        (work / "user").mkdir(exist_ok=True)
        self.env = {
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "HOME": str(work / "user"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        if cache is not None:  # Python builds are cached by content; the key makes sharing safe
            self.env["XDG_CACHE_HOME"] = str(cache)
        self.env_file = work / ".docs-env.sh"
        self.count = 0

    def write_file(self, block: Block) -> None:
        path = self.work / block.directives["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text, encoding="utf-8")

    def run_console(self, block: Block, timeout_s: float = 300) -> None:
        commands = parse_console(block.text)
        port = str(free_port())
        script = ["set +e", f"[ -f {self.env_file} ] && . {self.env_file}"]
        for command in commands:
            script += [command.line.replace(DOC_PORT, port), f"printf '\\n{MARKER} %d\\n' $?"]
        script += [f"export -p > {self.env_file}", "kill $(jobs -p) 2>/dev/null", "wait 2>/dev/null", "true"]
        proc = run_in_group(
            ["/bin/bash", "-c", "\n".join(script)], block, timeout_s, cwd=self.work, env=self.env, merge=True
        )
        pieces = re.split(rf"\n?{MARKER} (\d+)\n", proc.stdout)
        outputs, codes = pieces[0:-1:2], [int(code) for code in pieces[1::2]]
        assert len(codes) == len(commands), f"{block.where}: the block did not run to its end:\n{proc.stdout}"
        for command, output, code in zip(commands, outputs, codes, strict=True):
            assert code == command.exit_code, (
                f"{block.where}: `{command.line}` exited {code}, not {command.exit_code}:\n{output}"
            )
            if command.expected and not output_matches(command.expected, output):
                shown = "\n".join(command.expected)
                raise AssertionError(f"{block.where}: `{command.line}` printed:\n{output}\nthe page shows:\n{shown}")

    def run_python(self, block: Block, expected: Block | None, timeout_s: float = 300) -> None:
        self.count += 1
        script = self.work / f".docs-block-{self.count}.py"
        script.write_text(block.text, encoding="utf-8")
        env = dict(self.env)
        env.pop("PYTHONPATH", None)
        proc = run_in_group([str(self.bin_dir / "python"), script.name], block, timeout_s, cwd=self.work, env=env)
        assert proc.returncode == 0, f"{block.where}: exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        if expected is not None:
            lines = expected.text.rstrip("\n").splitlines()
            shown = expected.text
            message = f"{block.where}: printed:\n{proc.stdout}\nthe page shows:\n{shown}"
            assert output_matches(lines, proc.stdout), message
            assert proc.stderr == "", f"{block.where}: printed on stderr what the page does not show:\n{proc.stderr}"

    def run(self, blocks: list[Block], *, setup: bool = False) -> int:
        """Run ``blocks`` in order; answer how many ran."""
        ran = 0
        for index, block in enumerate(blocks):
            if "file" in block.directives:
                self.write_file(block)
                continue
            if not block.runs or ("setup" in block.directives and not setup):
                continue
            if block.lang == "console":
                self.run_console(block)
            else:
                after = blocks[index + 1] if index + 1 < len(blocks) else None
                self.run_python(block, after if after is not None and "output" in after.directives else None)
            ran += 1
        return ran


def pages() -> list[Path]:
    """README.md and every page of docs/, in a stable order."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def page_blocks(path: Path) -> list[Block]:
    return parse_blocks(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))


def venv_bin() -> Path:
    return Path(sys.executable).parent


def copy_checkout(dest: Path) -> None:
    """The tracked files of the checkout (and the ones not committed yet), as a fresh clone would have them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


__all__ = [
    "Block",
    "Page",
    "copy_checkout",
    "output_matches",
    "page_blocks",
    "pages",
    "parse_blocks",
    "parse_console",
    "venv_bin",
]
