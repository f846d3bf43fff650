"""``/exec/NS/POD/CONTAINER`` and ``/attach/NS/POD/CONTAINER`` over WebSocket.

The kubelet's half of ``kubectl exec`` / ``attach`` (upstream
``cri/streaming/remotecommand``), speaking ``v5.channel.k8s.io``,
``v4.channel.k8s.io`` or the legacy ``channel.k8s.io`` — also what a client
that offers no subprotocol gets, as upstream (:mod:`k8py.api.stream_channels`;
its error channel then carries only a failure's message). Query options as the
API server maps them: ``input``, ``output``, ``error``, ``tty``, ``command``
(repeated, exec only).

Order of a session, as upstream:

1. everything that can refuse is checked *before* the upgrade (the container
   exists and runs, the runtime can enter it), so a refusal is an HTTP
   ``Status`` the API server hands on;
2. after the upgrade an empty message goes out on the lowest output channel
   (stdout, else stderr, else error): clients take it as "the stream is up";
3. stdin messages are written to the command; v5's ``0xFF 0x00`` closes its
   stdin; resize messages set the pty's size;
4. when the command's outputs are drained and it has exited, its exit code
   goes out on the error channel (``Success`` or ``NonZeroExitCode``) and the
   socket closes (1000). A client that goes away kills the command.

Attach has no command: output is the container's log from now on (records
sorted onto stdout/stderr), stdin goes to the runtime's stdin FIFO when the
container has one; the session ends when the container exits. When the attach's stdin ends
(v5's close of stdin, or the client going away) the runtime is told (:class:`~k8py.kubelet.
runtime.protocols.StdinOnceRuntime`): a ``stdinOnce`` container then reads EOF, and later
attaches get no stdin, as upstream (``kubectl run -i``); the output streams on until the
container exits. For any other container without a terminal the session ends there, as
containerd's attach does (``echo x | kubectl attach -i`` returns). A ``tty: true``
container attached with ``tty`` uses its own terminal instead (the runtime's
:class:`~k8py.kubelet.runtime.protocols.TerminalRuntime`): raw output as it comes,
typed input and resizes into its pty; that session ends with its stdin too (containerd
streams on past an attach's stdin only for a ``stdinOnce`` container without a terminal),
the terminal staying the container's.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Awaitable, Callable

from aiohttp import WSMsgType, web

from k8py.api import stream_channels as ch
from k8py.kubelet.runtime.protocols import (
    ContainerState, ContainerTerminal, NotFoundError, RuntimeErrorStatus, StdinOnceRuntime, TerminalRuntime,
)
from k8py.kubelet.server.containers import KubeletError, running_attempt
from k8py.kubelet.server.cri_logs import parse_record
from k8py.kubelet.server.exec_process import ExecProcess
from k8py.kubelet.server_context import ServerContext

__all__ = ["exec_handler", "attach_handler", "send_status"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(err: KubeletError) -> web.Response:
    return web.Response(status=err.code, body=err.body(), content_type="application/json")


def _flags(request: web.Request) -> tuple[bool, bool, bool, bool]:
    q = request.query
    stdin, stdout, stderr, tty = (ch.query_flag(q.get(k)) for k in ("input", "output", "error", "tty"))
    if not (stdin or stdout or stderr):
        raise KubeletError(400, "you must specify at least 1 of stdin, stdout, stderr")
    if tty and stderr:
        stderr = False  # a terminal has one output stream (upstream refuses; kubectl never asks)
    return stdin, stdout, stderr, tty


def _protocol(request: web.Request) -> str:
    """The subprotocol to answer with: "" (the legacy base protocol) for a client offering none."""
    if request.headers.get("Upgrade", "").lower() != "websocket":
        raise KubeletError(400, f"exec and attach are served over WebSocket ({', '.join(ch.REMOTECOMMAND_PROTOCOLS)})")
    offered = request.headers.getall("Sec-WebSocket-Protocol", [])
    if not any(p.strip() for value in offered for p in value.split(",")):
        return ""
    protocol = ch.negotiate(offered, ch.REMOTECOMMAND_PROTOCOLS)
    if protocol is None:
        raise KubeletError(400, f"no supported WebSocket subprotocol offered; the kubelet serves {', '.join(ch.REMOTECOMMAND_PROTOCOLS)}")
    return protocol


async def _open(request: web.Request, protocol: str, first_channel: int) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(protocols=(protocol,) if protocol else (), max_msg_size=0)
    await ws.prepare(request)
    await ws.send_bytes(ch.frame(first_channel, b""))
    return ws


async def send_status(ws: web.WebSocketResponse, protocol: str, status: bytes) -> None:
    """The command's end on the error channel, as ``protocol`` carries it (none for a legacy success)."""
    message = ch.error_channel_message(protocol, status)
    if message is not None:
        await ws.send_bytes(ch.frame(ch.ERROR, message))


