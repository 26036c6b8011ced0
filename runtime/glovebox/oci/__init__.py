"""Tools as OCI artifacts: push to, pull from and register out of any OCI registry, signatures checked first.

- :mod:`._reference` — ``oci://HOST/REPO:TAG|@sha256:...`` parsed (http only for loopback or ``insecure``).
- :mod:`._client` — the distribution API over httpx: auth, redirects, size caps, digests checked.
- :mod:`._auth` — registry credentials from docker ``config.json`` or the environment, never the agent.
- :mod:`._artifact` — the CNCF Wasm OCI artifact layout, plus glovebox's manifest layer.
- :mod:`._cosign` — cosign-compatible key signatures (ECDSA P-256, simple signing, ``.sig`` tags).
- :mod:`._layout` — an OCI image layout on disk (air-gapped homes).
- :mod:`._ops` — push, pull and register, in the order that refuses before anything runs.

Imports: core, model, sandbox's header check, policy's models, and the registry
(a pulled artifact registers through the registry's own ``Registrar``); never the
runtime or a surface. The Runtime reaches this package only on push, pull or an
``oci://`` registration (``import glovebox`` does not load httpx for it).
"""

from ._artifact import CONFIG_MEDIA_TYPE, TOOL_MANIFEST_MEDIA_TYPE, WASM_MEDIA_TYPE
from ._cosign import generate_keypair as generate_oci_keypair
from ._ops import ProvenanceStore, pull_to, push_tool, register_from, required_keys, sign_reference, verify_source
from ._reference import OciReference

__all__ = [
    "CONFIG_MEDIA_TYPE",
    "TOOL_MANIFEST_MEDIA_TYPE",
    "WASM_MEDIA_TYPE",
    "OciReference",
    "ProvenanceStore",
    "generate_oci_keypair",
    "pull_to",
    "push_tool",
    "register_from",
    "required_keys",
    "sign_reference",
    "verify_source",
]
