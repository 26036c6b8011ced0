"""The stdio transport of a local MCP server: its child process, its clean environment, its bounded pipes.

A local (stdio) MCP server is a command the host starts as a child process
and speaks JSON-RPC with, one message per line, over its stdin and stdout
(the MCP stdio transport). What the child gets is decided here and nowhere else:

- **argv**: the command and arguments stored in the tool's descriptor, the
  executable an absolute path resolved at import; wrapped in bubblewrap when
  the descriptor's sandbox says so (see :mod:`._bwrap`).
- **environment**: nothing of the host's. ``PATH`` is the executable's own
  directory then ``/usr/local/bin:/usr/bin:/bin``; ``HOME`` and ``TMPDIR``
  point into the working directory (``TMPDIR`` is
  ``/tmp`` under bubblewrap, where ``/tmp`` is private); ``LANG=C.UTF-8``; then the literal
  variables the import named (``--env NAME=VALUE``) and the secrets
  (``--env-secret NAME=SECRET``: the host's variable ``SECRET``, read when the
  process starts, given to the child as ``NAME``; only the names are stored).
  ``{workdir}`` in an argument or a literal variable is the working directory.
- **working directory**: ``<home>/mcp-stdio/<server>/<principal>/``, one per
  server and principal (a server's files are never shared across principals).
- **stdin**: only the host's messages; **stderr**: discarded (``/dev/null``):
  a server cannot fill the host's disk or log with it.
- **stdout**: read in lines of at most ``line_bytes``; a longer line ends the
  session (the call fails ``output_too_large``), so the host never buffers an
  unbounded line.

The process is started in a new session (its own process group); closing the
transport closes its stdin, waits :data:`GRACE_S`, then kills the group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

__all__ = ["BASE_PATH", "WORKDIR", "LineTooLong", "child_env", "stdio_transport", "with_workdir"]

#: The directories after the executable's own on the child's ``PATH``.
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Seconds a server has to exit after its stdin is closed, before its process group is killed.
GRACE_S = 2.0


class LineTooLong(Exception):
    """The server wrote a line longer than the transport's cap."""


def child_env(
    executable: str, workdir: Path, tmp: str, literal: Mapping[str, str], secrets: Mapping[str, str]
) -> dict[str, str]:
    """The whole environment of a server's process (nothing inherited from the host).

    >>> env = child_env("/opt/x/bin/srv", Path("/w"), "/tmp", {"A": "1"}, {"T": "s"})
    >>> sorted(env.items())  # doctest: +NORMALIZE_WHITESPACE
    [('A', '1'), ('HOME', '/w'), ('LANG', 'C.UTF-8'), ('PATH', '/opt/x/bin:/usr/local/bin:/usr/bin:/bin'),
     ('T', 's'), ('TMPDIR', '/tmp')]
    """
    env = {
        "PATH": f"{Path(executable).parent}:{BASE_PATH}",
        "HOME": str(workdir),
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
    }
    env.update({name: with_workdir(value, workdir) for name, value in literal.items()})
    env.update(secrets)
    return env


def with_workdir(text: str, workdir: Path) -> str:
    """``text`` with each ``{workdir}`` replaced by the server's working directory (in its argv and env).

    >>> with_workdir("{workdir}/memory.jsonl", Path("/w"))
    '/w/memory.jsonl'
    """
    return text.replace(WORKDIR, str(workdir))


#: What an argument or a literal variable of a stdio server writes for its working directory.
WORKDIR = "{workdir}"


@asynccontextmanager
async def stdio_transport(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    line_bytes: int,
    exited: Any = None,
    too_long: Callable[[], None] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``argv`` and yield the ``(read, write)`` message streams the SDK's client session takes.

    ``exited`` (an ``anyio.Event`` or None) is set when the process's stdout ends; ``too_long`` is
    called when the server writes a line over ``line_bytes`` (the transport then ends).

    Raises:
        OSError: the process cannot be started.
    """
    import anyio
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(
        list(argv), env=dict(env), cwd=str(cwd), stderr=subprocess.DEVNULL, start_new_session=True
    )
    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[Any](0)

    async def reader() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[: end + 1]
                        if line.strip():
                            await read_writer.send(_parse(line, types, SessionMessage))
                    if len(buffer) > line_bytes:
                        if too_long is not None:
                            too_long()
                        await read_writer.send(LineTooLong(f"the server wrote a line over {line_bytes} bytes"))
                        return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            if exited is not None:
                exited.set()

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
            group.cancel_scope.cancel()


def _parse(line: bytes, types: Any, session_message: Any) -> Any:
    try:
        return session_message(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _stop(process: Any) -> None:
    """Close stdin, give the server :data:`GRACE_S` to exit, then kill its process group."""
    import anyio

    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(GRACE_S):
        while process.returncode is None:
            await anyio.sleep(0.02)
    if process.returncode is None and sys.platform != "win32":
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with anyio.move_on_after(GRACE_S):
            await process.wait()
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.aclose()
