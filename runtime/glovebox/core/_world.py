"""The names of the ``glovebox:tool@0.1.0`` world, shared by building, validating and running.

A tool exports ``call: func(input: string) -> result<string, string>`` and
imports the host interface ``host`` and those of the registered capabilities
(``glovebox.model._capability``: ``sql``, ``kv``, a plug-in's), each with the
functions its capability declares. Guests built on a WASI libc (Python) may also
import the WASI 0.2.x interfaces in ``WASI_INTERFACES``, which the sandbox links
with nothing granted.
"""

from __future__ import annotations

import re

__all__ = [
    "EXPORT_NAME",
    "HOST_INTERFACE",
    "LOG_LEVELS",
    "OOM_MARKER",
    "RUN_FUNCTIONS",
    "RUN_INTERFACE",
    "SQL_INTERFACE",
    "WASI_INTERFACES",
    "WRONG_TYPES",
    "is_wasi_import",
]

#: The host's own interface (``log``, and the ``http`` capability's ``http-fetch``).
HOST_INTERFACE = "glovebox:tool/host@0.1.0"
#: The SQL interface: a statement on a database alias, checked on the host, enforced by the engine.
SQL_INTERFACE = "glovebox:tool/sql@0.1.0"
#: The host calls of a code-mode run's program (``guest/js/runner.wit``): linked for the code
#: runner of ``Runtime.run`` only, never for a tool (a tool importing it is refused at registration).
RUN_INTERFACE = "glovebox:tool/run@0.1.0"
#: The functions of ``RUN_INTERFACE``.
RUN_FUNCTIONS = frozenset({"host-call"})
#: The function every tool exports.
EXPORT_NAME = "call"
#: The levels of the ``log`` host function (anything else is logged as ``info``).
LOG_LEVELS = ("debug", "info", "warn", "error")
#: What a guest SDK logs (at level error) just before it traps for want of memory.
OOM_MARKER = "glovebox: out of memory"
#: What a host function's trap says when a component imported it with other types than the world's.
WRONG_TYPES = "glovebox: host function imported with other types than the glovebox world's"

#: The WASI 0.2.x interfaces a component may import. They are linked with an
#: empty WasiConfig: no preopened directories, no environment or arguments, stdio
#: discarded, every socket address refused; clocks and randomness work.
WASI_INTERFACES = frozenset(
    {
        "wasi:cli/environment", "wasi:cli/exit", "wasi:cli/stdin", "wasi:cli/stdout", "wasi:cli/stderr",
        "wasi:cli/terminal-input", "wasi:cli/terminal-output", "wasi:cli/terminal-stdin",
        "wasi:cli/terminal-stdout", "wasi:cli/terminal-stderr",
        "wasi:io/error", "wasi:io/poll", "wasi:io/streams",
        "wasi:clocks/monotonic-clock", "wasi:clocks/wall-clock",
        "wasi:random/random", "wasi:random/insecure", "wasi:random/insecure-seed",
        "wasi:filesystem/types", "wasi:filesystem/preopens",
        "wasi:sockets/network", "wasi:sockets/instance-network", "wasi:sockets/tcp",
        "wasi:sockets/tcp-create-socket", "wasi:sockets/udp", "wasi:sockets/udp-create-socket",
        "wasi:sockets/ip-name-lookup",
    }
)  # fmt: skip
_WASI_VERSIONED = re.compile(r"^(wasi:[a-z-]+/[a-z-]+)@0\.2\.\d+$")


def is_wasi_import(name: str) -> bool:
    """Whether ``name`` is one of the WASI 0.2.x interfaces the sandbox links."""
    match = _WASI_VERSIONED.match(name)
    return match is not None and match.group(1) in WASI_INTERFACES
