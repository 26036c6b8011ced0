"""``import glovebox`` stays cheap: no servers, no HTTP client, no CLI."""

import subprocess
import sys


def test_import_does_not_pull_heavy_modules() -> None:
    code = "import sys, glovebox; print(' '.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    for heavy in (
        "click",
        "httpx",
        "glovebox._cli",
        "glovebox._demo",
        "asyncio.unix_events",
        "glovebox.servers",
        "mcp",
        "starlette",
        "uvicorn",
    ):
        assert heavy not in loaded, heavy
