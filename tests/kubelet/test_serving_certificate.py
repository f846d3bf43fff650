"""The kubelet's serving certificate from the cluster (serverTLSBootstrap) against a real HTTPS API server with
Node,RBAC and the real csrapproving and csrsigning controllers: the server refuses every TLS handshake until the
cluster issues its certificate (as upstream's kubelet), asks with a kubernetes.io/kubelet-serving CSR that is NOT auto-approved, serves the signed certificate
once an admin approves, and renews it at 70-90 % of its life (an injected clock)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import ssl

from aiohttp import web
from cryptography import x509

from k8py.client import certs
from k8py.client.resources import CERTIFICATE_SIGNING_REQUESTS
from k8py.kubelet.certificate_rotation import rotation_deadline
from k8py.kubelet.serving_certificate import ServingCertificate
from tests.kubelet.test_certificate_rotation import _client, controllers, secure  # noqa: F401  (the fixture)


async def _peer_serial(port: int, ca: certs.CertificateAuthority) -> int:
    """The serial of the certificate the server presents, verified against the cluster CA as the node's name."""
    context = ssl.create_default_context(cadata=certs.encode_cert_pem(ca.cert).decode())
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="n1")
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()


async def _approve_next(admin, seen: set[str]) -> dict:
    for _ in range(600):
        pending = [c for c in (await admin.list(CERTIFICATE_SIGNING_REQUESTS))["items"] if c["metadata"]["name"] not in seen]
        if pending:
            break
        await asyncio.sleep(0.05)
    (csr,) = pending
    seen.add(csr["metadata"]["name"])
    assert not (csr.get("status") or {}).get("conditions")  # serving requests wait for an approver
    csr.setdefault("status", {})["conditions"] = [{"type": "Approved", "status": "True", "reason": "AdminApproved",
                                                   "message": "approved by the test"}]
    await admin.update(CERTIFICATE_SIGNING_REQUESTS, csr, subresource="approval")
    return csr


async def test_the_kubelet_serves_the_certificate_the_cluster_issues_and_renews_it(secure, tmp_path):  # noqa: F811
    server, ca, serving_ca = secure
    admin = _client(server.url, serving_ca, ca.issue_client("system:admin", ["system:masters"]))
    node = _client(server.url, serving_ca, ca.issue_client("system:node:n1", ["system:nodes"]))
    now = [dt.datetime.now(dt.timezone.utc)]

    async def nap(seconds: float) -> None:  # the loop's wait, shortened: the clock is the test's
        await asyncio.sleep(0.01)

    manager = ServingCertificate(node, node_name="n1", cert_dir=str(tmp_path / "pki"), addresses=("127.0.0.1",),
                                 clock=lambda: now[0], sleep=nap, rng=lambda: 0.5, poll=0.05, request_timeout=60)
    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=manager.context)
    await site.start()
    port = runner.addresses[0][1]
    seen: set[str] = set()
    try:
        # no certificate from the cluster yet: no TLS at all (upstream's GetCertificate error), whatever the client trusts
        for verify in (True, False):
            context = ssl.create_default_context(cadata=certs.encode_cert_pem(ca.cert).decode())
            if not verify:
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            try:
                await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="n1")
                raise AssertionError("the kubelet served TLS before the cluster issued its certificate")
            except (ssl.SSLError, ConnectionResetError):  # the alert, or the reset asyncio's transport sends instead
                pass
        assert manager.certificate() is None
        async with controllers(admin, tmp_path):
            task = asyncio.create_task(manager.run(), name="serving-certificate")
            try:
                csr = await _approve_next(admin, seen)
                assert csr["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
                assert csr["spec"]["username"] == "system:node:n1"
                assert csr["spec"]["usages"] == ["digital signature", "server auth"]
                for _ in range(600):
                    if manager.rotations:
                        break
                    await asyncio.sleep(0.05)
                first = manager.certificate()
                assert manager.rotations == 1 and first is not None
                first.verify_directly_issued_by(ca.cert)
                sans = first.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                assert sans.get_values_for_type(x509.DNSName) == ["n1"]
                assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
                assert await _peer_serial(port, ca) == first.serial_number  # new connections get it at once
                pem = tmp_path / "pki" / "kubelet-server-current.pem"
                assert oct(os.stat(pem).st_mode & 0o777) == "0o600"
                # nothing more until 70-90 % of its life; then a renewal, approved again, served again
                assert manager.deadline() == rotation_deadline(first, 0.5)
                now[0] = rotation_deadline(first, 0.5) + dt.timedelta(seconds=1)
                await _approve_next(admin, seen)
                for _ in range(600):
                    if manager.rotations == 2:
                        break
                    await asyncio.sleep(0.05)
                second = manager.certificate()
                assert manager.rotations == 2 and second is not None and second.serial_number != first.serial_number
                assert await _peer_serial(port, ca) == second.serial_number
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        # a restarted kubelet serves the stored certificate straight away
        again = ServingCertificate(node, node_name="n1", cert_dir=str(tmp_path / "pki"), addresses=("127.0.0.1",),
                                   clock=lambda: now[0])
        assert again.certificate() is not None and again.certificate().serial_number == second.serial_number
    finally:
        await runner.cleanup()
        await node.close()
        await admin.close()
