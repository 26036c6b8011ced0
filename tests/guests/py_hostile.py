"""A hostile Python guest: each attack tries to reach past the sandbox or exhaust it.

The imports the build refuses (socket, threading, ...) are reached through
importlib, as an attacker would: the build check is a courtesy, the sandbox
is the boundary.
"""

import importlib
import os
from typing import Literal

from glovebox_guest import tool


@tool
def attack(
    what: Literal["open", "listdir", "environ", "socket", "connect", "loop", "memory", "exit", "crash"],
) -> object:
    """Try one escape or exhaustion and report what the sandbox let through."""
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
    if what == "memory":
        hoard = []
        while True:
            hoard.append(bytearray(1 << 20))
    if what == "exit":
        raise SystemExit(3)
    return 1 // 0
