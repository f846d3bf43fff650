"""What every ``k8py`` process sets before it runs (:mod:`k8py.cli.process_tuning`).

A TLS connection made after :func:`tune_process` holds a receive buffer of
:data:`TLS_RECEIVE_BUFFER` bytes, not asyncio's 256 KiB, and still carries a
payload larger than the buffer intact (it is read in more, smaller reads).
"""

from __future__ import annotations

import asyncio
import os
import ssl
from asyncio import sslproto

from k8py.cli.process_tuning import TLS_RECEIVE_BUFFER, tune_process
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
