"""A hostile Python guest: each attack tries to reach past the sandbox or exhaust it.

The imports the build refuses (socket, threading, ...) are reached through
importlib, as an attacker would: the build check is a courtesy, the sandbox
is the boundary.
"""

import importlib
import os
import sys
import time
from typing import Literal

from glovebox_guest import tool


@tool
def attack(
    what: Literal[
        "open",
        "listdir",
        "environ",
        "socket",
        "connect",
        "loop",
        "memory",
        "exit",
        "crash",
        "stdout",
        "stderr",
        "huge",
        "sleep",
    ],
    seconds: float = 30.0,
) -> object:
    """Try one escape or exhaustion and report what the sandbox let through (``sleep``: for ``seconds``)."""
    if what == "open":
        with open("/etc/passwd") as handle:
            return handle.read()
    if what == "listdir":
        return sorted(os.listdir("/"))
    if what == "environ":
        return {"environ": dict(os.environ), "home": os.environ.get("HOME"), "cwd": os.getcwd()}
    if what in ("socket", "connect"):
        socket = importlib.import_module("socket")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if what == "connect":
            sock.connect(("127.0.0.1", 22))
        return "socket created"
    if what == "loop":
        n = 0
        while True:
            n += 1
    if what == "sleep":  # a WASI clock wait: it blocks in the host, where no epoch check runs
        time.sleep(seconds)
        return "slept"
    if what == "memory":
        hoard = []
        while True:
            hoard.append(bytearray(1 << 20))
    if what == "exit":
        raise SystemExit(3)
    if what in ("stdout", "stderr", "huge"):
        return _flood(what)
    return 1 // 0


def _flood(what: str) -> str:
    """Output past every budget: stdout lines past the log budget, one long stderr write, a huge result."""
    if what == "stdout":
        for n in range(3_000):
            print(f"line {n}")
        sys.stdout.flush()
        return "flooded"
    if what == "stderr":  # one write longer than one WASI stdio write takes at once
        sys.stderr.write("é" * 6_000 + "\n")
        sys.stderr.flush()
        return "written"
    return "x" * (4 << 20)
