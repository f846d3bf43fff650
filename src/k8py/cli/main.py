"""``k8py``: the command line. Entry points only wire components together.

Commands:

- ``k8py up``: the whole cluster in one command (API server, controller
  manager, scheduler, kubelets, each its own supervised process, see
  ``k8py.cluster``), writing a kubeconfig for kubectl; ``k8py down`` stops it,
  ``k8py status`` shows it; ``k8py flow`` prints its list-watch flow (``--trace``);
- ``k8py apiserver``: the API server alone, on the embedded store
  (``--data-dir``) or on etcd (``--etcd-servers``);
- ``k8py etcd``: run a local etcd for k8py;
- ``k8py migrate``: copy a cluster's objects between stores;
- ``k8py controller-manager``: the controllers (see ``k8py.controllers``);
- ``k8py scheduler``: the scheduler, against any cluster's API server;
- ``k8py kubelet``: the node agent (process or simulated runtime);
- ``k8py proxy``: kube-proxy for one node; ``k8py dns``: the cluster DNS;
- ``k8py containerd``: Debian's containerd for one node, as ``k8py up --runtime containerd`` runs it;
- ``k8py zygote``: what ``k8py up`` forks the components from (``k8py.cli.zygote``).
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import asyncio
import gc
import logging
import os
import signal
import sys
import time

from k8py import __version__
from k8py.cli import containerd as containerd_command
from k8py.cli import controller_manager as controller_manager_command
from k8py.cli import etcd as etcd_command
from k8py.cli import flow as flow_command
from k8py.cli import kubelet as kubelet_command
from k8py.cli import migrate as migrate_command
from k8py.cli import proxy as proxy_command
from k8py.cli import scheduler as scheduler_command
from k8py.cli import up as up_command
from k8py.cli.kubeconfig import write_kubeconfig
from k8py.cli.process_tuning import tune_process

__all__ = ["main", "build_parser"]

DEFAULT_DATA_DIR = up_command.DEFAULT_DATA_DIR


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


def _bool_flag(text: str) -> bool:
    """``--flag=true|false`` as Go's flag package reads booleans."""
    value = text.strip().lower()
    if value in ("1", "t", "true", "yes"):
        return True
    if value in ("0", "f", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean: use true or false")


def _add_server_options(p: argparse.ArgumentParser, *, default_port: int) -> None:
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
    p.add_argument("--anonymous-auth", type=_bool_flag, default=True, nargs="?", const=True, metavar="BOOL",
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


def _service_account_config(args: argparse.Namespace) -> dict[str, object]:
    from k8py.api.service_account_keys import ensure_signing_key_file, load_signing_key, load_verifying_keys

    key_file = args.service_account_signing_key_file
    if not key_file:
        key_file = os.path.join(args.data_dir, "service-account.key")
        ensure_signing_key_file(key_file)
    load_signing_key(key_file)  # a bad file is a clear message here, not a traceback later
    for path in args.service_account_key_file:
        load_verifying_keys(path)
    out: dict[str, object] = {
        "service_account_signing_key_file": key_file,
        "service_account_key_files": tuple(args.service_account_key_file),
        "api_audiences": tuple(a.strip() for a in args.api_audiences.split(",") if a.strip()),
        "service_account_max_token_expiration": args.service_account_max_token_expiration,
        "service_account_extend_token_expiration": args.service_account_extend_token_expiration == "true",
        "service_account_jwks_uri": args.service_account_jwks_uri,
    }
    if args.service_account_issuer:
        out["service_account_issuers"] = tuple(args.service_account_issuer)
    return out


def _authorization_modes(value: str) -> tuple[str, ...]:
    from k8py.apiserver.authz.chain import parse_modes

    try:
        return tuple(parse_modes(value))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="k8py", description="A Kubernetes-compatible cluster written in Python.")
    parser.add_argument("--version", action="version", version=f"k8py {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    up_command.add_parsers(sub)
    flow_command.add_parser(sub)
    api = sub.add_parser("apiserver", help="run the API server")
    _add_server_options(api, default_port=6443)
    etcd_command.add_parser(sub)
    controller_manager_command.add_parser(sub)
    migrate_command.add_parser(sub)
    scheduler_command.add_parser(sub)
    kubelet_command.add_parser(sub)
    proxy_command.add_parsers(sub)
    containerd_command.add_parser(sub)
    zygote = sub.add_parser("zygote", help="(used by k8py up) import k8py once and fork each component from it")
    zygote.add_argument("--socket", required=True, help="the Unix socket the supervisor asks for forks on")
    return parser


def _make_storage(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    if args.etcd_servers:
        from k8py.storage.etcd import EtcdStorage

        return EtcdStorage([u.strip() for u in args.etcd_servers.split(",") if u.strip()], prefix=args.etcd_prefix)
    from k8py.storage.sqlite import SqliteStorage

    os.makedirs(args.data_dir, exist_ok=True)
    return SqliteStorage(os.path.join(args.data_dir, "k8py.db"))


def _tune_gc() -> None:
    """The server keeps every object in its watch cache: a full collection
    walks them all, and with CPython's default thresholds that happens every
    few seconds under load, stalling every watch for tens of milliseconds.
    What exists at start-up is frozen out of collection, and collections run
    far less often (the server creates few reference cycles). No collection
    first: measured, one here found a handful of cyclic objects to free and
    took 50-100 ms of CPU on the way to the server's first answer."""
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


async def _run_apiserver(args: argparse.Namespace) -> int:
    from k8py.api.service_account_keys import KeyFileError

    started = time.perf_counter()
    try:
        os.makedirs(args.data_dir, exist_ok=True)
        service_accounts = _service_account_config(args)
    except KeyFileError as err:
        print(f"k8py apiserver: {err}", file=sys.stderr)
        return 1
    secure_port = args.secure_port
    if secure_port is None and args.insecure_port is None:
        secure_port = 6443
    admin: tuple[bytes, bytes] | None = None
    if secure_port is not None and not args.client_ca_file and not args.token_auth_file and not args.no_kubeconfig:
        args.client_ca_file, admin = _standalone_admin(args.cert_dir or os.path.join(args.data_dir, "certs"))
    from k8py.apiserver.admission.plugins import AdmissionConfigError
    from k8py.apiserver.aggregator.front_proxy import FrontProxyConfigError
    from k8py.apiserver.audit.policy import AuditPolicyError
    from k8py.storage.encryption import EncryptionConfigError

    try:
        server = _build_apiserver(args, secure_port, service_accounts)
    except FrontProxyConfigError as err:
        print(f"k8py apiserver: {err}", file=sys.stderr)
        return 1
    except (AdmissionConfigError, EncryptionConfigError, AuditPolicyError) as err:
        print(f"k8py apiserver: {err}", file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"k8py: {err}", file=sys.stderr)
        return 2
    try:
        await server.start()
    except OSError as err:
        print(f"k8py: cannot listen on {args.bind}: {err.strerror or err}. "
              f"Pick other ports with --secure-port/--insecure-port (0 picks a free one).", file=sys.stderr)
        await server.storage.close()
        return 1
    except ValueError as err:
        print(f"k8py: {err}", file=sys.stderr)
        await server.storage.close()
        return 2
    _tune_gc()
    kubeconfig = args.kubeconfig or os.path.join(args.data_dir, "kubeconfig")
    if args.no_kubeconfig:
        kubeconfig = ""
    elif server.insecure_url:
        write_kubeconfig(kubeconfig, server.insecure_url)
    else:
        write_kubeconfig(kubeconfig, server.url, ca_data=server.serving.ca_pem if server.serving else None,
                         client_cert_data=admin[0] if admin else None, client_key_data=admin[1] if admin else None)
    store = f"etcd {args.etcd_servers}" if args.etcd_servers else f"embedded store in {args.data_dir}"
    ready = f"ready in {time.perf_counter() - started:.2f}s"
    if server.secure_url:
        print(f"k8py {__version__}: API server listening on {server.secure_url} ({store}); {ready}", flush=True)
    if server.insecure_url:
        print(f"k8py {__version__}: API server listening on {server.insecure_url} (insecure: no authentication, loopback only; {store}); {ready}", flush=True)
    return await _serve(server, kubeconfig)


def _standalone_admin(cert_dir: str) -> tuple[str, tuple[bytes, bytes]]:
    """A server given no way to authenticate anyone makes one, as k3s does: a
    client CA and an admin certificate (system:admin in system:masters) in
    ``cert_dir``, kept across restarts, for the kubeconfig it writes."""
    from k8py.client import certs

    ca_file, ca_key = os.path.join(cert_dir, "client-ca.crt"), os.path.join(cert_dir, "client-ca.key")
    admin_file, admin_key = os.path.join(cert_dir, "admin.crt"), os.path.join(cert_dir, "admin.key")
    if not all(os.path.exists(p) for p in (ca_file, ca_key, admin_file, admin_key)):
        ca = certs.new_self_signed_ca("k8py-client-ca")
        ca.save(ca_file, ca_key)
        cert, key = ca.issue_client("system:admin", ["system:masters"])
        certs.write_pem(admin_key, certs.encode_private_key_pem(key), private=True)
        certs.write_pem(admin_file, certs.encode_cert_pem(cert))
    return ca_file, (certs.read_pem(admin_file), certs.read_pem(admin_key))


def _build_apiserver(args: argparse.Namespace, secure_port: int | None, service_accounts: dict):  # type: ignore[no-untyped-def,type-arg]
    from k8py.apiserver.server import APIServer, APIServerConfig
    from k8py.apiserver.admission.config import load_admission_config

    return APIServer(
        _make_storage(args),
        APIServerConfig(
            bind=args.bind,
            secure_port=secure_port,
            insecure_port=args.insecure_port,
            insecure_bind=args.insecure_bind_address,
            tls_cert_file=args.tls_cert_file,
            tls_private_key_file=args.tls_private_key_file,
            cert_dir=args.cert_dir or os.path.join(args.data_dir, "certs"),
            client_ca_file=args.client_ca_file,
            token_auth_file=args.token_auth_file,
            anonymous_auth=args.anonymous_auth,
            kubelet_client_certificate=args.kubelet_client_certificate,
            kubelet_client_key=args.kubelet_client_key,
            kubelet_certificate_authority=args.kubelet_certificate_authority,
            bookmark_interval=args.watch_bookmark_interval,
            watch_cache_capacity=args.watch_cache_size,
            trace=args.trace,
            service_cidr=args.service_cluster_ip_range,
            service_node_port_range=args.service_node_port_range,
            service_repair_interval=args.service_repair_interval,
            service_repair_leak_grace=args.service_repair_leak_grace,
            authorization_modes=tuple(args.authorization_mode),
            enable_admission_plugins=tuple(args.enable_admission_plugins),
            disable_admission_plugins=tuple(args.disable_admission_plugins),
            feature_gates=parse_feature_gates(args.feature_gates),
            admission_plugin_config=load_admission_config(args.admission_control_config_file)
            if args.admission_control_config_file else {},
            encryption_provider_config=args.encryption_provider_config,
            audit_policy_file=args.audit_policy_file,
            audit_log_path=args.audit_log_path,
            audit_log_maxsize=args.audit_log_maxsize,
            audit_log_maxbackup=args.audit_log_maxbackup,
            audit_log_maxage=args.audit_log_maxage,
            max_requests_inflight=args.max_requests_inflight,
            max_mutating_requests_inflight=args.max_mutating_requests_inflight,
            requestheader_client_ca_file=args.requestheader_client_ca_file,
            proxy_client_cert_file=args.proxy_client_cert_file,
            proxy_client_key_file=args.proxy_client_key_file,
            requestheader_allowed_names=tuple(n.strip() for n in args.requestheader_allowed_names.split(",") if n.strip()),
            **service_accounts,
        ),
    )


async def _serve(server, kubeconfig: str) -> int:  # type: ignore[no-untyped-def]
    if kubeconfig:
        print(f"kubeconfig written to {kubeconfig}. Point kubectl at it:", flush=True)
        print(f"  export KUBECONFIG={kubeconfig}", flush=True)
        print("  kubectl get namespaces", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("k8py: shutting down", flush=True)
    await server.stop()
    return 0


@functools.cache
def shared_parser() -> argparse.ArgumentParser:
    """The parser ``main`` uses, built once per process (parsing leaves it as it was):
    ``k8py zygote`` builds it before it forks, so no component builds its own."""
    return build_parser()


def main(argv: list[str] | None = None) -> int:
    tune_process()
    args = shared_parser().parse_args(argv)
    logging.basicConfig(level=getattr(args, "log_level", "WARNING").upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "up":
        return up_command.run_up(args)
    if args.command == "down":
        return up_command.run_down(args)
    if args.command == "status":
        return up_command.run_status(args)
    if args.command == "flow":
        return flow_command.run(args)
    if args.command == "apiserver":
        return asyncio.run(_run_apiserver(args))
    if args.command == "etcd":
        return etcd_command.run(args)
    if args.command == "migrate":
        return migrate_command.run(args)
    if args.command == "controller-manager":
        return controller_manager_command.run(args)
    if args.command == "scheduler":
        return scheduler_command.run(args)
    if args.command == "kubelet":
        return kubelet_command.run(args)
    if args.command == "proxy":
        return proxy_command.run_proxy(args)
    if args.command == "dns":
        return proxy_command.run_dns(args)
    if args.command == "containerd":
        return containerd_command.run(args)
    if args.command == "zygote":
        from k8py.cli.zygote import serve

        return serve(args.socket)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


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
