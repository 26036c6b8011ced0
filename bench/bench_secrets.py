"""What reading a secret costs per call, for each provider, cached and uncached; and the secret scan.

    python bench/bench_secrets.py [--quick]

Each provider reads a real secret: an environment variable, a file, a keyring
entry (keyrings.alt's plaintext file backend, in a temporary folder), a real
command (``/usr/bin/printf``, pinned by digest, and unpinned), an entry of the
encrypted store (AES-GCM, its key in a file), an OAuth connection's access token
(its record read, the token opened from the encrypted store). "uncached" drops the provider's
cache before every read (what the first call after ``ttl_s`` pays); "cached" is
a read within ``ttl_s``. The scan rows time ``SecretScanner`` on a small output
with nothing to find (what every call pays) and on one holding a token.

The connection rows add what a call pays to inject a token (the secret rules read
and the scrubber built, as the HTTP capability does per call) next to ``env``, and
a refresh: the token due, a token endpoint on 127.0.0.1 answering a new one, the
new tokens sealed under the connection's lock.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from glovebox.capabilities._execsecret import file_digest
from glovebox.capabilities._providers import get_secret, provider
from glovebox.capabilities._scan import SecretScanner
from glovebox.capabilities._secrets import Scrubber, load_secrets
from glovebox.capabilities._vault import SecretStore
from glovebox.connections import ConnectionRecord, ConnectionStore, access_token
from glovebox.model._grants import SecretRule


def timed(fn: Callable[[], object], samples: int) -> tuple[float, float]:
    """p50 and p99 of ``fn``, in microseconds."""
    for _ in range(min(samples, 20)):
        fn()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e6)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    quick = parser.parse_args().quick
    fast, slow = (2000, 50) if quick else (20000, 300)
    folder = Path(tempfile.mkdtemp(prefix="glovebox-bench-secrets-"))
    os.environ["GLOVEBOX_HOME"] = str(folder / "home")
    os.environ["BENCH_TOKEN"] = "tok-" + "x" * 36
    (folder / "token").write_text("tok-" + "y" * 36 + "\n")
    SecretStore().set("bench", b"tok-" + b"z" * 36)
    token_url = _token_endpoint()
    record = ConnectionRecord(
        "bench", "default", "http://127.0.0.1", token_url, "client", expires_at=time.time() + 7200
    )
    connections = ConnectionStore()
    connections.save(record, {"access": "tok-" + "c" * 36, "refresh": "refresh-1"})
    refs = {
        "env": "env://BENCH_TOKEN",
        "file": f"file://{folder / 'token'}",
        "encrypted": "encrypted://bench",
        "connection": "connection://bench",
    }
    try:
        import keyring
        from keyrings.alt.file import PlaintextKeyring

        backend = PlaintextKeyring()
        backend.file_path = str(folder / "keyring.cfg")  # type: ignore[misc]
        keyring.set_keyring(backend)
        keyring.set_password("bench", "ci", "tok-" + "k" * 36)
        refs["keyring"] = "keyring://bench/ci"
    except ImportError:
        print("keyring / keyrings.alt not installed: keyring skipped", file=sys.stderr)
    printf = shutil.which("printf")
    if printf:
        refs["exec"] = f"exec://{printf}?arg=tok-exec"
        refs["exec (sha256 pin)"] = f"exec://{printf}?arg=tok-exec&sha256={file_digest(os.path.realpath(printf))}"
    print(f"{'provider':<20} {'uncached p50':>14} {'uncached p99':>14} {'cached p50':>12} {'cached p99':>12}")
    for name, ref in refs.items():
        kind = provider(ref.partition("://")[0])
        get_secret(ref)

        def uncached(ref: str = ref, kind: object = kind) -> None:
            kind.forget()  # type: ignore[attr-defined]
            get_secret(ref)

        samples = slow if name.startswith("exec") else fast
        cold = timed(uncached, samples)
        warm = timed(lambda ref=ref: get_secret(ref), fast)
        print(f"{name:<20} {cold[0]:>11.1f} µs {cold[1]:>11.1f} µs {warm[0]:>9.2f} µs {warm[1]:>9.2f} µs")
    print()
    print(f"{'per call':<36} {'p50':>10} {'p99':>10}")
    for label, source in (
        ("inject env:// (rules + scrubber)", "env://BENCH_TOKEN"),
        ("inject connection://", "connection://bench"),
    ):
        rules = [SecretRule(name="t", source=source, host="api.example.com")]
        p50, p99 = timed(lambda rules=rules: Scrubber(load_secrets(rules, "alice")), fast)
        print(f"{label:<36} {p50:>7.2f} µs {p99:>7.2f} µs")
    times = []
    for _ in range(slow):
        connections.save(record, {})  # due again: expired a second ago
        started = time.perf_counter()
        access_token(connections, "bench", "default")
        times.append((time.perf_counter() - started) * 1e6)
        record = replace(record, expires_at=time.time() - 1)
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(f"{'refresh (loopback token endpoint)':<36} {statistics.median(times):>7.0f} µs {p99:>7.0f} µs")
    scanner = SecretScanner()
    clean = '{"text": "the weather in Paris is mild", "count": 3, "digest": "' + "ab" * 32 + '"}'
    holding = '{"note": "old token ghp_' + "a1" * 18 + '"}'
    print()
    print(f"{'secret scan':<32} {'p50':>10} {'p99':>10}")
    for label, text in (("clean small output (may_hold)", clean), ("output holding a token", holding)):
        p50, p99 = timed(lambda text=text: scanner.may_hold(text) and scanner.redact_text(text), fast)
        print(f"{label:<32} {p50:>7.2f} µs {p99:>7.2f} µs")
    shutil.rmtree(folder, ignore_errors=True)


def _token_endpoint() -> str:
    """A token endpoint on 127.0.0.1 that answers every refresh with new tokens (a thread)."""
    import itertools
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    counter = itertools.count()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("content-length", 0)))
            n = next(counter)
            body = json.dumps(
                {"access_token": f"tok-{n:036d}", "token_type": "Bearer", "expires_in": 3600, "refresh_token": f"r{n}"}
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/token"


if __name__ == "__main__":
    main()
