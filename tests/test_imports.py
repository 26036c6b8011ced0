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
    "opentelemetry",  # spans only when a tracer provider is configured (glovebox._tracing never imports it)
    "ray",
}

#: Standard-library packages that only the servers, the HTTP client or the CLI need.
STDLIB_NOT_AT_IMPORT = {"asyncio", "ssl", "http", "xml", "unittest"}

#: The package's own modules that ``import glovebox`` may load.
GLOVEBOX = {
    "glovebox",
    "glovebox._admission",
    "glovebox._allocation",
    "glovebox._audit",
    "glovebox._auditchain",
    "glovebox._auditjournal",
    "glovebox._build",
    "glovebox._calllog",
    "glovebox._callstate",
    "glovebox._compute",
    "glovebox._codegen",
    "glovebox._compile",
    "glovebox._compiled",
    "glovebox._ecmaregex",
    "glovebox._engine",
    "glovebox._enginesettings",
    "glovebox._errors",
    "glovebox._export",
    "glovebox._fastschema",
    "glovebox._fastcall",
    "glovebox._frozen",
    "glovebox._gate",
    "glovebox._grants",
    "glovebox._jsonlimits",
    "glovebox._host",
    "glovebox._hostabi",
    "glovebox._keyring",
    "glovebox._manifest",
    "glovebox.importers",  # the public import_openapi/import_graphql; the parsers load lazily
    "glovebox.importers._fragment",
    "glovebox.importers._importresult",
    "glovebox._objectroot",
    "glovebox._outcome",
    "glovebox._procpool",
    "glovebox._registration",
    "glovebox._registry",
    "glovebox._result",
    "glovebox._runtime",
    "glovebox._sandbox",
    "glovebox._schemarules",
    "glovebox._schemas",
    "glovebox._settings",
    "glovebox._signing",
    "glovebox._sqlite",
    "glovebox._staging",
    "glovebox._ticker",
    "glovebox._toolchain",
    "glovebox._tracing",
    "glovebox._validate",
    "glovebox._walindex",
    "glovebox._wasmparts",
    "glovebox._world",
    "glovebox.capabilities",
    "glovebox.capabilities._rules",
    "glovebox.policy",
    "glovebox.policy._approvals",
    "glovebox.policy._checker",
    "glovebox.policy._loader",
    "glovebox.policy._models",
    "glovebox.policy._patterns",
    "glovebox.policy._quotas",
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
    assert "pip install 'glovebox[ray]'" in result.stdout
