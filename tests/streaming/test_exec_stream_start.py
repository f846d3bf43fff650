"""How an exec or attach stream starts, through the API server's relay to the kubelet.

- Nothing from the kubelet reaches the client before the client has answered
  the relay's first ping: client-go drops a message for a stream it has not
  registered yet ("Unknown stream id 1, discarding message"), and the kubelet's
  empty first message or a quick command's output used to arrive in that gap.
- A client offering no WebSocket subprotocol gets the legacy base channel
  protocol, as upstream serves it: the same channels, the error channel
  carrying only a failure's message as text.

Raw aiohttp clients (autoping off, so the test decides when to answer) and the
real kubectl; the runtime double runs the commands on the host.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from k8py.apiserver.streaming import websocket_relay

PARAMS = [("command", "sh"), ("command", "-c"), ("command", "echo out"), ("stdout", "true"), ("stderr", "true")]


def _running(cluster, name="web"):
    cluster.pod(name)
    cluster.runtime.add("default", name, "main")


def _exec_url(cluster, name="web", sub="exec") -> str:
    return cluster.apiserver.url.replace("http", "ws", 1) + f"/api/v1/namespaces/default/pods/{name}/{sub}"


async def _collect(ws) -> list[tuple[int, bytes]]:
    """(channel, payload) of every binary message until the socket closes (pings answered)."""
    frames = []
    while True:
        msg = await ws.receive(timeout=60)
        if msg.type == aiohttp.WSMsgType.PING:
            await ws.pong(msg.data)
        elif msg.type == aiohttp.WSMsgType.BINARY:
            frames.append((msg.data[0], bytes(msg.data[1:])))
        elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING):
            return frames


def test_the_kubelets_messages_wait_for_the_clients_first_pong(cluster):
    _running(cluster)

    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(_exec_url(cluster), params=PARAMS, protocols=("v5.channel.k8s.io",),
                                          autoping=False) as ws:
                first = await ws.receive(timeout=60)
                assert first.type == aiohttp.WSMsgType.PING, first
                # unanswered, the ping holds everything back: the command's output is ready by now
                with pytest.raises(asyncio.TimeoutError):
                    await ws.receive(timeout=1.0)
                await ws.pong(first.data)
                frames = await _collect(ws)
        assert frames[0] == (1, b""), frames  # the "stream is up" message, now that the client can take it
        assert b"".join(p for c, p in frames if c == 1) == b"out\n"
        assert [p for c, p in frames if c == 3] == [b'{"metadata":{},"status":"Success"}']

    asyncio.run(go())


def test_a_client_that_never_answers_the_ping_still_gets_its_output(cluster, monkeypatch):
    monkeypatch.setattr(websocket_relay, "PONG_WAIT", 0.5)
    _running(cluster)

    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(_exec_url(cluster), params=PARAMS, protocols=("v5.channel.k8s.io",),
                                          autoping=False) as ws:
                frames = []
                while True:
                    msg = await ws.receive(timeout=60)
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        frames.append((msg.data[0], bytes(msg.data[1:])))
                    elif msg.type != aiohttp.WSMsgType.PING:
                        break
        assert b"".join(p for c, p in frames if c == 1) == b"out\n"

    asyncio.run(go())


def test_kubectl_exec_stderr_holds_only_the_commands_own_output(cluster):
    """The flake this guards against: kubectl printed "Unknown stream id 1, discarding
    message" (and could lose output) when the first messages beat its stream set-up."""
    _running(cluster)
    for _ in range(8):
        result = cluster.kubectl.run("exec", "web", "--", "sh", "-c", "echo out; echo err >&2")
        assert (result.stdout, result.stderr) == ("out\n", "err\n")


def test_a_client_offering_no_subprotocol_gets_the_legacy_channel_protocol(cluster):
    _running(cluster)

    async def run(command: str) -> tuple[str | None, list[tuple[int, bytes]]]:
        params = [("command", "sh"), ("command", "-c"), ("command", command), ("stdout", "true"), ("stderr", "true")]
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(_exec_url(cluster), params=params, autoping=False) as ws:
                return ws.protocol, await _collect(ws)

    async def go() -> None:
        protocol, frames = await run("echo out; echo err >&2")
        assert protocol is None
        assert b"".join(p for c, p in frames if c == 1) == b"out\n"
        assert b"".join(p for c, p in frames if c == 2) == b"err\n"
        assert [p for c, p in frames if c == 3] == []  # success: nothing on the error channel
        _, frames = await run("exit 3")
        assert [p for c, p in frames if c == 3] == [
            b"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"]

    asyncio.run(go())


def test_the_named_legacy_protocol_is_served_and_an_unknown_one_is_refused(cluster):
    _running(cluster)

    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(_exec_url(cluster), params=PARAMS, protocols=("channel.k8s.io",)) as ws:
                assert ws.protocol == "channel.k8s.io"
                frames = await _collect(ws)
            assert b"".join(p for c, p in frames if c == 1) == b"out\n"
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                async with session.ws_connect(_exec_url(cluster), params=PARAMS, protocols=("v9.channel.k8s.io",)):
                    pass
            assert refused.value.status == 400

    asyncio.run(go())


def test_attach_without_a_subprotocol_streams_the_containers_output(cluster):
    _running(cluster)

    async def go() -> None:
        params = [("stdout", "true"), ("stderr", "true")]
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(_exec_url(cluster, sub="attach"), params=params, autoping=False) as ws:
                assert ws.protocol is None
                first = await ws.receive(timeout=60)
                assert first.type == aiohttp.WSMsgType.PING, first
                await ws.pong(first.data)
                msg = await ws.receive(timeout=60)
                assert (msg.type, msg.data) == (aiohttp.WSMsgType.BINARY, b"\x01")

    asyncio.run(go())
