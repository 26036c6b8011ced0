"""Guest toolchains: ``glovebox build`` for C and Python tools.

- :mod:`._build` — dispatch on the source's suffix; C via Zig and wasm-tools.
- :mod:`._pybuild` — a Python tool into a component with componentize-py.
- :mod:`._pyanalyze` — a Python tool's source read with ``ast`` (never imported).
- :mod:`._jsbuild` — a JavaScript or TypeScript tool into a component (esbuild, QuickJS-NG, a snapshot).
- :mod:`._jstypes` — a JavaScript or TypeScript tool's input schema, read from its types.
- :mod:`._binaries` — finding and running the toolchain binaries (the ``build`` extra), reading a
  tool's source and delivering the built component with its manifest.
- :mod:`._scaffold` — ``glovebox new``: a new tool's source, manifest and test input.

(Not named ``build``: ``glovebox.build`` is the public function.)

Imports: :mod:`glovebox.core` and :mod:`glovebox.model`.
"""
