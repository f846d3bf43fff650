"""``k8py apiserver``: the API server alone, from its parsed flags.

Builds the store (embedded SQLite in ``--data-dir``, or etcd), the
service-account keys and, for a server given no way to authenticate anyone,
a client CA and an admin certificate (as k3s does); starts the server, writes
a kubeconfig for it and serves until SIGINT/SIGTERM. Configuration files that
are wrong (admission, encryption, audit, front proxy) end the command with a
message naming the file and the fault, exit status 2 (1 for a port in use or a
bad key file), never a traceback. The flags themselves are declared in
:mod:`k8py.cli.apiserver_options`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time

from k8py import __version__
from k8py.cli.apiserver_options import add_server_options, parse_feature_gates
from k8py.cli.kubeconfig import write_kubeconfig
from k8py.cli.process_tuning import tune_gc_for_caches

__all__ = ["add_parser", "run", "run_apiserver"]


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    api = sub.add_parser("apiserver", help="run the API server")
    add_server_options(api, default_port=6443)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(run_apiserver(args))


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
    tune_gc_for_caches()


async def run_apiserver(args: argparse.Namespace) -> int:
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


def _admission_plugin_config(args: argparse.Namespace) -> dict[str, dict[str, object]]:
    """The plugins' configuration: the AdmissionConfiguration file's, then the
    DefaultTolerationSeconds flags (kube-apiserver's) over it."""
    from k8py.apiserver.admission.config import load_admission_config

    config = load_admission_config(args.admission_control_config_file) if args.admission_control_config_file else {}
    tolerations = {key: value for key, value in (
        ("defaultNotReadyTolerationSeconds", args.default_not_ready_toleration_seconds),
        ("defaultUnreachableTolerationSeconds", args.default_unreachable_toleration_seconds)) if value is not None}
    if tolerations:
        config["DefaultTolerationSeconds"] = {**config.get("DefaultTolerationSeconds", {}), **tolerations}
    return config


def _build_apiserver(args: argparse.Namespace, secure_port: int | None, service_accounts: dict):  # type: ignore[no-untyped-def,type-arg]
    from k8py.apiserver.server import APIServer, APIServerConfig

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
            admission_plugin_config=_admission_plugin_config(args),
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
