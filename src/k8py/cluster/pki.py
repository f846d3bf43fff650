"""The certificates and kubeconfigs of one ``k8py up`` cluster, as k3s and kubeadm lay them out.

In ``DATA_DIR/pki``:

=================================  ==================================================
``ca.crt`` / ``ca.key``            the cluster CA: signs everything below, and is the
                                   ``--client-ca-file`` of the API server and kubelets
``apiserver.crt``                  the API server's serving certificate; SANs: 127.0.0.1,
                                   localhost, the host name, the bind address, the first
                                   IP of the Service range and kubernetes[.default[.svc
                                   [.cluster.local]]]
``apiserver-kubelet-client.crt``   CN=kube-apiserver-kubelet-client: the API server's
                                   identity towards kubelets (their SubjectAccessReviews
                                   allow it through the binding to system:kubelet-api-admin)
``kubelet-<node>.crt``             each kubelet's serving certificate (its IP and name)
``<component>.crt``                each component's client certificate (:data:`IDENTITIES`;
                                   ``node-<node>.crt`` for kubelets)
``front-proxy-ca.crt``             the request-header CA aggregated API servers trust, and
``front-proxy-client.crt``         the API server's client certificate towards them
=================================  ==================================================

``DATA_DIR/service-account.key`` (where the API server and the controller
manager look for it) is the key service-account tokens are signed with: made
here rather than by the API server on its first start, while the zygote is
still importing, and an ECDSA P-256 key (ES256, which kube-apiserver takes as
well as RSA): an RSA key takes a third of a second to make and a tenth to
load (cryptography validates it), in every process that signs with it, on
the path to the API server's first answer; a P-256 key, well under a
millisecond. (A cluster made before keeps its RSA key.)

And one kubeconfig per component in ``DATA_DIR/kubeconfigs`` (the admin's is
``DATA_DIR/kubeconfig``), each with the CA as ``certificate-authority-data``
and its client certificate and key embedded.

Invariants: the CA and every certificate are made once and kept across
restarts (a resumed cluster keeps trusting the same CA); a certificate is
re-issued only when missing, when its SANs no longer cover the cluster's
addresses, or when it expires within 30 days. Keys are mode 0600. The
identities are the contract with RBAC's bootstrap bindings: never rename them.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

from k8py.cluster.kubeconfig import write_kubeconfig

if TYPE_CHECKING:
    from cryptography import x509

    from k8py.client import certs
# (cryptography is imported by the methods that make certificates: ``k8py up``
# reads the paths before it starts the zygote, which must not wait for it)

__all__ = ["ClusterPKI", "IDENTITIES", "ADMIN", "SIMULATED_KUBELET", "node_identity", "FRONT_PROXY_CA", "FRONT_PROXY_CLIENT"]

#: component -> (user, groups) of its client certificate (the controller
#: manager's identity only makes service-account tokens for its controllers:
#: --use-service-account-credentials)
ADMIN = ("system:admin", ("system:masters",))
IDENTITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ADMIN,
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "proxy": ("system:kube-proxy", ()),
    "dns": ("system:k8py-dns", ()),
    "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ()),
}

#: the request-header CA and the API server's client certificate towards aggregated API
#: servers (kubeadm's front-proxy-ca and front-proxy-client): made here once, rather than
#: by the API server at each start (a CA and a certificate on the way to its first answer)
FRONT_PROXY_CA, FRONT_PROXY_CLIENT = "front-proxy-ca", "front-proxy-client"

_RENEW_BEFORE = dt.timedelta(days=30)
_CLUSTER_DOMAIN = "cluster.local"


#: the simulated-nodes process: one client for many Nodes, which the Node
#: authorizer and NodeRestriction (one identity, one node) cannot allow
SIMULATED_KUBELET = ("system:k8py-simulated-kubelet", ("system:masters",))


def node_identity(node: str, *, simulated: bool = False) -> tuple[str, tuple[str, ...]]:
    """A kubelet's user and groups (the Node authorizer's ``system:node:<name>``)."""
    if simulated:
        return SIMULATED_KUBELET
    return f"system:node:{node}", ("system:nodes",)


@dataclass
class ClusterPKI:
    data_dir: str

    @property
    def dir(self) -> str:
        return os.path.join(self.data_dir, "pki")

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    @property
    def ca_file(self) -> str:
        return self.path("ca.crt")

    def cert_file(self, name: str) -> str:
        return self.path(f"{name}.crt")

    def key_file(self, name: str) -> str:
        return self.path(f"{name}.key")

    def kubeconfig(self, component: str) -> str:
        if component == "admin":
            return os.path.join(self.data_dir, "kubeconfig")
        return os.path.join(self.data_dir, "kubeconfigs", f"{component}.kubeconfig")

    @property
    def service_account_key_file(self) -> str:
        return os.path.join(self.data_dir, "service-account.key")

    @staticmethod
    def kubelet_name(node: str) -> str:
        return f"kubelet-{node}"

    # -- making it ----------------------------------------------------------------

    def ensure(self, *, api_url: str, bind: str, service_ip: str, nodes: list[str], simulated: str = "") -> None:
        """Make (or complete) the PKI and (re)write every kubeconfig for ``api_url``;
        ``simulated``: the node name of the simulated-nodes process (one of ``nodes``)."""
        from k8py.client import certs

        if not os.path.exists(self.service_account_key_file):
            from k8py.api.service_account_keys import ensure_signing_key_file  # joserfc: only when a key is made

            ensure_signing_key_file(self.service_account_key_file, ec_p256=True)
        ca = self._ca()
        ips = _unique(["127.0.0.1", *([bind] if bind not in ("0.0.0.0", "::", "") else []), service_ip])
        dns = _unique(["localhost", socket.gethostname().lower(), "kubernetes", "kubernetes.default",
                       "kubernetes.default.svc", f"kubernetes.default.svc.{_CLUSTER_DOMAIN}"])
        self._leaf(ca, "apiserver", certs.CertConfig("kube-apiserver", dns_names=dns, ips=ips, usages=(certs.SERVER_AUTH,)))
        for node in nodes:
            self._leaf(ca, self.kubelet_name(node), certs.CertConfig(
                node, dns_names=_unique([node, "localhost"]), ips=["127.0.0.1"], usages=(certs.SERVER_AUTH,)))
        front_proxy = self._ca(FRONT_PROXY_CA)
        self._leaf(front_proxy, FRONT_PROXY_CLIENT, certs.CertConfig(FRONT_PROXY_CLIENT, usages=(certs.CLIENT_AUTH,)))
        identities = {**IDENTITIES, **{f"node-{n}": node_identity(n, simulated=n == simulated) for n in nodes}}
        for name, (user, groups) in identities.items():
            self._leaf(ca, name, certs.CertConfig(user, organization=groups, usages=(certs.CLIENT_AUTH,)))
            if name == "apiserver-kubelet-client":
                continue
            write_kubeconfig(self.kubeconfig(name), api_url, ca_data=ca.cert_pem,
                             client_cert_data=certs.read_pem(self.cert_file(name)),
                             client_key_data=certs.read_pem(self.key_file(name)))

    def _ca(self, name: str = "ca") -> certs.CertificateAuthority:
        from k8py.client import certs

        if os.path.exists(self.cert_file(name)) and os.path.exists(self.key_file(name)):
            return certs.CertificateAuthority.load(self.cert_file(name), self.key_file(name))
        ca = certs.new_self_signed_ca("k8py-ca" if name == "ca" else name)
        ca.save(self.cert_file(name), self.key_file(name))
        return ca

    def _leaf(self, ca: certs.CertificateAuthority, name: str, config: certs.CertConfig) -> None:
        from k8py.client import certs

        cert_path, key_path = self.cert_file(name), self.key_file(name)
        if os.path.exists(cert_path) and os.path.exists(key_path) and _still_good(certs.parse_cert_pem(certs.read_pem(cert_path)), ca, config):
            return
        cert, key = ca.issue(config)
        certs.write_pem(key_path, certs.encode_private_key_pem(key), private=True)
        certs.write_pem(cert_path, certs.encode_cert_pem(cert))

    # -- using it -----------------------------------------------------------------

    def client_ssl_context(self, component: str = "admin") -> ssl.SSLContext:
        """TLS as ``component`` (trusting the cluster CA): the supervisor's and ``k8py status``' view."""
        ctx = ssl.create_default_context(cafile=self.ca_file)
        ctx.load_cert_chain(self.cert_file(component), self.key_file(component))
        return ctx


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def _still_good(cert: x509.Certificate, ca: certs.CertificateAuthority, config: certs.CertConfig) -> bool:
    from cryptography import x509

    from k8py.client import certs

    if cert.issuer != ca.cert.subject or cert.not_valid_after_utc - certs.utcnow() < _RENEW_BEFORE:
        return False
    if certs.cert_subject(cert) != (config.common_name, tuple(config.organization)):
        return False
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return not config.dns_names and not config.ips
    have_ips = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    want_ips = {str(ipaddress.ip_address(ip)) for ip in config.ips}
    return set(config.dns_names) <= set(san.get_values_for_type(x509.DNSName)) and want_ips <= have_ips
