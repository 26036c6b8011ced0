"""Guest toolchains: ``glovebox build`` for C, Python, JavaScript and TypeScript tools, and any language a
package registers.

- :mod:`._base` — :class:`Toolchain`, what a guest language is (its suffixes, how it builds, the manifest
  it generates), and the :class:`BuildContext` a build gives it; ``announce``, how a step is told.
- :mod:`._registry` — the registered toolchains: the built-ins, then the entry points of the group
  ``glovebox.toolchains``; the one for a source's suffix.
- :mod:`._build` — ``glovebox.build``: the toolchain for the suffix, and the manifest written beside the
  component (never over a person's file); the SDK directory and the host interfaces a core module may import.
- :mod:`._c` — C, via Zig and wasm-tools.
- :mod:`._python` — Python; :mod:`._pybuild` builds it with componentize-py, :mod:`._pyanalyze` reads the
  source with ``ast`` (never imported).
- :mod:`._js` — JavaScript and TypeScript; :mod:`._jsbuild` builds them (esbuild, QuickJS-NG, a snapshot:
  :mod:`._jstoolchain`, :mod:`._snapshot`), :mod:`._jstypes` reads a tool's input schema from its types,
  :mod:`._jsrunner` builds the code runner of ``Runtime.run``.
- :mod:`._binaries` — finding and running the toolchain binaries (the ``build`` extra), reading a
  tool's source.
- :mod:`._scaffold` — ``glovebox new``: a new tool's source, manifest and test input.

(Not named ``build``: ``glovebox.build`` is the public function.)

Imports: :mod:`glovebox.core` and :mod:`glovebox.model`.
"""
