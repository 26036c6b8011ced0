"""``FakeExecutor``: tools as Python functions, for tests of everything around the sandbox.

The chain above it is the real one — resolution in the registry, the policy's
decision, quotas, approvals, input and output validation, retries, breakers,
output checks and the audit row — so a test of those needs a registered
manifest and a function, not a guest built from source::

    fake = FakeExecutor({"echo": lambda value: value})
    with Runtime(home, policy, executor=fake) as rt:
        fake.register(rt, {"name": "echo", "version": "1.0.0", "description": "echo"})
        rt.call("echo", {"text": "hi"})

A function answers the tool's output (any JSON value) or raises a ``CallError``
(``GuestError``, ``CallTimeout``...), which the call answers as a guest would.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ...core._errors import GuestError
from .._call import Call
from ._base import Executor

if TYPE_CHECKING:
    from ...model._result import ToolInfo
    from ...registry._registry import Registry


__all__ = ["FakeExecutor", "ToolFunction"]

#: A fake tool: the input value in, the output value out (or a ``CallError`` raised).
ToolFunction = Callable[[Any], Any]


class Runtime(Protocol):
    """What :meth:`FakeExecutor.register` uses of a Runtime (a protocol: the Runtime imports this module)."""

    @property
    def registry(self) -> Registry: ...


class FakeExecutor(Executor):
    """Runs each tool as the Python function registered under its name; counts the runs."""

    def __init__(self, tools: Mapping[str, ToolFunction] | None = None) -> None:
        self.tools: dict[str, ToolFunction] = dict(tools or {})
        #: How many times each tool ran (a refused call never reaches the executor).
        self.runs: dict[str, int] = {}
        self._lock = threading.Lock()

    def execute(self, call: Call) -> str:
        state = call.state
        assert state is not None and state.info is not None
        name = state.info.name
        function = self.tools.get(name)
        if function is None:
            raise GuestError(f"the fake executor has no function for {name!r}")
        with self._lock:
            self.runs[name] = self.runs.get(name, 0) + 1
        return json.dumps(function(call.input))

    def register(self, runtime: Runtime, manifest: Mapping[str, Any], function: ToolFunction | None = None) -> ToolInfo:
        """Index ``manifest`` in ``runtime``'s registry as a tool this executor runs (nothing is compiled).

        The stored artifact is a placeholder named by the manifest's digest, so a
        fake tool is never mistaken for one a real executor can run.

        Raises:
            InvalidManifest: the manifest is malformed.
        """
        from ...model._manifest import parse_manifest

        parsed = parse_manifest(dict(manifest), "(fake tool)")
        if function is not None:
            self.tools[parsed.name] = function
        placeholder = b"\0fake glovebox tool\0" + parsed.to_json().encode()
        digest = "sha256:" + hashlib.sha256(placeholder).hexdigest()
        store = runtime.registry
        return store.add(parsed, digest, len(placeholder), blob=store.stage_blob(placeholder))
