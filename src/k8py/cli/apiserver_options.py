"""The flags of ``k8py apiserver`` (kube-apiserver's names), and their parsers.

Kept apart from :mod:`k8py.cli.apiserver`, which turns parsed flags into a
running server: this module only declares and checks them, so building the
parser (which ``k8py zygote`` does once before it forks) imports nothing of
the API server. A flag's value that cannot be right (a malformed range, a
non-boolean) is refused by argparse with a message saying what to give instead.
"""

from __future__ import annotations

import argparse
import ipaddress

from k8py.cli.flag_values import go_bool
from k8py.cli.up import DEFAULT_DATA_DIR

__all__ = ["add_server_options", "parse_feature_gates"]


def _service_cidr(text: str) -> str:
    """``--service-cluster-ip-range``: a network such as 127.192.0.0/12, with room for Services."""
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not a network such as 127.192.0.0/12 ({err})") from None
    if network.num_addresses < 8:
        raise argparse.ArgumentTypeError(f"{text!r} holds {network.num_addresses} addresses; give a range of at least 8 (a /29)")
    return text


def _node_port_range(text: str) -> str:
    """``--service-node-port-range``: LOW-HIGH within 1-65535, as 30000-32767."""
    low, _, high = text.partition("-")
    try:
        first, last = int(low), int(high or low)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port range such as 30000-32767") from None
    if not 1 <= first <= last <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: ports must satisfy 1 <= LOW <= HIGH <= 65535, as 30000-32767")
    return text


def add_server_options(p: argparse.ArgumentParser, *, default_port: int) -> None:
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="where the embedded store and kubeconfig live (default: %(default)s)")
    p.add_argument("--bind-address", "--bind", dest="bind", default="127.0.0.1",
                   help="address the secure port listens on (default: %(default)s)")
    p.add_argument("--secure-port", type=int, default=None,
                   help=f"HTTPS port; 0 picks a free one (default: {default_port}, or none when only --insecure-port is given)")
    p.add_argument("--insecure-port", "--port", dest="insecure_port", type=int, default=None,
                   help="also (or, without --secure-port, only) serve plain HTTP on this loopback port, without "
                        "authentication: every request is system:masters; 0 picks a free one (default: off)")
    p.add_argument("--insecure-bind-address", default="127.0.0.1", help="loopback address of the insecure port (default: %(default)s)")
    p.add_argument("--tls-cert-file", default="", help="serving certificate (PEM; may hold intermediates after the leaf)")
    p.add_argument("--tls-private-key-file", default="", help="the serving certificate's key (PEM)")
    p.add_argument("--cert-dir", default="", help="where a self-signed serving pair is kept when no --tls-cert-file is given (default: DATA_DIR/certs)")
    p.add_argument("--client-ca-file", default="", help="authenticate client certificates signed by these CAs (CN = user, O = groups)")
    p.add_argument("--token-auth-file", default="", help="static bearer tokens, CSV: token,user,uid,\"group1,group2\"")
    p.add_argument("--anonymous-auth", type=go_bool, default=True, nargs="?", const=True, metavar="BOOL",
                   help="requests without credentials are system:anonymous (default: true; --anonymous-auth=false refuses them with 401)")
    p.add_argument("--kubelet-client-certificate", default="", help="client certificate the API server shows kubelets")
    p.add_argument("--kubelet-client-key", default="", help="its key")
    p.add_argument("--kubelet-certificate-authority", default="", help="CA that kubelets' serving certificates are checked with (HTTPS to kubelets)")
    p.add_argument("--etcd-servers", default="", help="comma-separated etcd client URLs; the embedded store is used when empty")
    p.add_argument("--etcd-prefix", default="/registry", help="etcd key prefix (default: %(default)s)")
    p.add_argument("--kubeconfig", default="", help="where to write the kubeconfig (default: DATA_DIR/kubeconfig)")
    p.add_argument("--no-kubeconfig", action="store_true", help="write no kubeconfig (k8py up writes each component's own)")
    p.add_argument("--watch-bookmark-interval", type=float, default=30.0, help="seconds between watch bookmarks")
    p.add_argument("--watch-cache-size", type=int, default=10_000, help="events of history kept per resource for watch resumption (default: %(default)s)")
    p.add_argument("--trace", action="store_true", help="record the list-watch flow for `k8py flow` (GET /debug/flow)")
    p.add_argument("--service-cluster-ip-range", default="127.192.0.0/12", type=_service_cidr,
                   help="the range Service cluster IPs come from; its first address is the kubernetes Service's (default: %(default)s)")
    p.add_argument("--service-node-port-range", default="30000-32767", type=_node_port_range,
                   help="the range node ports of NodePort Services come from (default: %(default)s)")
    p.add_argument("--service-repair-interval", type=float, default=180.0, metavar="SECONDS",
                   help="seconds between passes of the loop that puts cluster IP and node port claims right with the "
                        "Services (re-marks missing claims, frees leaked ones); upstream's fixed 3 minutes by default")
    p.add_argument("--service-repair-leak-grace", type=float, default=60.0, metavar="SECONDS",
                   help="a claim no Service uses is freed once it is this old and still unused after 3 passes (default: %(default)s)")
    p.add_argument("--enable-admission-plugins", action="append", default=[],
                   help="admission plugins to enable besides the defaults (comma-separated, repeatable; run in upstream's order)")
    p.add_argument("--feature-gates", action="append", default=[], metavar="NAME=BOOL",
                   help="alpha features to turn on (comma-separated, repeatable): MutatingAdmissionPolicy=true serves "
                        "admissionregistration.k8s.io/v1alpha1 MutatingAdmissionPolicy and runs its plugin")
    p.add_argument("--disable-admission-plugins", action="append", default=[],
                   help="default admission plugins to turn off (comma-separated), e.g. PodSecurity,ResourceQuota")
    p.add_argument("--encryption-provider-config", default="",
                   help="an EncryptionConfiguration file: which resources are encrypted at rest, with which keys")
    p.add_argument("--audit-policy-file", default="", help="an audit.k8s.io/v1 Policy: which requests are logged, at which level")
    p.add_argument("--audit-log-path", default="", help="where audit events go, one JSON line each ('-' = standard output)")
    p.add_argument("--audit-log-maxsize", type=int, default=0, help="megabytes of audit log before it is rotated (0 = never)")
    p.add_argument("--audit-log-maxbackup", type=int, default=0, help="rotated audit logs kept (0 = all)")
    p.add_argument("--audit-log-maxage", type=int, default=0, help="days a rotated audit log is kept (0 = forever)")
    p.add_argument("--max-requests-inflight", type=int, default=400,
                   help="with --max-mutating-requests-inflight, the seats API Priority and Fairness shares out "
                        "among the priority levels (both 0 = no limit; default: %(default)s)")
    p.add_argument("--max-mutating-requests-inflight", type=int, default=200,
                   help="added to --max-requests-inflight for the total seats (default: %(default)s)")
    p.add_argument("--admission-control-config-file", default="",
                   help="an AdmissionConfiguration file with plugins' configuration (e.g. PodSecurity's defaults)")
    p.add_argument("--default-not-ready-toleration-seconds", type=int, default=None, metavar="SECONDS",
                   help="the tolerationSeconds of the not-ready:NoExecute toleration DefaultTolerationSeconds adds "
                        "to every pod without one: how long its pods stay on a NotReady node (default: 300)")
    p.add_argument("--default-unreachable-toleration-seconds", type=int, default=None, metavar="SECONDS",
                   help="the same for unreachable:NoExecute, a node that stopped reporting (default: 300)")
    p.add_argument("--authorization-mode", default="AlwaysAllow", type=_authorization_modes,
                   help="authorizers asked in order, comma-separated: AlwaysAllow, AlwaysDeny, Node, RBAC "
                        "(default: %(default)s; k8py up runs Node,RBAC)")
    p.add_argument("--log-level", default="WARNING")
    _add_service_account_options(p)
    _add_aggregator_options(p)


