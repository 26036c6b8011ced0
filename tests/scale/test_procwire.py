"""The pool's pipe framing: messages read whole, however the bytes arrive, nothing lost to a signal, and
a header that cannot be one refused.

Each test writes to a real pipe with ``multiprocessing.Connection.send_bytes`` (what
the worker and the pool write with) or by hand, and reads with ``Frames``.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection

import pytest

from glovebox.scale._procwire import MAX_FRAME, BadFrame, Frames


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        try:
            os.close(fd)
        except OSError:
            pass


def test_messages_written_by_a_connection_come_back_whole_and_in_order(pipe: tuple[int, int]) -> None:
    read, write = pipe
    sent = [b"", b"one", b"x" * 16_385, bytes(range(256)) * 4]  # empty, small, past Connection's split, binary
    writer = Connection(os.dup(write), readable=False)
    received: list[bytes] = []
    frames = Frames(read)
    reader = threading.Thread(target=lambda: received.extend(frames.next() for _ in sent))
    reader.start()
    for message in sent:
        writer.send_bytes(message)
    reader.join(30)
    writer.close()
    assert received == sent


def test_a_message_longer_than_the_pipe_arrives_whole(pipe: tuple[int, int]) -> None:
    read, write = pipe
    big = os.urandom(3 << 20)  # well past the pipe's buffer and the reader's chunk
    writer = Connection(os.dup(write), readable=False)
    thread = threading.Thread(target=writer.send_bytes, args=(big,))
    thread.start()
    assert Frames(read).next() == big
    thread.join(30)
    writer.close()


def test_many_small_messages_in_one_read_are_each_returned(pipe: tuple[int, int]) -> None:
    read, write = pipe
    os.write(write, b"".join(len(m).to_bytes(4, "big") + m for m in (b"a", b"bb", b"ccc")))
    frames = Frames(read)
    assert [frames.next() for _ in range(3)] == [b"a", b"bb", b"ccc"]


def test_the_long_header_form_is_read(pipe: tuple[int, int]) -> None:
    read, write = pipe  # Connection writes -1 then an 8-byte length past 2 GiB; the reader takes any length so
    os.write(write, (-1).to_bytes(4, "big", signed=True) + (5).to_bytes(8, "big") + b"hello")
    assert Frames(read).next() == b"hello"


def test_the_end_of_the_pipe_between_messages_is_eof_and_inside_one_is_an_error(pipe: tuple[int, int]) -> None:
    read, write = pipe
    os.write(write, (3).to_bytes(4, "big") + b"abc" + (10).to_bytes(4, "big") + b"cut")
    os.close(write)
    frames = Frames(read)
    assert frames.next() == b"abc"
    with pytest.raises(OSError, match="inside a message"):
        frames.next()
    empty_read, empty_write = os.pipe()
    os.close(empty_write)
    with pytest.raises(EOFError):
        Frames(empty_read).next()
    os.close(empty_read)


class Interrupted(Exception):
    pass


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_a_read_cut_short_by_a_signal_loses_no_byte(pipe: tuple[int, int]) -> None:
    """What a caller of ``ProcessPool.call`` on the main thread meets when Ctrl-C lands mid-message:
    the bytes read so far stay buffered, so the next reader gets the message whole."""
    read, write = pipe
    message = b"0123456789" * 10
    frame = len(message).to_bytes(4, "big") + message
    os.write(write, frame[:37])  # the header and part of the body: the read blocks for the rest
    frames = Frames(read)
    previous = signal.signal(signal.SIGALRM, _interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(Interrupted):
            frames.next()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    os.write(write, frame[37:] + frame)
    assert frames.next() == message
    assert frames.next() == message


@pytest.mark.parametrize(
    "header",
    [
        (-5).to_bytes(4, "big", signed=True),  # a negative length
        (-2).to_bytes(4, "big", signed=True),
        b"\xff\xff\xff\xff" + (MAX_FRAME + 1).to_bytes(8, "big"),  # the long form, over the limit
        (MAX_FRAME + 1).to_bytes(4, "big"),  # the short form, over the limit
    ],
)
def test_a_header_that_cannot_be_one_is_a_bad_frame_not_a_read_forever(pipe: tuple[int, int], header: bytes) -> None:
    read, write = pipe
    os.write(write, header + b"after")
    frames = Frames(read)
    with pytest.raises(BadFrame, match="a frame header of -?[0-9]+ bytes") as caught:
        frames.next()
    assert isinstance(caught.value, OSError)  # what both readers already treat as a broken pipe


def test_buffered_and_readable_say_what_the_next_read_meets(pipe: tuple[int, int]) -> None:
    """What a worker's reader asks as it lets go of the pipe: is a request left that no ring announced?"""
    read, write = pipe
    frames = Frames(read)
    assert not frames.buffered() and not frames.readable()
    writer = Connection(os.dup(write), readable=False)
    writer.send_bytes(b"one")
    writer.close()
    os.write(write, (5).to_bytes(4, "big") + b"tw")  # a second message, cut short
    assert frames.readable()
    assert frames.next() == b"one"  # one read took both: the first whole, the second in part
    assert not frames.buffered() and not frames.readable()
    os.write(write, b"o!!")
    assert frames.readable() and not frames.buffered()
    assert frames.next() == b"two!!"
    frames._buffer += (-3).to_bytes(4, "big", signed=True)
    assert frames.buffered()  # a header that cannot be one is left for the reader to meet, not raised here
    with pytest.raises(BadFrame):
        frames.next()


def test_readable_may_be_asked_by_many_threads_at_once(pipe: tuple[int, int]) -> None:
    """A worker's threads ask as they let go of the pipe, in parallel: no question may raise
    (a ``select.poll`` object refuses a second ``poll()`` while one runs, and the thread
    that met that refusal used to die holding a request it had read)."""
    read, write = pipe
    frames = Frames(read)
    os.write(write, b"\0")  # readable from the start: each answer is True
    failures: list[BaseException] = []
    answers: list[bool] = []

    def ask() -> None:
        try:
            answers.extend(frames.readable() for _ in range(20_000))
        except BaseException as exc:  # the failure is the finding
            failures.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(answers) == 160_000 and all(answers)
