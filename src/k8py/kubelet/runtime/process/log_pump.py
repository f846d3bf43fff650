"""Container output into CRI-format log files, with rotation.

Each container's stdout and stderr are FIFOs in its directory. The child
gets them opened read-write, so it always holds a reader too: if the
kubelet goes away, writes block once the pipe buffer fills instead of
killing the container with SIGPIPE, and a restarted kubelet reopens the
FIFOs and carries on. The kubelet reads them non-blocking from the event
loop (``add_reader``: no polling, no thread), and writes records::

    2026-12-01T08:40:01.123456789Z stdout F hello

``F`` ends a line; a line longer than ``max_line`` is cut into ``P``
records (the rest follows). Output not ended by a newline when the stream
closes is written as an ``F`` record. A ``tty: true`` container has one stream, its pty's
master, read the same way (:meth:`ContainerLog.follow_fd`) and handed to attach as well.

Rotation: once the file passes ``max_size`` bytes it is renamed
``<attempt>.log.<YYYYMMDD-HHMMSS>`` and a fresh file opened; then, in a
thread, the rotated files but the newest are gzip-compressed and only the
newest ``max_files`` files (the live one included) are kept
(:mod:`k8py.kubelet.runtime.rotated_logs`, upstream's policy).

Invariant: records of one stream keep their order; stdout and stderr
interleave in arrival order. :meth:`ContainerLog.closed` is set once both
streams reached EOF (so the final lines are on disk before an exit is
reported as complete).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Callable

from k8py.kubelet.runtime.rotated_logs import compact_rotated, rotation_target

__all__ = ["ContainerLog", "cri_timestamp"]

logger = logging.getLogger(__name__)

_READ = 65536
#: one compaction at a time, whichever log: two ContainerLogs of one path (a kubelet that adopted a
#: container while the old one's thread still ran) must not compress the same file at once
_COMPACTING = threading.Lock()


def cri_timestamp(ns: int | None = None) -> str:
    ns = time.time_ns() if ns is None else ns
    secs, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{frac:09d}Z"


class ContainerLog:
    def __init__(self, path: str, *, max_size: int = 10 * 1024 * 1024, max_files: int = 5, max_line: int = 16 * 1024) -> None:
        self.path = path
        self.max_size = max_size
        self.max_files = max(1, max_files)
        self.max_line = max_line
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._file = open(path, "ab", buffering=0)
        self._size = self._file.tell()
        self._partial: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._fds: dict[str, int] = {}
        self._taps: dict[str, Callable[[bytes], None]] = {}
        self.closed = asyncio.Event()
        #: the last rotation's compaction (a thread's future), for tests and shutdown
        self.compaction: asyncio.Future[None] | None = None

    def follow(self, stream: str, fifo: str) -> None:
        """Start reading ``fifo`` (stdout or stderr) from the running loop."""
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self._fds[stream] = fd
        asyncio.get_running_loop().add_reader(fd, self._readable, stream)

    def follow_fd(self, stream: str, fd: int, tap: Callable[[bytes], None]) -> None:
        """Read an open descriptor (a pty's master; the log owns it now), handing every chunk
        to ``tap`` as well (``b""`` once at the end: a pty reports EIO when the container's side closes)."""
        os.set_blocking(fd, False)
        self._fds[stream] = fd
        self._taps[stream] = tap
        asyncio.get_running_loop().add_reader(fd, self._readable, stream)

    def _readable(self, stream: str) -> None:
        fd = self._fds.get(stream)
        if fd is None:
            return
        try:
            data = os.read(fd, _READ)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            tap = self._taps.get(stream)
            if tap is not None:
                tap(data)
            self._take(stream, data)
            return
        self._finish(stream)

    def _finish(self, stream: str) -> None:
        tap = self._taps.pop(stream, None)
        if tap is not None and stream in self._fds:
            tap(b"")
        fd = self._fds.pop(stream, None)
        if fd is not None:
            asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)
        rest = self._partial[stream]
        if rest:
            self._write(stream, b"F", bytes(rest))
            rest.clear()
        if not self._fds:
            self.closed.set()

    def _take(self, stream: str, data: bytes) -> None:
        buf = self._partial[stream]
        buf += data
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            while len(line) > self.max_line:
                self._write(stream, b"P", line[: self.max_line])
                line = line[self.max_line:]
            self._write(stream, b"F", line)
        while len(buf) > self.max_line:
            self._write(stream, b"P", bytes(buf[: self.max_line]))
            del buf[: self.max_line]

    def _write(self, stream: str, tag: bytes, content: bytes) -> None:
        record = cri_timestamp().encode() + b" " + stream.encode() + b" " + tag + b" " + content + b"\n"
        try:
            self._file.write(record)
        except ValueError:  # closed after the container was removed
            return
        self._size += len(record)
        if self._size >= self.max_size:
            self._rotate()

    def _rotate(self) -> None:
        self._file.close()
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        # no lock with a compaction under way: it only renames a file to its .gz (the same place in
        # the order) and removes the oldest, so the newest name is stable
        os.rename(self.path, rotation_target(self.path, stamp))
        self._file = open(self.path, "ab", buffering=0)
        self._size = 0
        self._compact()

    def _compact(self) -> None:
        """Older rotated files compressed and the excess removed, in a thread: a gzip of
        ``max_size`` bytes must not stall the loop that pumps every container's output."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): do it here
            self._compact_now()
            return
        self.compaction = loop.run_in_executor(None, self._compact_now)

    def _compact_now(self) -> None:
        with _COMPACTING:
            try:
                compact_rotated(self.path, self.max_files)
            except OSError as err:
                logger.warning("could not compress or remove rotated container logs", extra={"log": self.path, "error": str(err)})

    def close(self) -> None:
        for stream in list(self._fds):
            self._finish(stream)
        self._file.close()
        self.closed.set()
