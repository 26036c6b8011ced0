"""An upstream on 127.0.0.1 that holds requests until a test lets them go (a busy worker, a full bound)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Held(ThreadingHTTPServer):
    """The server: ``arrived`` is released as each held request comes in; ``gate`` lets them all go."""

    daemon_threads = True
    block_on_close = False
    gate: threading.Event
    arrived: threading.Semaphore


@contextmanager
def holding(handler: type[BaseHTTPRequestHandler]) -> Iterator[Held]:
    """A :class:`Held` of ``handler`` on a free port, serving on a daemon thread until the block ends."""
    httpd = Held(("127.0.0.1", 0), handler)
    httpd.gate, httpd.arrived = threading.Event(), threading.Semaphore(0)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.gate.set()
        httpd.shutdown()
        httpd.server_close()
