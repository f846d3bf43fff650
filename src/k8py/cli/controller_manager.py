"""``k8py controller-manager``: parse flags, build the ControllerManager, run it.

Flags follow kube-controller-manager's names where it has them
(``--controllers``, ``--leader-elect*``, ``--concurrent-*-syncs``,
``--terminated-pod-gc-threshold``, ``--cluster-cidr``,
``--node-cidr-mask-size``). It prints the port of ``/healthz`` and
``/metrics`` once serving, and exits 0 on SIGTERM/SIGINT, 1 if it loses its
lease.
"""

from __future__ import annotations

from k8py import __version__

import argparse
import asyncio
import logging
import signal
import sys

from k8py.cli.process_tuning import tune_gc_for_caches

__all__ = ["add_parser", "run", "CONCURRENCY_FLAGS"]

logger = logging.getLogger(__name__)

CONCURRENCY_FLAGS: dict[str, str] = {
    # upstream flag name -> controller name
    "concurrent-replicaset-syncs": "replicaset",
    "concurrent-rc-syncs": "replicationcontroller",
    "concurrent-deployment-syncs": "deployment",
    "concurrent-job-syncs": "job",
    "concurrent-cron-job-syncs": "cronjob",
    "concurrent-daemonset-syncs": "daemonset",
    "concurrent-statefulset-syncs": "statefulset",
    "concurrent-gc-syncs": "garbagecollector",
    "concurrent-namespace-syncs": "namespace",
    "concurrent-serviceaccount-syncs": "serviceaccount",
    "concurrent-ttl-after-finished-syncs": "ttl-after-finished",
    "concurrent-endpoint-syncs": "endpoint",
    "concurrent-service-endpoint-syncs": "endpointslice",
    "mirroring-concurrent-service-endpoint-syncs": "endpointslicemirroring",
}


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = sub.add_parser("controller-manager", help="run the controller manager (replicaset, deployment, job, ...)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--controllers", default="*", help="'*' (all), 'name' enables, '-name' disables; e.g. '*,-cronjob'")
    p.add_argument("--bind", default="127.0.0.1", help="address of /healthz and /metrics (default: %(default)s)")
    p.add_argument("--port", type=int, default=10257, help="port of /healthz and /metrics; 0 picks a free one (default: %(default)s)")
    p.add_argument("--leader-elect", action="store_true", help="run only while holding the kube-system/kube-controller-manager Lease")
    p.add_argument("--leader-elect-lease-duration", type=float, default=15.0)
    p.add_argument("--leader-elect-renew-deadline", type=float, default=10.0)
    p.add_argument("--leader-elect-retry-period", type=float, default=2.0)
    p.add_argument("--leader-elect-identity", default=None)
    for flag, name in CONCURRENCY_FLAGS.items():
        p.add_argument(f"--{flag}", type=int, default=None, dest=flag.replace("-", "_"), help=f"workers of the {name} controller")
    p.add_argument("--terminated-pod-gc-threshold", type=int, default=12_500)
    p.add_argument("--cluster-cidr", default="127.64.0.0/10", help="pod addresses of the cluster (default: %(default)s)")
    p.add_argument("--node-cidr-mask-size", type=int, default=24)
    p.add_argument("--node-monitor-period", type=float, default=5.0, help="seconds between node health checks (default: %(default)s)")
    p.add_argument("--node-monitor-grace-period", type=float, default=50.0,
                   help="seconds without a node heartbeat before the node is Unknown (default: %(default)s)")
    p.add_argument("--node-startup-grace-period", type=float, default=60.0,
                   help="the same for a node that never posted Ready (default: %(default)s)")
    p.add_argument("--horizontal-pod-autoscaler-sync-period", type=float, default=15.0,
                   help="seconds between HPA syncs (default: %(default)s)")
    p.add_argument("--horizontal-pod-autoscaler-tolerance", type=float, default=0.1,
                   help="how far from 1 the usage ratio must be before the HPA scales (default: %(default)s)")
    p.add_argument("--horizontal-pod-autoscaler-downscale-stabilization", type=float, default=300.0,
                   help="seconds of scale-down stabilization for HPAs that set none (default: %(default)s)")
    p.add_argument("--horizontal-pod-autoscaler-cpu-initialization-period", type=float, default=300.0,
                   help="seconds after a pod's start during which its cpu counts only while it is Ready (default: %(default)s)")
    p.add_argument("--horizontal-pod-autoscaler-initial-readiness-delay", type=float, default=30.0,
                   help="seconds after a pod's start within which a readiness change counts as its first (default: %(default)s)")
    p.add_argument("--resource-quota-sync-period", type=float, default=300.0,
                   help="seconds between full recounts of each ResourceQuota (default: %(default)s)")
    p.add_argument("--max-endpoints-per-slice", type=int, default=100, help="endpoints in one EndpointSlice (default: %(default)s)")
    p.add_argument("--service-account-private-key-file", default="",
                   help="PEM private key that signs legacy service-account token Secrets (serviceaccount-token runs only with it)")
    p.add_argument("--root-ca-file", default="", help="CA bundle put in token Secrets and kube-root-ca.crt ConfigMaps")
    p.add_argument("--cluster-signing-cert-file", default="", help="CA certificate (PEM) csrsigning signs with")
    p.add_argument("--cluster-signing-key-file", default="", help="its private key (PEM)")
    p.add_argument("--cluster-signing-duration", type=float, default=365 * 24 * 3600.0,
                   help="the longest a signed certificate lives, in seconds (default: a year)")
    p.add_argument("--use-service-account-credentials", action="store_true",
                   help="run each controller as its own kube-system service account (what upstream's RBAC roles expect)")
    p.add_argument("--log-level", default="WARNING")
    return p


