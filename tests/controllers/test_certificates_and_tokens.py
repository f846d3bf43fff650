"""The controller manager's certificate and token controllers against a real API server:
csrsigning with kubectl certificate approve/deny, serviceaccount-token (legacy Secrets, whose
tokens a TokenReview then accepts), root-ca-cert-publisher."""

from __future__ import annotations

import asyncio
import base64
import textwrap

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from k8py.api.errors import Invalid, NotFound
from k8py.api.service_account_keys import generate_signing_key, load_verifying_keys
from k8py.client import certs
from k8py.client.resource import Resource
from k8py.client.resources import CERTIFICATE_SIGNING_REQUESTS, CONFIGMAPS, NAMESPACES, SECRETS, SERVICE_ACCOUNTS
from k8py.controllers.context import ControllerOptions
from tests.support.kube import Kubectl

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", False, "TokenReview")


async def eventually(probe, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


@pytest.fixture
def ca_files(tmp_path) -> tuple[str, str, certs.CertificateAuthority]:
    ca = certs.new_self_signed_ca("k8py-test-ca")
    cert, key = str(tmp_path / "ca.crt"), str(tmp_path / "ca.key")
    ca.save(cert, key)
    return cert, key, ca


def _csr_yaml(name: str, signer: str, usages: list[str], cn: str, orgs: tuple[str, ...] = ()) -> str:
    pem = certs.new_csr(certs.new_private_key(), cn, orgs)
    return textwrap.dedent(f"""\
        apiVersion: certificates.k8s.io/v1
        kind: CertificateSigningRequest
        metadata:
          name: {name}
        spec:
          request: {base64.b64encode(pem).decode()}
          signerName: {signer}
          expirationSeconds: 86400
          usages: [{", ".join(usages)}]
        """)


async def test_kubectl_certificate_approve_then_the_signer_issues_it(server, client, start_manager, ca_files, tmp_path) -> None:
    cert_file, key_file, ca = ca_files
    await start_manager("csrsigning", options=ControllerOptions(cluster_signing_cert_file=cert_file, cluster_signing_key_file=key_file))
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    yaml = _csr_yaml("alice", "kubernetes.io/kube-apiserver-client", ["client auth"], "alice", ("devs",))
    await asyncio.to_thread(kubectl.run, "apply", "-f", "-", input=yaml)
    listing = (await asyncio.to_thread(kubectl.run, "get", "csr")).stdout.splitlines()
    assert listing[0].split() == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
    assert listing[1].split()[2:] == ["kubernetes.io/kube-apiserver-client", "system:unsecured", "24h", "Pending"]
    stored = await client.get(CERTIFICATE_SIGNING_REQUESTS, None, "alice")
    assert stored["spec"]["username"] == "system:unsecured" and "certificate" not in (stored.get("status") or {})

    out = await asyncio.to_thread(kubectl.run, "certificate", "approve", "alice")
    assert out.stdout == "certificatesigningrequest.certificates.k8s.io/alice approved\n"

    async def issued():  # type: ignore[no-untyped-def]
        csr = await client.get(CERTIFICATE_SIGNING_REQUESTS, None, "alice")
        return (csr.get("status") or {}).get("certificate") and csr

    csr = await eventually(issued)
    approved = [c for c in csr["status"]["conditions"] if c["type"] == "Approved"]
    assert approved[0]["reason"] == "KubectlApprove"
    cert = x509.load_pem_x509_certificate(base64.b64decode(csr["status"]["certificate"]))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "devs"
    assert cert.issuer == ca.cert.subject
    cert.verify_directly_issued_by(ca.cert)
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert 86400 <= lifetime.total_seconds() <= 86400 + 600  # its expirationSeconds (plus the backdating)
    condition = (await asyncio.to_thread(kubectl.run, "get", "csr", "alice")).stdout.splitlines()[1].split()[-1]
    assert condition == "Approved,Issued"


async def test_denied_and_invalid_requests_get_no_certificate(server, client, start_manager, ca_files, tmp_path) -> None:
    cert_file, key_file, _ = ca_files
    await start_manager("csrsigning", options=ControllerOptions(cluster_signing_cert_file=cert_file, cluster_signing_key_file=key_file))
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    await asyncio.to_thread(kubectl.run, "apply", "-f", "-",
                            input=_csr_yaml("bob", "kubernetes.io/kube-apiserver-client", ["client auth"], "bob"))
    await asyncio.to_thread(kubectl.run, "apply", "-f", "-",
                            input=_csr_yaml("server", "kubernetes.io/kube-apiserver-client", ["server auth"], "x"))
    assert (await asyncio.to_thread(kubectl.run, "certificate", "deny", "bob")).stdout.endswith("/bob denied\n")
    await asyncio.to_thread(kubectl.run, "certificate", "approve", "server")

    async def failed():  # type: ignore[no-untyped-def]
        csr = await client.get(CERTIFICATE_SIGNING_REQUESTS, None, "server")
        return [c for c in (csr.get("status") or {}).get("conditions") or () if c["type"] == "Failed"]

    cond = (await eventually(failed))[0]
    assert (cond["reason"], cond["message"]) == ("SignerValidationFailure", "invalid usage for client certificate: server auth")
    bob = await client.get(CERTIFICATE_SIGNING_REQUESTS, None, "bob")
    assert [c["type"] for c in bob["status"]["conditions"]] == ["Denied"] and "certificate" not in bob["status"]
    rows = (await asyncio.to_thread(kubectl.run, "get", "csr")).stdout
    assert "Denied" in rows and "Approved,Failed" in rows
    # kubectl refuses to approve a denied request; asked directly, the server refuses both at once
    assert "is already Denied" in (await asyncio.to_thread(kubectl.run, "certificate", "approve", "bob", check=False)).stderr
    both = {**bob, "status": {"conditions": [*bob["status"]["conditions"], {"type": "Approved", "status": "True"}]}}
    with pytest.raises(Invalid) as err:
        await client.update(CERTIFICATE_SIGNING_REQUESTS, both, subresource="approval")
    assert "Approved and Denied conditions are mutually exclusive" in err.value.message
    gone = {**bob, "status": {"conditions": []}}
    with pytest.raises(Invalid) as err:
        await client.update(CERTIFICATE_SIGNING_REQUESTS, gone, subresource="approval")
    assert 'updates may not remove a condition of type "Denied"' in err.value.message


async def test_a_csr_that_is_not_a_csr_is_invalid(server, tmp_path) -> None:
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    yaml = textwrap.dedent(f"""\
        apiVersion: certificates.k8s.io/v1
        kind: CertificateSigningRequest
        metadata: {{name: junk}}
        spec: {{request: {base64.b64encode(b"hello").decode()}, signerName: example.com/x, usages: [client auth]}}
        """)
    out = await asyncio.to_thread(kubectl.run, "apply", "-f", "-", input=yaml, check=False)
    assert out.returncode != 0
    assert out.stderr == 'The CertificateSigningRequest "junk" is invalid: spec.request: Invalid value: []byte{...}: ' \
           "PEM block type must be CERTIFICATE REQUEST\n"


async def test_legacy_token_secrets_are_filled_and_accepted_until_their_account_goes(server, client, start_manager, tmp_path, ca_files) -> None:
    key_file = str(tmp_path / "sa.key")
    with open(key_file, "wb") as f:
        f.write(generate_signing_key().pem())
    # the API server verifies what the controller manager signs (upstream: --service-account-key-file)
    server.server.service_accounts.verifying_keys.extend(load_verifying_keys(key_file))
    cert_file, _, ca = ca_files
    await start_manager("serviceaccount-token", options=ControllerOptions(service_account_private_key_file=key_file, root_ca_file=cert_file))
    sa = await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": "robot"}}, namespace="default")
    await client.create(SECRETS, {"metadata": {"name": "robot-token", "annotations": {"kubernetes.io/service-account.name": "robot"}},
                                  "type": "kubernetes.io/service-account-token"}, namespace="default")

    async def filled():  # type: ignore[no-untyped-def]
        secret = await client.get(SECRETS, "default", "robot-token")
        return (secret.get("data") or {}).get("token") and secret

    secret = await eventually(filled)
    assert secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == sa["metadata"]["uid"]
    assert base64.b64decode(secret["data"]["namespace"]) == b"default"
    assert base64.b64decode(secret["data"]["ca.crt"]) == ca.cert_pem
    token = base64.b64decode(secret["data"]["token"]).decode()
    review = await client.create(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
    assert review["status"]["authenticated"] is True
    assert review["status"]["user"]["username"] == "system:serviceaccount:default:robot"
    assert review["status"]["user"]["uid"] == sa["metadata"]["uid"]

    await client.delete(SERVICE_ACCOUNTS, "default", "robot")

    async def gone():  # type: ignore[no-untyped-def]
        try:
            await client.get(SECRETS, "default", "robot-token")
        except NotFound:
            return True
        return False

    await eventually(gone)

    async def rejected():  # type: ignore[no-untyped-def]
        r = await client.create(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        return not r["status"]["authenticated"] and r

    assert 'referenced by the token not found' in (await eventually(rejected))["status"]["error"]


async def test_every_namespace_gets_the_root_ca_configmap_back(client, start_manager, ca_files) -> None:
    cert_file, _, ca = ca_files
    await start_manager("root-ca-cert-publisher", options=ControllerOptions(root_ca_file=cert_file))
    await client.create(NAMESPACES, {"metadata": {"name": "team-a"}})

    async def published(ns: str):  # type: ignore[no-untyped-def]
        try:
            cm = await client.get(CONFIGMAPS, ns, "kube-root-ca.crt")
        except NotFound:
            return None
        return cm if cm.get("data") == {"ca.crt": ca.cert_pem.decode()} else None

    for ns in ("default", "kube-system", "team-a"):
        cm = await eventually(lambda: published(ns))
    assert cm["metadata"]["annotations"]["kubernetes.io/description"].startswith("Contains a CA bundle that can be used to verify the kube-apiserver")
    await client.delete(CONFIGMAPS, "team-a", "kube-root-ca.crt")
    await eventually(lambda: published("team-a"))
    cm = await client.get(CONFIGMAPS, "team-a", "kube-root-ca.crt")
    await client.update(CONFIGMAPS, {**cm, "data": {"ca.crt": "tampered"}})
    await eventually(lambda: published("team-a"))


def test_controllers_without_their_files_are_not_started() -> None:
    from k8py.controllers.certificates import signer
    from k8py.controllers import root_ca_publisher, serviceaccount_token

    class Ctx:
        options = ControllerOptions()
        client = None

    assert signer.new_controller(Ctx()) is None  # type: ignore[arg-type]
    assert serviceaccount_token.new_controller(Ctx()) is None  # type: ignore[arg-type]
    assert root_ca_publisher.new_controller(Ctx()) is None  # type: ignore[arg-type]
