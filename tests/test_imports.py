"""``import glovebox`` stays cheap: it loads only what is allowed here.

Everything else (policy YAML, jsonschema, signatures, the HTTP client, the CLI,
the servers) is imported when it is first needed. A module missing from these
lists is a new import-time cost: make it lazy, or add it here on purpose.
"""

from __future__ import annotations

import subprocess
import sys

#: Third-party distributions (top-level import names) that ``import glovebox`` may load.
THIRD_PARTY = {
    "wasmtime",  # the engine: every call needs it
    "pydantic",  # the models of manifests, grants and policies
    "pydantic_core",
    "annotated_types",
    "typing_extensions",
    "typing_inspection",
}

#: Loaded when first needed, never by ``import glovebox``.
LAZY = {
    "openapi_spec_validator",
    "graphql",
    "yaml",
    "jsonschema",
    "referencing",
    "regex",
    "cryptography",
    "httpx",
    "click",
    "mcp",
    "starlette",
    "uvicorn",
    "opentelemetry",  # spans only when a tracer provider is configured (glovebox.telemetry._tracing never imports it)
    "ray",
}

#: Standard-library packages that only the servers, the HTTP client or the CLI need.
STDLIB_NOT_AT_IMPORT = {"asyncio", "ssl", "http", "xml", "unittest"}

#: The package's own modules that ``import glovebox`` may load.
GLOVEBOX = {
    "glovebox",
    "glovebox.runtime._admission",
    "glovebox.engine._allocation",
    "glovebox.audit._log",
    "glovebox.audit._writer",
    "glovebox.audit._fold",
    "glovebox.audit._queries",
    "glovebox.audit._rowform",
    "glovebox.audit._chain",
    "glovebox.audit._journal",
    "glovebox.audit._foldproc",
    "glovebox.toolchains._base",
    "glovebox.toolchains._build",
    "glovebox.toolchains._registry",
    "glovebox.telemetry._calllog",
    "glovebox.sandbox._callstate",
    "glovebox.model._checks",
    "glovebox.sandbox._compute",
    "glovebox.engine._codegen",
    "glovebox.engine._compile",
    "glovebox.registry._compiled",
    "glovebox.registry._exports",
    "glovebox.sandbox._typed",
    "glovebox.sandbox._wasi",
    "glovebox.capabilities.files",
    "glovebox.sandbox._wittypes",
    "glovebox.sandbox._witvalues",
    "glovebox.schema._ecmaregex",
    "glovebox.engine._engine",
    "glovebox.engine._settings",
    "glovebox.core._errors",
    "glovebox.integrations._export",
    "glovebox.sandbox._fastcall",
    "glovebox.core._frozen",
    "glovebox.core._carried",
    "glovebox.runtime._gate",
    "glovebox.model._grants",
    "glovebox.core._jsonlimits",
    "glovebox.sandbox._host",
    "glovebox.sandbox._hostabi",
    "glovebox.registry._keyring",
    "glovebox.model._manifest",
    "glovebox.importers",  # the public import_openapi/import_graphql; the parsers load lazily
    "glovebox.importers._common",  # names, servers and the spec reader: re, pathlib and the model
    "glovebox.importers._fragment",
    "glovebox.importers._importresult",
    "glovebox.schema._linear",
    "glovebox.schema._objectroot",
    "glovebox.sandbox._outcome",
    "glovebox.scale._procpool",
    "glovebox.scale._procwire",  # what ProcessPool sends its workers: json and the JSON rules only
    "glovebox.registry._registration",
    "glovebox.registry._registry",
    "glovebox.model._result",
    "glovebox.runtime._runtime",
    # The call pipeline: the call object, its handlers and executors (the layers below, nothing heavy).
    "glovebox.runtime._call",
    "glovebox.runtime._record",
    "glovebox.runtime.handlers",
    *(
        f"glovebox.runtime.handlers._{name}"
        for name in (
            "admission",
            "approvals",
            "attempts",
            "audit",
            "breakers",
            "checks",
            "compute",
            "output",
            "policy",
            "resolve",
            "scan",
            "tracing",
            "validate",
        )
    ),
    "glovebox.runtime.executors",
    "glovebox.capabilities._scan",  # the secret scan every call runs: re, base64 and math only
    *(f"glovebox.runtime.executors._{name}" for name in ("base", "fake", "remote", "wasm", "workers")),
    "glovebox.sandbox._sandbox",
    "glovebox.schema._schemarules",
    "glovebox.schema._schemas",
    "glovebox.core._settings",
    "glovebox.registry._signing",
    "glovebox.storage._sqlite",
    "glovebox.storage._staging",
    "glovebox.engine._ticker",
    "glovebox.toolchains._binaries",
    "glovebox.telemetry._tracing",
    "glovebox.sandbox._validate",
    "glovebox.storage._walindex",
    "glovebox.runtime._wasmparts",
    "glovebox.core._world",
    "glovebox.capabilities",
    # The capability registry and the built-ins' declarations (models and host-function names; their
    # clients, parsers and drivers load only when a call is granted them).
    "glovebox.capabilities._bind",
    "glovebox.capabilities.http",
    "glovebox.capabilities.client",
    "glovebox.capabilities.kv",
    "glovebox.capabilities.sql",
    "glovebox.model._capability",
    "glovebox.model._grantrules",
    "glovebox.model._rules",
    "glovebox.policy",
    "glovebox.policy._approvals",
    "glovebox.policy._checker",
    "glovebox.policy._loader",
    "glovebox.policy._models",
    "glovebox.policy._patterns",
    "glovebox.policy._quotas",
    "glovebox.policy._guards",
    "glovebox.guards",  # the breakers' board: sqlite3 and mmap, both light
    "glovebox.guards._breakers",
    "glovebox.runtime._retry",
    "glovebox.runtime._checks",
    "glovebox.core",
    "glovebox.core._canonical",
    "glovebox.core._version",
    "glovebox.storage",
    "glovebox.schema",
    "glovebox.model",
    "glovebox.telemetry",
    "glovebox.engine",
    "glovebox.toolchains",
    "glovebox.sandbox",
    "glovebox.registry",
    "glovebox.audit",
    "glovebox.audit._row",
    "glovebox.runtime",
    "glovebox.runtime._envelope",
    "glovebox.runtime._backend",
    "glovebox.scale._factory",
    "glovebox.scale",
    "glovebox.integrations",
    # Code mode (Runtime.run): stdlib, wasmtime and what the runtime loads already.
    "glovebox.runs",
    "glovebox.runs._attempt",
    "glovebox.runs._claims",
    "glovebox.runs._component",
    "glovebox.runs._env",
    "glovebox.runs._gc",
    "glovebox.runs._host",
    "glovebox.runs._journal",
    "glovebox.runs._leases",
    "glovebox.runs._records",
    "glovebox.runs._result",
    "glovebox.runs._rollback",
    "glovebox.runs._drift",
    "glovebox.runs._compensations",
    "glovebox.runs._runner",
    "glovebox.runs._schema",
    "glovebox.runs._seal",
    "glovebox.runs._store",
    "glovebox.runs._tools",
    "glovebox.runs._types",
    "glovebox.runtime._coderun",
    "glovebox.runtime._runrollback",  # rollback_run
    "glovebox.runtime._runreplay",  # replay_run
    "glovebox.runtime._runsave",  # save_run
    "glovebox.runtime.executors._program",  # saved programs' calls
    "glovebox.runtime._runbundle",  # export_run, verify_run_bundle (cryptography only when they run)
    "glovebox.runtime._runenv",
}


