"""The content-addressed tool store: registration, compiled components, signatures.

- :mod:`._registry` — blobs by digest and the SQLite index of names and versions.
- :mod:`._registration` — an artifact and its manifest checked, compiled, proven, stored.
- :mod:`._compiled` — compiled components on disk, checked before they are loaded.
- :mod:`._exports` — any component as tools: one manifest per typed export, its ``package-docs``.
- :mod:`._signing` — Ed25519 primitives over a digest and its canonical manifest.
- :mod:`._keyring` — key pairs, signatures and the keys a home trusts (public).

Imports: everything below it (core, storage, schema, model, policy's name
matcher, engine, sandbox); never the runtime, the audit log or a surface.
"""
