"""A small stdio MCP server for the tests (run by glovebox as a local server, `import mcp --command`).

Its tools report what the process sees (pid, working directory, environment),
do slow work with progress, remember whether a call was cancelled, crash on
demand, and probe the sandbox: read /etc/shadow, write outside the working
directory, open a socket to a host, fetch a URL through whatever proxy its
environment names.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("stdio-lab")


@server.tool()
def whoami() -> dict[str, object]:
    """What this process is and sees."""
    return {
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "env": sorted(os.environ),
        "token": os.environ.get("LAB_TOKEN", ""),
    }


@server.tool()
def remember(note: str) -> int:
    """Keep a note in this process's memory; answer how many it holds."""
    NOTES.append(note)
    return len(NOTES)


NOTES: list[str] = []


@server.tool()
async def work(seconds: float, ctx: Context) -> str:
    """Work for ``seconds``, reporting progress every 0.25 s; a cancelled call leaves a mark in the cwd."""
    steps = max(int(seconds / 0.25), 1)
    try:
        for step in range(steps):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(step + 1, steps)
    except anyio.get_cancelled_exc_class():
        Path("cancelled").write_text("yes")
        raise
    return "done"


@server.tool()
async def silent(seconds: float) -> str:
    """Work for ``seconds`` without reporting progress."""
    await anyio.sleep(seconds)
    return "done"


@server.tool()
def was_cancelled() -> bool:
    """Whether a ``work`` call of this working directory was cancelled."""
    return Path("cancelled").exists()


@server.tool()
def crash() -> str:
    """Exit at once."""
    os._exit(3)


@server.tool()
def huge(size: int) -> str:
    """A long text."""
    return "x" * size


@server.tool()
def probe(outside: str, host: str, port: int) -> dict[str, str]:
    """Try what a sandbox must refuse; each outcome is "ok" or the error's name."""
    outcomes: dict[str, str] = {}
    outcomes["read_shadow"] = _try(lambda: Path("/etc/shadow").read_text())
    outcomes["write_outside"] = _try(lambda: Path(outside).write_text("escaped"))
    outcomes["write_inside"] = _try(lambda: Path("inside.txt").write_text("fine"))
    outcomes["connect"] = _try(lambda: socket.create_connection((host, port), timeout=2).close())
    return outcomes


@server.tool()
def fetch(url: str, host: str = "") -> dict[str, object]:
    """GET ``url`` with urllib (which honours HTTP_PROXY and HTTPS_PROXY), with ``host`` as its Host header
    when given: its status and body, or the error."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return {"status": response.status, "body": response.read().decode()[:300]}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": exc.read().decode()[:300]}
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


@server.tool()
def fetch_all(urls: list[str], authorization: str = "") -> list[dict[str, object]]:
    """GET each of ``urls`` in turn (as ``fetch``), with ``authorization`` as its Authorization header when given."""
    import urllib.error
    import urllib.request

    answers: list[dict[str, object]] = []
    for url in urls:
        request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answers.append({"status": response.status, "body": response.read().decode()[:300]})
        except urllib.error.HTTPError as exc:
            answers.append({"status": exc.code, "body": exc.read().decode()[:300]})
        except OSError as exc:
            answers.append({"error": f"{type(exc).__name__}: {exc}"[:300]})
    return answers


def _try(action: object) -> str:
    try:
        action()  # type: ignore[operator]
    except OSError as exc:
        return type(exc).__name__
    return "ok"


if __name__ == "__main__":
    sys.exit(server.run())
