"""The Runtime's OCI verbs (``push``, ``pull``, ``register`` of ``oci://`` and layouts), over :mod:`glovebox.oci`.

Each takes the Runtime through its public face (``registry``, ``registrar``, ``policy``, ``tool``)
and hands the work to :mod:`glovebox.oci`; nothing here talks to a registry itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from ..model._result import ToolInfo
    from ..oci import OciReference

__all__ = ["is_oci_source", "pull", "push", "register_oci", "verify_oci"]


def is_oci_source(source: str | os.PathLike[str]) -> bool:
    """An ``oci://`` reference, or a directory holding an OCI image layout."""
    if isinstance(source, str) and source.startswith("oci://"):
        return True
    path = Path(source)
    return path.is_dir() and (path / "oci-layout").is_file()


def _key_sets_for(runtime: Any, keys: list[str] | None, require: bool) -> Any:
    from ..oci import required_keys

    policy = runtime.policy
    policy_dir = runtime.policy_path.parent if runtime.policy_path is not None else Path.cwd()

    def key_sets_for(ref: OciReference) -> Any:
        return required_keys(policy, policy_dir, ref, list(keys or []), require)

    return key_sets_for


def verify_oci(
    runtime: Any,  # the Runtime (not imported: it imports this module)
    source: str | os.PathLike[str],
    *,
    keys: list[str] | None,
    insecure: bool,
    transport: httpx.BaseTransport | None,
) -> tuple[str, str]:
    from ..oci import verify_source

    text = source if isinstance(source, str) and source.startswith("oci://") else Path(source)
    return verify_source(text, key_sets_for=_key_sets_for(runtime, keys, True), insecure=insecure, transport=transport)


def register_oci(
    runtime: Any,  # the Runtime (not imported: it imports this module)
    source: str | os.PathLike[str],
    *,
    keys: list[str] | None,
    insecure: bool,
    accept_widening: bool,
    transport: httpx.BaseTransport | None,
) -> ToolInfo:
    from ..oci import register_from

    key_sets_for = _key_sets_for(runtime, keys, runtime.require_signatures)
    text = source if isinstance(source, str) and source.startswith("oci://") else Path(source)
    return register_from(
        runtime.registrar,
        runtime.registry,
        runtime.home,
        text,
        key_sets_for=key_sets_for,
        insecure=insecure,
        transport=transport,
        accept_widening=accept_widening,
    )


def push(
    runtime: Any,  # the Runtime (not imported: it imports this module)
    ref: str,
    target: str,
    *,
    key: str | os.PathLike[str] | None,
    insecure: bool,
    transport: httpx.BaseTransport | None,
) -> str:
    from ..oci import push_tool

    info = runtime.tool(ref)
    if info.kind != "wasm":
        raise ValueError(f"{info.name}@{info.version} is a {info.kind} tool: only wasm components are pushed")
    exports, imports = _interfaces(runtime, info)
    return push_tool(
        runtime.registry, info, target, exports=exports, imports=imports, insecure=insecure,
        transport=transport, key_path=key,
    )  # fmt: skip


def _interfaces(runtime: Any, info: ToolInfo) -> tuple[list[str], list[str]]:
    """The component's export and import names (for the artifact's config)."""
    component = runtime._component(info)  # noqa: SLF001 — the compiled component, as the benchmarks read it
    engine = runtime._wasm().shared.engine  # noqa: SLF001
    ctype = component.type
    return sorted(ctype.exports(engine)), sorted(ctype.imports(engine))


def pull(source: str, to: str | os.PathLike[str], *, insecure: bool, transport: httpx.BaseTransport | None) -> str:
    from ..oci import pull_to

    return pull_to(source, Path(to), insecure=insecure, transport=transport)
