"""The public API is exactly ``glovebox.__all__`` (httpx's habit)."""

import types

import glovebox


def test_all_exports_exist_and_are_sorted() -> None:
    names = [name for name in glovebox.__all__ if name != "__version__"]
    assert names == sorted(names)
    for name in glovebox.__all__:
        assert hasattr(glovebox, name), name


def test_public_members_are_all_listed() -> None:
    # Subpackages (glovebox.capabilities) are namespaces, not members of the API.
    public = {
        name
        for name in dir(glovebox)
        if not name.startswith("_") and not isinstance(getattr(glovebox, name), types.ModuleType)
    }
    assert public == set(glovebox.__all__) - {"__version__"}


def test_exported_objects_claim_the_package() -> None:
    for name in glovebox.__all__:
        member = getattr(glovebox, name)
        if hasattr(member, "__module__"):
            assert member.__module__.startswith("glovebox"), name
