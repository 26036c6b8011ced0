"""Executors: what runs a call the handler chain has admitted, resolved, decided and validated.

- :mod:`._base` — ``Executor``, the seam: ``execute(call) -> output text`` or a ``CallError`` raised.
- :mod:`._wasm` — ``WasmExecutor``: a fresh sandbox in this process, with the call's capabilities bound.
- :mod:`._remote` — ``McpRemoteExecutor``: a remote MCP server's tool, proxied.
- :mod:`._workers` — ``Workers``: a Runtime whose calls run elsewhere (ProcessPool's worker
  processes, Ray's replicas), each running the whole chain there.
- :mod:`._fake` — ``FakeExecutor``: tools as Python functions, in memory, for tests of everything
  around the sandbox (policy, retries, breakers, admission, the servers) without building a guest.

The Runtime picks the executor by the tool's ``kind`` (``Executors``).
"""

from ._base import Executor, Executors
from ._fake import FakeExecutor
from ._remote import McpRemoteExecutor
from ._wasm import WasmExecutor
from ._workers import Workers

__all__ = ["Executor", "Executors", "FakeExecutor", "McpRemoteExecutor", "WasmExecutor", "Workers"]