async def _main(args: argparse.Namespace) -> int:
    from k8py.client.kubeconfig import load_kubeconfig
    from k8py.client.rest import RestClient
    from k8py.controllers.context import ControllerOptions
    from k8py.controllers.controller_manager import ControllerManager, LeaderElectionConfig
    from k8py.controllers.registry import UnknownControllerError

    concurrent = {name: getattr(args, flag.replace("-", "_")) for flag, name in CONCURRENCY_FLAGS.items()
                  if getattr(args, flag.replace("-", "_")) is not None}
    options = ControllerOptions(
        concurrent=concurrent, terminated_pod_gc_threshold=args.terminated_pod_gc_threshold,
        cluster_cidr=args.cluster_cidr, node_cidr_mask_size=args.node_cidr_mask_size,
        node_monitor_period=args.node_monitor_period, node_monitor_grace_period=args.node_monitor_grace_period,
        node_startup_grace_period=args.node_startup_grace_period,
        service_account_private_key_file=args.service_account_private_key_file, root_ca_file=args.root_ca_file,
        cluster_signing_cert_file=args.cluster_signing_cert_file, cluster_signing_key_file=args.cluster_signing_key_file,
        cluster_signing_duration=args.cluster_signing_duration,
        use_service_account_credentials=args.use_service_account_credentials,
        extra={"max_endpoints_per_slice": args.max_endpoints_per_slice,
               "hpa_sync_period": args.horizontal_pod_autoscaler_sync_period,
               "hpa_tolerance": args.horizontal_pod_autoscaler_tolerance,
               "hpa_downscale_stabilization": args.horizontal_pod_autoscaler_downscale_stabilization,
               "hpa_cpu_initialization_period": args.horizontal_pod_autoscaler_cpu_initialization_period,
               "hpa_initial_readiness_delay": args.horizontal_pod_autoscaler_initial_readiness_delay,
               "resource_quota_sync_period": args.resource_quota_sync_period},
    )
    election = LeaderElectionConfig(
        enabled=args.leader_elect, lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline, retry_period=args.leader_elect_retry_period,
    )
    if args.leader_elect_identity:
        election.identity = args.leader_elect_identity
    config = load_kubeconfig(args.kubeconfig)
    config.user_agent = f"k8py-controller-manager/{__version__}"  # who wrote it, in the API server's flow record
    async with RestClient(config) as client:
        try:
            manager = ControllerManager(client, controllers=args.controllers, options=options,
                                        leader_election=election, bind=args.bind, port=args.port)
        except UnknownControllerError as err:
            print(f"k8py controller-manager: {err}", file=sys.stderr)
            return 2
        try:
            await manager.start_serving()
        except OSError as err:
            print(f"k8py controller-manager: cannot listen on {args.bind}:{args.port}: {err.strerror or err}. "
                  f"Pick another port with --port (0 picks a free one).", file=sys.stderr)
            return 1
        print(f"k8py controller-manager: serving /healthz and /metrics on http://{args.bind}:{manager.port}; "
              f"controllers: {','.join(manager.names)}"
              + (f"; waiting for the lease as {election.identity}" if election.enabled else ""), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        running = asyncio.create_task(manager.run(), name="controller-manager")
        stopping = asyncio.create_task(stop.wait(), name="wait-for-signal")
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        lost = running.done()
        for task in (running, stopping):
            task.cancel()
        await asyncio.gather(running, stopping, return_exceptions=True)
        if lost:
            error = running.exception() if not running.cancelled() else None
            print(f"k8py controller-manager: stopped: {error!r}", file=sys.stderr, flush=True)
            return 1
    print("k8py controller-manager: stopped", flush=True)
    return 0


def _tune_gc() -> None:
    """The informers hold every pod, ReplicaSet, Deployment, ... of the cluster
    (some hundreds of thousands of objects at 10,000 pods), and every watch
    event and create response decodes a few dozen new dicts: with CPython's
    default thresholds a full collection ran at every 25 % of growth, each
    walking the whole cache and finding nothing to free (measured in
    bench/controllers_bench.py's 10,000-pod scale-up on a loaded machine: ten
    of them, 0.3-1.5 s each, the manager's creates stopped meanwhile; its CPU
    per pod 0.53 ms with them, 0.38 ms without). What exists at start-up is frozen out of collection and
    collections run far less often, as the API server's and the scheduler's
    (young cycles, such as a finished request's, are still collected by the
    generation-0 passes)."""
    tune_gc_for_caches()


def run(args: argparse.Namespace) -> int:
    _tune_gc()
    return asyncio.run(_main(args))
