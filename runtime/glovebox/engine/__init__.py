"""wasmtime engines: configuration, instance allocation, the epoch ticker, compilation.

- :mod:`._settings` — ``EngineSettings`` (pool, memory layout, epoch tick).
- :mod:`._codegen` — the one wasmtime ``Config`` every engine starts from.
- :mod:`._allocation` — the pooling allocator, sized to the address space.
- :mod:`._engine` — one shared engine per settings, per process.
- :mod:`._ticker` — what advances an engine's epoch while it has users.
- :mod:`._compile` — compiling an untrusted artifact in a bounded child process.

Imports: :mod:`glovebox.core` and :mod:`glovebox.model`.
"""