async def _read_client(
    ws: web.WebSocketResponse,
    *,
    protocol: str,
    on_stdin: Callable[[bytes], Awaitable[None]],
    on_close_stdin: Callable[[], None],
    on_resize: Callable[[int, int], None],
) -> None:
    """Client messages until the socket closes (returns then)."""
    async for msg in ws:
        # the official Python client sends str stdin as TEXT messages (channel as a character)
        data = msg.data.encode() if msg.type == WSMsgType.TEXT else msg.data if msg.type == WSMsgType.BINARY else b""
        if not data:
            continue
        channel, payload = data[0], data[1:]
        if channel == ch.STDIN:
            await on_stdin(payload)
        elif channel == ch.RESIZE:
            size = ch.parse_resize(payload)
            if size is not None:
                on_resize(*size)
        elif channel == ch.CLOSE and protocol == ch.V5 and payload[:1] == bytes((ch.STDIN,)):
            on_close_stdin()


def exec_handler(ctx: ServerContext) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        ns, pod, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        command = request.query.getall("command", [])
        try:
            stdin, stdout, stderr, tty = _flags(request)
            if not command:
                raise KubeletError(400, "you must specify at least one command for the container")
            attempt = await running_attempt(ctx, ns, pod, container)
            try:
                spec = await ctx.runtime.exec_spec(attempt.id, command, tty=tty)
            except NotFoundError:
                raise KubeletError(404, f'container not found ("{container}")') from None
            except RuntimeErrorStatus as err:
                raise KubeletError(400, f'container "{container}" in pod "{pod}": {err.message}') from None
            protocol = _protocol(request)
        except KubeletError as err:
            return _error(err)
        ws = await _open(request, protocol, ch.STDOUT if stdout else ch.STDERR if stderr else ch.ERROR)
        try:
            proc = await ExecProcess.spawn(spec, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)
        except OSError as err:
            # as runc and a shell report it: the reason on stderr, 127 (not found) or 126 (not executable)
            await ws.send_bytes(ch.frame(ch.STDOUT if tty else ch.STDERR, f'exec: "{command[0]}": {err.strerror}\n'.encode()))
            await send_status(ws, protocol, ch.exit_status(127 if isinstance(err, FileNotFoundError) else 126, command))
            await ws.close()
            return ws
        try:
            await _run_exec(ws, proc, protocol=protocol, command=command)
        except* ConnectionError:
            log.debug("exec client went away", extra={"pod": f"{ns}/{pod}", "container": container})
        finally:
            await proc.close()
            if not ws.closed:
                await ws.close()
        return ws

    return handler


async def _run_exec(ws: web.WebSocketResponse, proc: ExecProcess, *, protocol: str, command: list[str]) -> None:
    async def send_output() -> None:
        async for channel, data in proc.output():
            await ws.send_bytes(ch.frame(channel, data))

    async with asyncio.TaskGroup() as tg:
        output = tg.create_task(send_output(), name="exec-output")
        reader = tg.create_task(
            _read_client(ws, protocol=protocol, on_stdin=proc.write_stdin, on_close_stdin=proc.close_stdin, on_resize=proc.resize),
            name="exec-client",
        )
        exited = tg.create_task(proc.wait(), name="exec-wait")
        done, _ = await asyncio.wait((output, reader), return_when=asyncio.FIRST_COMPLETED)
        if reader not in done:
            # the outputs are closed; the command may still run: until it exits or the client leaves
            done, _ = await asyncio.wait((exited, reader), return_when=asyncio.FIRST_COMPLETED)
        if reader in done:
            # the client went away: end the command (upstream kills the exec session)
            proc.kill()
            output.cancel()
            return
        code = await exited
        reader.cancel()
    await send_status(ws, protocol, ch.exit_status(code, command))
    await ws.close()