def _add_aggregator_options(p: argparse.ArgumentParser) -> None:
    """The front proxy towards aggregated API servers (kube-apiserver's flags)."""
    p.add_argument("--requestheader-client-ca-file", default="",
                   help="the CA aggregated API servers trust for the front-proxy client certificate "
                        "(with --proxy-client-cert-file/--proxy-client-key-file; none of the three: one is made at start)")
    p.add_argument("--proxy-client-cert-file", default="", help="the client certificate this server presents to aggregated API servers")
    p.add_argument("--proxy-client-key-file", default="", help="the key of --proxy-client-cert-file")
    p.add_argument("--requestheader-allowed-names", default="",
                   help="comma-separated client certificate names aggregated servers accept (default: front-proxy-client)")


def _duration_seconds(text: str) -> int:
    """``--service-account-max-token-expiration``: Go's duration (``48h``, ``90m``, ``3600s``) or seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    try:
        if text and text[-1] in units:
            total, number = 0.0, ""
            for ch in text:
                if ch in units:
                    total += float(number) * units[ch]
                    number = ""
                else:
                    number += ch
            if number:
                raise ValueError(text)
            return int(total)
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 48h, 90m or 3600s") from None


def _add_service_account_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--service-account-issuer", action="append", default=None,
                   help="the iss of service-account tokens (repeatable: the first signs, all are accepted; "
                        "default https://kubernetes.default.svc.cluster.local)")
    p.add_argument("--service-account-signing-key-file", default="",
                   help="PEM private key that signs service-account tokens (default: DATA_DIR/service-account.key, made if missing)")
    p.add_argument("--service-account-key-file", action="append", default=[],
                   help="PEM file of more keys that verify service-account tokens (repeatable)")
    p.add_argument("--api-audiences", default="", help="comma-separated audiences a token must be for (default: the issuer)")
    p.add_argument("--service-account-max-token-expiration", type=_duration_seconds, default=None,
                   help="the longest a TokenRequest is granted, e.g. 48h (default: no cap)")
    p.add_argument("--service-account-extend-token-expiration", default="true", choices=("true", "false"),
                   help="give projected tokens asking for 3607 s a year, with warnafter (default: %(default)s)")
    p.add_argument("--service-account-jwks-uri", default="", help="jwks_uri of the OIDC discovery document (default: issuer + /openid/v1/jwks)")


def _authorization_modes(value: str) -> tuple[str, ...]:
    from k8py.apiserver.authz.chain import parse_modes

    try:
        return tuple(parse_modes(value))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_feature_gates(values: list[str]) -> dict[str, bool]:
    """``--feature-gates A=true,B=false`` (repeatable) -> {"A": True, "B": False}."""
    gates: dict[str, bool] = {}
    for value in values:
        for item in filter(None, (part.strip() for part in value.split(","))):
            name, sep, flag = item.partition("=")
            if not sep or flag.lower() not in ("true", "false"):
                raise SystemExit(f"--feature-gates: {item!r} is not NAME=true or NAME=false")
            gates[name.strip()] = flag.lower() == "true"
    return gates
