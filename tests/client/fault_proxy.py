"""A fault-injecting TCP proxy for client tests (asyncio, loopback, free port).

Every accepted connection is piped to the target. The test can cut live
connections (:meth:`FaultProxy.cut_all`, :meth:`FaultProxy.cut_random`),
refuse new ones for a while (:meth:`FaultProxy.block`), or run
:meth:`FaultProxy.chaos` to cut a random connection at random intervals.
Cutting aborts both sockets (a TCP RST where the OS allows), as a dying
load balancer or a network partition would.
"""

from __future__ import annotations

import asyncio
import random
from urllib.parse import urlsplit


class FaultProxy:
    def __init__(self, target_url: str, *, seed: int = 0) -> None:
        parts = urlsplit(target_url)
        self.target_host = parts.hostname or "127.0.0.1"
        self.target_port = parts.port or 80
        self._rng = random.Random(seed)
        self._server: asyncio.base_events.Server | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.blocked = False
        self.cuts = 0
        self.connections = 0

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- faults ------------------------------------------------------------------------

    def cut_all(self) -> int:
        pairs = list(self._pairs)
        for pair in pairs:
            self._cut(pair)
        return len(pairs)

    def cut_random(self) -> bool:
        if not self._pairs:
            return False
        self._cut(self._rng.choice(sorted(self._pairs, key=id)))
        return True

    def block(self) -> None:
        """Refuse new connections (accepted and closed at once) and cut live ones."""
        self.blocked = True
        self.cut_all()

    def unblock(self) -> None:
        self.blocked = False

    async def chaos(self, *, mean_interval: float) -> None:
        """Cut a random live connection every ~``mean_interval`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self._rng.uniform(0, 2 * mean_interval))
            self.cut_random()

    # -- plumbing ----------------------------------------------------------------------

    def _cut(self, pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        if pair in self._pairs:
            self._pairs.discard(pair)
            self.cuts += 1
            for writer in pair:
                writer.transport.abort()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.blocked:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        if self.blocked:  # blocked while connecting upstream: block() could not cut this pair yet
            up_writer.transport.abort()
            writer.transport.abort()
            return
        self.connections += 1
        pair = (writer, up_writer)
        self._pairs.add(pair)
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst, pair), name="fault-proxy-pipe")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, pair: tuple) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if pair in self._pairs:
                self._pairs.discard(pair)
                for writer in pair:
                    writer.close()
