"""What every framework example shares: a Runtime in a fresh home with the calc example tool."""

from __future__ import annotations

import tempfile
from pathlib import Path

import glovebox

SOURCE = Path(__file__).resolve().parent.parent / "guest" / "examples" / "calc" / "tool.c"


def runtime() -> glovebox.Runtime:
    """Build guest/examples/calc (C -> wasm component) and register it in a temporary home."""
    home = Path(tempfile.mkdtemp(prefix="glovebox-example-"))
    rt = glovebox.Runtime(home=home)
    rt.register(glovebox.build(SOURCE, home / "calc.wasm"))
    return rt
