"""k8py up's PKI (k8py.cluster.pki): the identities contract, the serving names, reuse and re-issue."""

from __future__ import annotations

import base64
import ipaddress
import os
import socket
import stat

import yaml
from cryptography import x509

from k8py.client import certs
from k8py.cluster.pki import ClusterPKI

URL = "https://127.0.0.1:6443"


def _ensure(pki: ClusterPKI, **kw) -> None:
    args = {"api_url": URL, "bind": "127.0.0.1", "service_ip": "127.192.0.1", "nodes": ["n0", "k8py-sim"], "simulated": "k8py-sim"}
    pki.ensure(**{**args, **kw})


def _cert(pki: ClusterPKI, name: str) -> x509.Certificate:
    return certs.parse_cert_pem(certs.read_pem(pki.cert_file(name)))


def test_every_component_has_its_contracted_identity(tmp_path):
    pki = ClusterPKI(str(tmp_path))
    _ensure(pki)
    expected = {
        "admin": ("system:admin", ("system:masters",)),
        "controller-manager": ("system:kube-controller-manager", ()),
        "scheduler": ("system:kube-scheduler", ()),
        "proxy": ("system:kube-proxy", ()),
        "dns": ("system:k8py-dns", ()),
        "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ()),
        "node-n0": ("system:node:n0", ("system:nodes",)),
        "node-k8py-sim": ("system:k8py-simulated-kubelet", ("system:masters",)),
    }
    ca = _cert(pki, "ca")
    for name, identity in expected.items():
        cert = _cert(pki, name)
        assert certs.cert_subject(cert) == identity, name
        cert.verify_directly_issued_by(ca)
        assert stat.S_IMODE(os.stat(pki.key_file(name)).st_mode) == 0o600


def test_the_serving_certificate_names_every_address_of_the_api_server(tmp_path):
    pki = ClusterPKI(str(tmp_path))
    _ensure(pki, bind="0.0.0.0")
    san = _cert(pki, "apiserver").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.IPAddress)) == {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("127.192.0.1")}
    assert set(san.get_values_for_type(x509.DNSName)) >= {
        "localhost", socket.gethostname().lower(), "kubernetes", "kubernetes.default", "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local"}
    kubelet = _cert(pki, "kubelet-n0").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "n0" in kubelet.get_values_for_type(x509.DNSName)


def test_certificates_are_kept_across_restarts_and_reissued_when_the_names_change(tmp_path):
    pki = ClusterPKI(str(tmp_path))
    _ensure(pki)
    ca, serving, admin = (certs.read_pem(pki.cert_file(n)) for n in ("ca", "apiserver", "admin"))
    _ensure(pki, api_url="https://127.0.0.1:7000")  # a resumed cluster on another port
    assert (certs.read_pem(pki.cert_file("ca")), certs.read_pem(pki.cert_file("apiserver")), certs.read_pem(pki.cert_file("admin"))) == (ca, serving, admin)
    _ensure(pki, bind="127.0.0.9")  # a new address: a new serving certificate from the same CA
    assert certs.read_pem(pki.cert_file("apiserver")) != serving
    assert certs.read_pem(pki.cert_file("ca")) == ca
    assert ipaddress.ip_address("127.0.0.9") in _cert(pki, "apiserver").extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.IPAddress)


def test_kubeconfigs_embed_the_ca_and_each_components_certificate(tmp_path):
    pki = ClusterPKI(str(tmp_path))
    _ensure(pki, api_url="https://127.0.0.1:7001")
    for component, path in (("admin", tmp_path / "kubeconfig"), ("scheduler", tmp_path / "kubeconfigs" / "scheduler.kubeconfig")):
        doc = yaml.safe_load(open(path))
        cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
        assert cluster["server"] == "https://127.0.0.1:7001"
        assert base64.b64decode(cluster["certificate-authority-data"]) == certs.read_pem(pki.ca_file)
        assert base64.b64decode(user["client-certificate-data"]) == certs.read_pem(pki.cert_file(component))
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_the_front_proxy_pair_is_its_own_ca_and_kept_across_restarts(tmp_path):
    """kubeadm's front-proxy-ca and front-proxy-client: what aggregated API servers trust, apart from the cluster CA."""
    from k8py.cluster.pki import FRONT_PROXY_CA, FRONT_PROXY_CLIENT

    pki = ClusterPKI(str(tmp_path))
    _ensure(pki)
    front_ca, client = _cert(pki, FRONT_PROXY_CA), _cert(pki, FRONT_PROXY_CLIENT)
    client.verify_directly_issued_by(front_ca)
    assert certs.cert_subject(client) == ("front-proxy-client", ())
    assert front_ca.subject != _cert(pki, "ca").subject
    before = certs.read_pem(pki.cert_file(FRONT_PROXY_CLIENT))
    _ensure(pki, api_url="https://127.0.0.1:7002")
    assert certs.read_pem(pki.cert_file(FRONT_PROXY_CLIENT)) == before
