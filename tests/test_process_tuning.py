"""What every ``k8py`` process sets before it runs (:mod:`k8py.cli.process_tuning`).

A TLS connection made after :func:`tune_process` reads into a receive buffer
of :data:`TLS_RECEIVE_BUFFER` bytes, not asyncio's 256 KiB, and still carries a
payload larger than the buffer intact (it is read in more, smaller reads); the
connections of one thread share that buffer, and connections reading at the
same time each still get their own bytes, intact; another thread's loop has
a buffer of its own.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import threading
from asyncio import sslproto

from k8py.cli.process_tuning import TLS_RECEIVE_BUFFER, thread_receive_buffer, tune_process
from k8py.client import certs


def _contexts(tmp_path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca = certs.new_self_signed_ca("tuning-test-ca")
    cert, key = ca.issue(certs.CertConfig("localhost", dns_names=["localhost"], ips=["127.0.0.1"], usages=(certs.SERVER_AUTH,)))
    cert_file, key_file, ca_file = (os.path.join(tmp_path, n) for n in ("tls.crt", "tls.key", "ca.crt"))
    certs.write_pem(cert_file, certs.encode_cert_pem(cert))
    certs.write_pem(key_file, certs.encode_private_key_pem(key), private=True)
    certs.write_pem(ca_file, ca.cert_pem)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    return server, ssl.create_default_context(cafile=ca_file)


async def test_a_tls_connection_gets_the_small_receive_buffer_and_still_carries_big_payloads(tmp_path):
    before = sslproto.SSLProtocol.max_size
    tune_process()
    try:
        assert sslproto.SSLProtocol.max_size == TLS_RECEIVE_BUFFER < before
        server_ctx, client_ctx = _contexts(tmp_path)
        payload = os.urandom(TLS_RECEIVE_BUFFER * 20 + 7)

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(payload)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, server_hostname="localhost")
        protocol = writer.transport._ssl_protocol  # type: ignore[attr-defined]
        assert len(protocol._ssl_buffer) == TLS_RECEIVE_BUFFER
        assert await reader.read() == payload
        writer.close()
        server.close()
        await server.wait_closed()
    finally:
        sslproto.SSLProtocol.max_size = before


async def test_the_connections_of_a_thread_share_one_receive_buffer_and_each_gets_its_own_bytes(tmp_path):
    before = sslproto.SSLProtocol.max_size
    tune_process()
    try:
        server_ctx, client_ctx = _contexts(tmp_path)
        payloads = [os.urandom(TLS_RECEIVE_BUFFER * 40 + n) for n in range(4)]

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            which = (await reader.readexactly(1))[0]
            for start in range(0, len(payloads[which]), 5000):  # small writes: the reads of all four interleave
                writer.write(payloads[which][start:start + 5000])
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        streams = [await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, server_hostname="localhost") for _ in payloads]
        buffers = {id(writer.transport._ssl_protocol._ssl_buffer) for _, writer in streams}  # type: ignore[attr-defined]
        assert buffers == {id(thread_receive_buffer(TLS_RECEIVE_BUFFER)[0])}
        for which, (_, writer) in enumerate(streams):
            writer.write(bytes([which]))

        async def read_all(reader: asyncio.StreamReader) -> bytes:
            chunks = []
            while chunk := await reader.read(7000):
                chunks.append(chunk)
            return b"".join(chunks)

        assert await asyncio.gather(*(read_all(reader) for reader, _ in streams)) == payloads
        for _, writer in streams:
            writer.close()
        server.close()
        await server.wait_closed()
        elsewhere: list[int] = []
        thread = threading.Thread(target=lambda: elsewhere.append(id(thread_receive_buffer(TLS_RECEIVE_BUFFER)[0])))
        thread.start()
        thread.join()
        assert elsewhere and elsewhere[0] not in buffers
    finally:
        sslproto.SSLProtocol.max_size = before