def modules_loaded_by(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` that it did not hold before."""
    script = f"import sys; before = set(sys.modules); {code}; print(' '.join(sorted(set(sys.modules) - before)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(result.stdout.split())


def _top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def _third_party(modules: set[str]) -> set[str]:
    return {
        name
        for name in _top_level(modules)
        if name not in sys.stdlib_module_names and not name.startswith(("_sysconfigdata", "glovebox"))
    }


def test_import_loads_only_allowed_third_party_packages() -> None:
    loaded = _third_party(modules_loaded_by("import glovebox"))
    assert loaded <= THIRD_PARTY, sorted(loaded - THIRD_PARTY)
    assert "wasmtime" in loaded  # the check sees what it should


def test_import_loads_only_allowed_glovebox_modules() -> None:
    loaded = {name for name in modules_loaded_by("import glovebox") if name.split(".")[0] == "glovebox"}
    assert loaded <= GLOVEBOX, sorted(loaded - GLOVEBOX)


def test_import_leaves_server_and_client_parts_of_the_standard_library_alone() -> None:
    loaded = _top_level(modules_loaded_by("import glovebox"))
    assert not loaded & STDLIB_NOT_AT_IMPORT, sorted(loaded & STDLIB_NOT_AT_IMPORT)


def test_lazy_packages_arrive_when_first_needed() -> None:
    code = (
        "import glovebox, glovebox.policy;"
        "glovebox.policy.parse_policy('version: 1');"
        "glovebox.Manifest(name='t', input_schema={'type': 'string', 'pattern': '^a'})"
    )
    loaded = _third_party(modules_loaded_by(code))
    wanted = {"yaml", "jsonschema", "referencing", "regex"}
    assert wanted <= loaded
    assert not loaded & (LAZY - wanted)


def test_glovebox_ray_without_the_extra_names_it() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"  # as if ray were not installed
        "try:\n    import glovebox.ray\nexcept ImportError as exc:\n    print(exc)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'glovebox-runtime[ray]'" in result.stdout
