"""Exec, attach and port-forward sessions on a CRI runtime's streaming server, over SPDY.

:class:`RemoteCommand` is one ``Exec`` or ``Attach`` URL opened as upstream's
``remotecommand`` v4 client does: an ``error`` stream first, then ``stdin``,
``stdout``, ``stderr`` (each only if asked for; no stderr with a terminal) and
``resize`` with a terminal. It offers what the kubelet's server relays to its
own client (the API server's WebSocket): merged output, stdin, closing stdin
(FIN on the stdin stream), resizes, and at the end the runtime's ``Status``
from the error stream, which already says ``Success`` or
``NonZeroExitCode`` with the exit code (passed on as the runtime wrote it).

:func:`port_forward_connection` opens one ``PortForward`` URL with one
``data``/``error`` stream pair (``requestID`` 0) for one port and returns an
ordinary ``(StreamReader, StreamWriter)``: the kubelet's port-forward code
copies bytes as it does to a pod IP. A socketpair sits in between; a relay
task copies between its far end and the SPDY streams and half-closes as the
other side does. What the runtime reports on the error stream (it could not
connect inside the pod's network namespace) is logged and ends the connection.

Invariants: every session is closed by its owner (``close()``); a
``StreamRefused`` or ``ConnectionError`` from here means the runtime would
not (or could no longer) stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import AsyncIterator

from k8py.api import stream_channels as ch
from k8py.kubelet.runtime.cri.spdy_client import SpdySession, SpdyStream

__all__ = ["RemoteCommand", "port_forward_connection", "REMOTECOMMAND_V4", "PORTFORWARD"]

log = logging.getLogger(__name__)

REMOTECOMMAND_V4 = "v4.channel.k8s.io"
PORTFORWARD = "portforward.k8s.io"
#: the running port-forward relays (a task nobody references may be collected)
_relays: set[asyncio.Task[None]] = set()


class RemoteCommand:
    def __init__(self, session: SpdySession, streams: dict[str, SpdyStream]) -> None:
        self._session = session
        self._streams = streams

    @classmethod
    async def open(cls, url: str, *, stdin: bool, stdout: bool, stderr: bool, tty: bool) -> "RemoteCommand":
        session = await SpdySession.connect(url, REMOTECOMMAND_V4)
        wanted = ["error"] + [name for name, on in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr and not tty),
                                                    ("resize", tty)) if on]
        streams: dict[str, SpdyStream] = {}
        try:
            for name in wanted:
                streams[name] = await session.open_stream({"streamType": name})
        except BaseException:
            await session.close()
            raise
        return cls(session, streams)

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        """(channel, bytes) from stdout and stderr as they come, until both have ended."""
        queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue(maxsize=16)
        sources = [(ch.STDOUT, self._streams.get("stdout")), (ch.STDERR, self._streams.get("stderr"))]

        async def pump(channel: int, stream: SpdyStream) -> None:
            try:
                while data := await stream.read():
                    await queue.put((channel, data))
            finally:
                await queue.put(None)

        tasks = [asyncio.create_task(pump(c, s), name=f"cri-stream-out-{c}") for c, s in sources if s is not None]
        try:
            open_sources = len(tasks)
            while open_sources:
                item = await queue.get()
                if item is None:
                    open_sources -= 1
                else:
                    yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def write_stdin(self, data: bytes) -> None:
        stream = self._streams.get("stdin")
        if stream is not None:
            await stream.write(data)

    async def close_stdin(self) -> None:
        stream = self._streams.get("stdin")
        if stream is not None:
            await stream.close_write()

    async def resize(self, width: int, height: int) -> None:
        stream = self._streams.get("resize")
        if stream is not None:
            await stream.write(json.dumps({"Width": width, "Height": height}).encode())

    async def status(self) -> bytes:
        """The error stream's message once the command has ended: a ``Status`` (``Success`` when it was empty)."""
        message = await self._streams["error"].read_all()
        return message or ch.exit_status(0)

    async def close(self) -> None:
        await self._session.close()


async def port_forward_connection(url: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """One TCP connection to ``port`` in the pod, through the runtime (``url``: a fresh ``PortForward`` URL)."""
    session = await SpdySession.connect(url, PORTFORWARD)
    try:
        headers = {"port": str(port), "requestID": "0"}
        error = await session.open_stream({"streamType": "error", **headers})
        data = await session.open_stream({"streamType": "data", **headers})
    except BaseException:
        await session.close()
        raise
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    far_reader, far_writer = await asyncio.open_connection(sock=theirs)
    task = asyncio.create_task(_relay(session, error, data, far_reader, far_writer, port), name=f"cri-portforward-{port}")
    _relays.add(task)
    task.add_done_callback(_relays.discard)
    return reader, writer


async def _relay(session: SpdySession, error: SpdyStream, data: SpdyStream, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, port: int) -> None:
    async def to_pod() -> None:
        while chunk := await reader.read(32768):
            await data.write(chunk)
        await data.close_write()

    async def from_pod() -> None:
        while chunk := await data.read():
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    async def errors() -> None:
        message = await error.read_all()
        if message:
            log.info("port-forward failed in the runtime", extra={"port": port, "error": message.decode(errors="replace")})
            raise ConnectionAbortedError(message.decode(errors="replace"))

    sending, receiving, failing = tasks = [asyncio.create_task(f(), name=f"cri-portforward-{port}-{f.__name__}")
                                           for f in (to_pod, from_pod, errors)]
    try:
        # over when the pod's side has ended (then the client's last bytes get 1 s, as containerd
        # lingers), or when the runtime reports an error
        pending = {receiving, failing}
        while receiving in pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if failing in done and failing.exception() is not None:
                break
        else:
            await asyncio.wait([sending], timeout=1.0)
    except (ConnectionError, OSError) as err:
        log.debug("port-forward relay ended", extra={"port": port, "error": str(err)})
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        writer.close()
        await session.close()
