"""A ``tty: true`` container's terminal: the master side of the pty the runtime allocated.

The container's stdin, stdout and stderr are the pty's slave (its controlling terminal, so a
shell gets job control and SIGWINCH). The runtime keeps the master: what the container writes
goes to its log (one ``stdout`` stream, as a terminal has) and, raw and at once, to every
attached client (:meth:`Terminal.subscribe`); what clients type is written to the master;
:meth:`Terminal.resize` sets the window size, which the kernel signals to the foreground
process group (``SIGWINCH``).

Buffers: each subscriber has a bounded queue (:data:`QUEUE_CHUNKS`); a client that falls that
far behind loses its oldest chunks rather than stalling the container or the other clients
(the log keeps everything). The master outlives a kubelet restart in the container's console
holder (:mod:`.console_holder`): a restarted kubelet takes it back from there, so an adopted
container's log and ``kubectl attach -it`` go on.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import struct
import termios
from typing import AsyncIterator

__all__ = ["Terminal", "QUEUE_CHUNKS"]

QUEUE_CHUNKS = 1024


class Terminal:
    def __init__(self, master: int) -> None:
        self._master = master
        self._subscribers: list[asyncio.Queue[bytes]] = []
        self.ended = False

    def tap(self, data: bytes) -> None:
        """Output from the container (``b""``: the container's side has closed)."""
        if not data:
            self.ended = True
        for q in self._subscribers:
            if q.full():
                q.get_nowait()
            q.put_nowait(data)

    async def subscribe(self) -> AsyncIterator[bytes]:
        """Output from now on, until the container's terminal closes."""
        q: asyncio.Queue[bytes] = asyncio.Queue(QUEUE_CHUNKS)
        self._subscribers.append(q)
        try:
            while not self.ended or not q.empty():
                data = await q.get()
                if not data:
                    return
                yield data
        finally:
            self._subscribers.remove(q)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and self._master >= 0:
            try:
                view = view[os.write(self._master, view):]
            except BlockingIOError:
                await asyncio.sleep(0.01)  # the terminal's input buffer is full: the container is not reading
            except OSError:
                return  # the container's side is gone

    def resize(self, width: int, height: int) -> None:
        if self._master < 0:
            return
        try:
            fcntl.ioctl(self._master, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
        except OSError:
            pass

    def close(self) -> None:
        if self._master >= 0:
            os.close(self._master)
            self._master = -1
        self.tap(b"")