def attach_handler(ctx: ServerContext, *, poll_interval: float = 0.1) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        ns, pod, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        try:
            stdin, stdout, stderr, tty = _flags(request)
            attempt = await running_attempt(ctx, ns, pod, container)
            terminal = ctx.runtime.attach_terminal(attempt.id) if tty and isinstance(ctx.runtime, TerminalRuntime) else None
            fifo = ctx.runtime.attach_fifo(attempt.id) if stdin and terminal is None else None
            if stdin and fifo is None and terminal is None:
                log.info("attach stdin ignored: the container has no stdin", extra={"pod": f"{ns}/{pod}", "container": container})
            if tty and terminal is None:
                # the container has no terminal: its output is a log, so attach streams it as is
                log.info("attach without a terminal: the container has none", extra={"pod": f"{ns}/{pod}", "container": container})
            protocol = _protocol(request)
        except KubeletError as err:
            return _error(err)
        ws = await _open(request, protocol, ch.STDOUT if stdout else ch.STDERR if stderr else ch.ERROR)
        if terminal is not None:
            await _attach_terminal(ws, terminal, stdin=stdin, stdout=stdout, protocol=protocol, where=f"{ns}/{pod}/{container}")
            return ws
        fd = -1
        ended: list[asyncio.Task[None]] = []
        stdin_over = asyncio.Event()

        async def stdin_ended() -> None:
            if isinstance(ctx.runtime, StdinOnceRuntime) and await ctx.runtime.close_stdin(attempt.id):
                return  # stdinOnce: the container reads EOF, and its output still streams to this client
            stdin_over.set()  # otherwise the session ends with its stdin, as containerd's attach does

        def end_stdin() -> None:
            """This attach's stdin ended (v5's close, or the client left)."""
            nonlocal fd
            if fd < 0:
                return
            os.close(fd)
            fd = -1
            ended.append(asyncio.create_task(stdin_ended(), name=f"attach-stdin-ended-{attempt.id[:12]}"))

        try:
            if fifo is not None:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as err:
                    log.info("attach cannot open stdin", extra={"fifo": fifo, "error": str(err)})

            async def write(data: bytes) -> None:
                view = memoryview(data)
                while fd >= 0 and view:
                    try:
                        view = view[os.write(fd, view) :]
                    except BlockingIOError:
                        await asyncio.sleep(0.01)  # the FIFO is full: the container is not reading its stdin

            async def follow() -> None:
                await _follow_output(ctx, ws, attempt.id, attempt.log_path, stdout=stdout, stderr=stderr, tty=tty, poll=poll_interval)

            async with asyncio.TaskGroup() as tg:
                out = tg.create_task(follow(), name="attach-output")
                reader = tg.create_task(
                    _read_client(ws, protocol=protocol, on_stdin=write, on_close_stdin=end_stdin, on_resize=lambda w, h: None),
                    name="attach-client",
                )
                over = tg.create_task(stdin_over.wait(), name="attach-stdin-over")
                done, _ = await asyncio.wait((out, reader, over), return_when=asyncio.FIRST_COMPLETED)
                for task in (out, reader, over):
                    task.cancel()
            if (out in done or over in done) and not ws.closed:
                await send_status(ws, protocol, ch.exit_status(0))
        except* ConnectionError:
            log.debug("attach client went away", extra={"pod": f"{ns}/{pod}", "container": container})
        finally:
            end_stdin()
            await asyncio.gather(*ended)
            if not ws.closed:
                await ws.close()
        return ws

    return handler


async def _attach_terminal(ws: web.WebSocketResponse, terminal: ContainerTerminal, *, stdin: bool, stdout: bool, protocol: str,
                           where: str) -> None:
    """Attach to a container's own terminal: its raw output as it comes, typed input and
    resizes to the pty; ends when the container's terminal closes or the client leaves."""
    async def send_output() -> None:
        async for data in terminal.subscribe():
            if stdout:
                await ws.send_bytes(ch.frame(ch.STDOUT, data))

    async def typed(data: bytes) -> None:
        if stdin:
            await terminal.write(data)

    stdin_over = asyncio.Event()

    def close_stdin() -> None:  # the client's stdin ended (v5): so does the session, not the container's terminal
        if stdin:
            stdin_over.set()

    try:
        async with asyncio.TaskGroup() as tg:
            out = tg.create_task(send_output(), name="attach-tty-output")
            reader = tg.create_task(_read_client(ws, protocol=protocol, on_stdin=typed, on_close_stdin=close_stdin,
                                                 on_resize=terminal.resize), name="attach-tty-client")
            over = tg.create_task(stdin_over.wait(), name="attach-tty-stdin-over")
            done, _ = await asyncio.wait((out, reader, over), return_when=asyncio.FIRST_COMPLETED)
            for task in (out, reader, over):
                task.cancel()
        if (out in done or over in done) and not ws.closed:
            await send_status(ws, protocol, ch.exit_status(0))
    except* ConnectionError:
        log.debug("attach client went away", extra={"container": where})
    finally:
        if not ws.closed:
            await ws.close()


async def _follow_output(
    ctx: ServerContext, ws: web.WebSocketResponse, container_id: str, path: str, *, stdout: bool, stderr: bool, tty: bool, poll: float
) -> None:
    """The container's new log records until it exits."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return
    with fh:
        fh.seek(0, os.SEEK_END)
        pending = b""
        while True:
            data = fh.read(65536)
            if data:
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    record = parse_record(line)
                    if record is None:
                        continue
                    channel = ch.STDERR if record.stream == "stderr" and not tty else ch.STDOUT
                    if (channel == ch.STDOUT and stdout) or (channel == ch.STDERR and stderr):
                        await ws.send_bytes(ch.frame(channel, record.content if record.partial else record.content + b"\n"))
                continue
            try:
                status = await ctx.runtime.container_status(container_id)
                running = status.state == ContainerState.RUNNING
            except NotFoundError:
                running = False
            if not running:
                return
            await asyncio.sleep(poll)

