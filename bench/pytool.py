"""Baseline tool: JSON on stdin -> text statistics as JSON on stdout.

Run once per call by bench_call.py as ``python -I bench/pytool.py`` (the
"Python subprocess per call" baseline).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from logic import handle  # noqa: E402


def main() -> int:
    """Read one JSON document from stdin, write the result to stdout."""
    try:
        payload = json.loads(sys.stdin.read())
    except json.JSONDecodeError as exc:
        json.dump({"error": f"invalid JSON: {exc}"}, sys.stdout)
        return 1
    result = handle(payload)
    json.dump(result, sys.stdout)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
