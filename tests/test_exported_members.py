"""The public API is exactly ``__all__``, in ``glovebox`` and its public subpackages (httpx's habit)."""

import types

import pytest

import glovebox
import glovebox.integrations
import glovebox.policy
import glovebox.servers

PACKAGES = [glovebox, glovebox.integrations, glovebox.policy, glovebox.servers]
#: Members a package serves from a module ``__getattr__``, so that importing it stays cheap.
LAZY = {"glovebox.servers": {"create_app"}}


def _public(package: types.ModuleType) -> set[str]:
    # Subpackages and submodules (glovebox.capabilities, typing) are namespaces, not members of the API.
    return {
        name
        for name in dir(package)
        if not name.startswith("_") and not isinstance(getattr(package, name), types.ModuleType)
    }


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.__name__)
def test_all_exports_exist_and_are_sorted(package: types.ModuleType) -> None:
    names = [name for name in package.__all__ if name != "__version__"]
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    for name in package.__all__:
        assert hasattr(package, name), name


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.__name__)
def test_public_members_are_all_listed(package: types.ModuleType) -> None:
    lazy = LAZY.get(package.__name__, set())
    assert _public(package) | lazy == set(package.__all__) - {"__version__"}


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.__name__)
def test_exported_objects_claim_the_package(package: types.ModuleType) -> None:
    for name in package.__all__:
        member = getattr(package, name)
        if hasattr(member, "__module__"):
            assert member.__module__.startswith("glovebox"), name
