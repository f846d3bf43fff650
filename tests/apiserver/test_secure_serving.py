"""The API server's TLS context (:mod:`k8py.apiserver.secure_serving`), over a real TLS connection.

It sends no TLS 1.3 session tickets: no client of the cluster resumes a
session with one, and each client connection would keep the last it got.
"""

from __future__ import annotations

import asyncio
import ssl

from k8py.apiserver.secure_serving import server_ssl_context, serving_certificate


async def test_a_client_gets_no_session_ticket(tmp_path):
    serving = serving_certificate(cert_file="", key_file="", cert_dir=str(tmp_path), host="127.0.0.1", service_ip="10.96.0.1")
    server_ctx = server_ssl_context(serving)
    client_ctx = ssl.create_default_context(cadata=serving.ca_pem.decode())

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(4)
        writer.write(b"pong")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, server_hostname="127.0.0.1")
    try:
        writer.write(b"ping")
        assert await reader.read() == b"pong"  # (a ticket, had one come, came before the answer)
        tls = writer.get_extra_info("ssl_object")
        assert tls.version() == "TLSv1.3"
        assert not tls.session.has_ticket
    finally:
        writer.close()
        server.close()
        await server.wait_closed()
