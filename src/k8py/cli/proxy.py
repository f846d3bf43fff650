"""``k8py proxy`` and ``k8py dns``: parse flags, load the kubeconfig, and run
:func:`k8py.proxy.app.run_proxy` / :func:`~k8py.proxy.app.run_dns` until
SIGINT/SIGTERM (exit 0). Each prints one line saying where ``/healthz``,
``/readyz`` and ``/metrics`` are served (``k8py up`` reads it)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
from typing import Any, Awaitable, Callable

__all__ = ["add_parsers", "run_proxy", "run_dns"]


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("proxy", help="run kube-proxy for one node (forwards Service traffic to endpoints)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--node-name", "--hostname-override", dest="node_name", default=socket.gethostname(),
                   help="the Node this proxy runs for (its addresses get the node ports; default: the hostname)")
    p.add_argument("--nodeport-addresses", default="",
                   help="comma-separated addresses for node ports, besides the Node's InternalIP/ExternalIP")
    p.add_argument("--bind-address", "--metrics-bind-address", dest="bind", default="127.0.0.1",
                   help="address of /healthz and /metrics (default: %(default)s)")
    p.add_argument("--port", "--healthz-port", dest="port", type=int, default=0,
                   help="port of /healthz and /metrics; 0 picks a free one (default: %(default)s)")
    p.add_argument("--healthz-bind-address", dest="healthz_bind", default="",
                   help="HOST:PORT of kube-proxy's own /healthz and /livez (JSON, 503 when syncs fall behind or the node "
                        "is going away; port 0 picks one); off by default (default: %(default)r)")
    p.add_argument("--proxy-mode", choices=("auto", "userspace", "nftables"), default="auto",
                   help="auto: nftables when the node's pods have their own network namespaces (kubelet --pod-network=cni), "
                        "else userspace (default: %(default)s)")
    p.add_argument("--nftables-table", default="",
                   help="the nftables mode's table (default: k8py-<node name>); k8py up names one per cluster")
    p.add_argument("--log-level", default="WARNING")

    d = sub.add_parser("dns", help="run the cluster DNS server (Service and pod names under the cluster domain)")
    d.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
    d.add_argument("--bind", default="127.192.0.10",
                   help="address to answer on; also the kube-dns Service's cluster IP (default: %(default)s)")
    d.add_argument("--dns-port", type=int, default=53, help="DNS port; 0 picks a free one (default: %(default)s)")
    d.add_argument("--cluster-domain", default="cluster.local", help="the cluster's DNS domain (default: %(default)s)")
    d.add_argument("--upstream", action="append", default=None,
                   help="resolver for names outside the cluster (repeatable; default: the host's /etc/resolv.conf)")
    d.add_argument("--no-register", action="store_true", help="do not create the kube-system/kube-dns Service")
    d.add_argument("--port", dest="health_port", type=int, default=0,
                   help="port of /healthz and /metrics; 0 picks a free one (default: %(default)s)")
    d.add_argument("--log-level", default="WARNING")


def _client_config(args: argparse.Namespace, who: str):  # type: ignore[no-untyped-def]
    from k8py.client.kubeconfig import load_kubeconfig

    try:
        return load_kubeconfig(args.kubeconfig)
    except Exception as err:  # a missing or broken kubeconfig: say which and stop
        print(f"k8py {who}: cannot load the kubeconfig: {err}. Pass --kubeconfig FILE.", file=sys.stderr)
        return None


def _serve(who: str, start: Callable[[], Awaitable[None]]) -> int:
    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        task = asyncio.create_task(start(), name=who)
        stopping = asyncio.create_task(stop.wait(), name="wait-for-signal")
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        for t in (task, stopping):
            t.cancel()
        await asyncio.wait({task, stopping})
        if not task.cancelled() and task.exception() is not None:
            err = task.exception()
            if isinstance(err, (OSError, RuntimeError)):  # a port taken, a mode that cannot run here: say so
                print(f"k8py {who}: {err}", file=sys.stderr)
                return 1
            raise err  # type: ignore[misc]
        print(f"k8py {who}: stopped", flush=True)
        return 0

    return asyncio.run(main())


def run_proxy(args: argparse.Namespace) -> int:
    from k8py.proxy.app import ProxyOptions, run_proxy as run

    config = _client_config(args, "proxy")
    if config is None:
        return 1
    addresses = tuple(a.strip() for a in args.nodeport_addresses.split(",") if a.strip())
    options = ProxyOptions(node_name=args.node_name, node_addresses=addresses, bind=args.bind, port=args.port, mode=args.proxy_mode,
                           nftables_table=args.nftables_table, healthz_bind=args.healthz_bind)

    def serving(url: str) -> None:
        print(f"k8py proxy: node {args.node_name} ({options.mode} mode); serving /healthz, /readyz and /metrics on {url}", flush=True)
        if options.healthz_bind:
            host = options.healthz_bind.rpartition(":")[0] or "0.0.0.0"
            print(f"k8py proxy: proxier health (/healthz, /livez) on http://{host}:{options.healthz_port}", flush=True)

    return _serve("proxy", lambda: run(config, options, on_serving=serving))


def run_dns(args: argparse.Namespace) -> int:
    from k8py.proxy.app import DNSOptions, run_dns as run

    config = _client_config(args, "dns")
    if config is None:
        return 1
    options = DNSOptions(bind=args.bind, port=args.dns_port, domain=args.cluster_domain,
                         upstreams=tuple(args.upstream) if args.upstream else None,
                         register_service=not args.no_register, health_port=args.health_port)

    def serving(url: str, server: Any) -> None:
        print(f"k8py dns: answering {options.domain} on {server.bind}:{server.port} (UDP and TCP); "
              f"serving /healthz, /readyz and /metrics on {url}", flush=True)

    return _serve("dns", lambda: run(config, options, on_serving=serving))
