"""``k8py kubelet``: parse flags, build the kubelet(s), run until SIGINT/SIGTERM.

``k8py kubelet --kubeconfig FILE --node-name N`` runs one kubelet on the
process runtime. ``--simulated --nodes 1000`` runs that many kubelets in one
process on the simulated runtime (``--node-name`` is then the prefix:
``N-0`` … ``N-999``), each with a real Node, Lease and pod lifecycles.

On SIGTERM the kubelet stops; the containers it started keep running and a
new kubelet on the same ``--root-dir`` adopts them.
"""

from __future__ import annotations

from k8py import __version__

import argparse
import asyncio
import gc
import logging
import os
import signal
import socket
import sys
from typing import Any

from k8py.cli.flag_values import go_bool
from k8py.cli.process_tuning import tune_gc_for_caches

__all__ = ["add_parser", "run"]


def _labels(value: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (x.strip() for x in value.split(","))):
        k, _, v = item.partition("=")
        out[k] = v
    return out


def _taints(value: str) -> list[dict[str, str]]:
    out = []
    for item in filter(None, (x.strip() for x in value.split(","))):
        kv, _, effect = item.rpartition(":")
        if not kv or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise SystemExit(f"k8py kubelet: bad taint {item!r}: use key=value:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute")
        k, _, v = kv.partition("=")
        taint = {"key": k, "effect": effect}
        if v:
            taint["value"] = v
        out.append(taint)
    return out


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser("kubelet", help="run a kubelet (the node agent) against an API server")
    p.add_argument("--kubeconfig", required=True, help="kubeconfig of the API server to join")
    p.add_argument("--bootstrap-kubeconfig", default="",
                   help="kubeconfig with a bootstrap token: when --kubeconfig holds no valid client certificate, "
                        "request one (a CSR), wait for it, and write --kubeconfig")
    p.add_argument("--cert-dir", default="", help="where the bootstrapped and rotated client certificates go (default: <root-dir>/pki)")
    p.add_argument("--rotate-certificates", type=go_bool, default=None, nargs="?", const=True, metavar="BOOL",
                   help="request a new client certificate at 70-90%% of the current one's life (default: false)")
    p.add_argument("--server-tls-bootstrap", type=go_bool, default=None, nargs="?", const=True, metavar="BOOL",
                   help="request the serving certificate from the cluster (a kubernetes.io/kubelet-serving CSR, "
                        "approved by an admin) and renew it at 70-90%% of its life (default: false)")
    p.add_argument("--node-name", default=socket.gethostname().lower(), help="the Node's name (a prefix with --simulated)")
    p.add_argument("--config", default="", help="a KubeletConfiguration file (flags given explicitly win)")
    p.add_argument("--root-dir", default=os.path.join(os.path.expanduser("~"), ".k8py", "kubelet"), help="state, volumes and logs")
    p.add_argument("--address", default=None, help="address to serve on and report as the node's InternalIP (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="kubelet HTTP port; 0 picks a free one (default: 10250)")
    p.add_argument("--tls-cert-file", default="", help="serving certificate of the kubelet's HTTPS server (self-signed in ROOT_DIR/pki with only --client-ca-file)")
    p.add_argument("--tls-private-key-file", default="", help="its key")
    p.add_argument("--client-ca-file", default="", help="serve HTTPS and authenticate client certificates from this CA (all but /healthz)")
    p.add_argument("--anonymous-auth", type=go_bool, default=None, nargs="?", const=True, metavar="BOOL",
                   help="HTTPS requests without credentials are system:anonymous (default: false; upstream's config default)")
    p.add_argument("--authentication-token-webhook", type=go_bool, default=None, nargs="?", const=True, metavar="BOOL",
                   help="authenticate bearer tokens with a TokenReview to the API server (default: true)")
    p.add_argument("--authorization-mode", default=None, choices=("AlwaysAllow", "Webhook"),
                   help="Webhook: a SubjectAccessReview for nodes/proxy|stats|metrics|log per caller (default: Webhook)")
    p.add_argument("--authentication-token-webhook-cache-ttl", type=float, default=None, help="seconds a reviewed token is trusted (default: 120)")
    p.add_argument("--authorization-webhook-cache-authorized-ttl", type=float, default=None, help="seconds an allow is kept (default: 300)")
    p.add_argument("--authorization-webhook-cache-unauthorized-ttl", type=float, default=None, help="seconds a deny is kept (default: 30)")
    p.add_argument("--pod-cidr", default=None, help="pod IPs when the Node has no spec.podCIDR (default: 127.64.0.0/24)")
    p.add_argument("--pod-cidr-wait", type=float, default=None,
                   help="seconds to wait for node IPAM to set spec.podCIDR before using --pod-cidr (default: 0, no wait)")
    p.add_argument("--max-pods", type=int, default=None)
    p.add_argument("--pod-max-pids", type=int, default=None, help="pids limit of each pod's cgroup (default: unlimited)")
    p.add_argument("--node-labels", default="", help="k=v,k2=v2 added to the Node")
    p.add_argument("--register-with-taints", default="", help="key=value:Effect,...")
    p.add_argument("--pod-manifest-path", default="", help="directory of static pod manifests")
    p.add_argument("--image-catalog", default="", help="YAML file mapping more image names to commands (process runtime)")
    p.add_argument("--no-image-pull", action="store_true",
                   help="never pull from registries: every image name is looked up in the host-image catalog")
    p.add_argument("--catalog-registries", default=None,
                   help="comma-separated registries whose images the host catalog stands in for, not pulled "
                        "(default: docker.io, registry.k8s.io, gcr.io, quay.io, ghcr.io and a few more public ones)")
    p.add_argument("--image-credentials", default="", help="the node's registry credentials, a Docker config.json "
                                                            "(default: <root-dir>/config.json, then ~/.docker/config.json)")
    p.add_argument("--image-gc-high-threshold", type=int, default=None, help="disk usage %% that starts image GC (default: 85)")
    p.add_argument("--image-gc-low-threshold", type=int, default=None, help="disk usage %% image GC frees down to (default: 80)")
    p.add_argument("--minimum-image-gc-age", type=float, default=None, help="seconds an unused image is kept at least (default: 120)")
    p.add_argument("--image-gc-period", type=float, default=None, help="seconds between image GC checks (default: 300)")
    p.add_argument("--no-bwrap", action="store_true", help="run containers as plain host processes even if bwrap exists")
    p.add_argument("--pod-network", choices=("loopback", "cni"), default="loopback",
                   help="loopback: pods share the host network, each on its own 127.x IP (default); "
                        "cni: each pod its own network namespace on a bridge, through the CNI plugins (root)")
    p.add_argument("--cni-bin-dir", default="/usr/lib/cni:/opt/cni/bin", help="with --pod-network=cni: where the CNI plugins are")
    p.add_argument("--service-cluster-ip-range", default="",
                   help="with --pod-network=cni: the Service range, routed onto the pod bridge so no Service packet leaves the machine")
    p.add_argument("--container-runtime-endpoint", default="",
                   help="run pods on a CRI v1 runtime at unix:///path.sock (containerd) instead of k8py's process runtime; "
                        "the runtime's own CNI config networks the pods (needs grpcio: pip install 'k8py[grpc]')")
    p.add_argument("--image-service-endpoint", default="",
                   help="with --container-runtime-endpoint: the CRI ImageService at unix:///path.sock when it is not the "
                        "runtime's own socket (default: the runtime endpoint)")
    p.add_argument("--cgroup-root", default="/k8py",
                   help="with --container-runtime-endpoint: the cgroup (cgroupfs) that pod cgroups go below")
    p.add_argument("--runtime-relist-period", type=float, default=1.0,
                   help="with --container-runtime-endpoint: seconds between container relists (the generic PLEG)")
    p.add_argument("--no-cgroups", action="store_true", help="do not enforce resource limits with cgroups (they are then only recorded)")
    p.add_argument("--container-log-max-size", default=None, help="rotate a container log past this size (default: 10Mi)")
    p.add_argument("--container-log-max-files", type=int, default=None, help="log files kept per container (default: 5)")
    p.add_argument("--backoff-base", type=float, default=None, help="CrashLoopBackOff / image pull back-off start, seconds (default: 10)")
    p.add_argument("--backoff-max", type=float, default=None, help="back-off cap, seconds (default: 300)")
    p.add_argument("--node-status-update-frequency", type=float, default=None, help="seconds between node status checks (default: 10)")
    p.add_argument("--lease-renew-interval", type=float, default=None, help="seconds between Lease renewals (default: 10)")
    p.add_argument("--sync-frequency", type=float, default=None, help="seconds between full re-syncs of every pod, volumes re-projected (default: 60)")
    p.add_argument("--cluster-dns", default="", help="comma-separated DNS server IPs for ClusterFirst pods' resolv.conf")
    p.add_argument("--cluster-domain", default="", help="the cluster's DNS domain (default: cluster.local)")
    p.add_argument("--resolv-conf", default="", help="the resolv.conf Default-policy pods get (default: /etc/resolv.conf)")
    p.add_argument("--eviction-hard", default=None, help="signal<quantity,... (default: memory.available<100Mi,nodefs.available<10%%,"
                                                          "nodefs.inodesFree<5%%,imagefs.available<15%%; '' turns them off)")
    p.add_argument("--eviction-soft", default="", help="signal<quantity,... that evict once they held for their grace period")
    p.add_argument("--eviction-soft-grace-period", default="", help="signal=duration,... for each --eviction-soft signal")
    p.add_argument("--eviction-minimum-reclaim", default="", help="signal=quantity,...: free this much beyond a met threshold before it is relieved")
    p.add_argument("--eviction-max-pod-grace-period", type=float, default=None, help="seconds a pod evicted by a soft threshold gets at most")
    p.add_argument("--eviction-pressure-transition-period", type=float, default=None,
                   help="seconds a pressure condition stays after its threshold was last met (default: 300)")
    p.add_argument("--housekeeping-interval", type=float, default=None, help="seconds between eviction checks (default: 10)")
    p.add_argument("--simulated", action="store_true", help="no processes: containers run on timers (for scale)")
    p.add_argument("--nodes", type=int, default=1, help="with --simulated: how many nodes this process runs")
    p.add_argument("--simulated-start-latency", type=float, default=0.0, help="with --simulated: seconds a container takes to start")
    p.add_argument("--simulated-run-seconds", type=float, default=None,
                   help="with --simulated: seconds a container runs before it exits (default: until stopped)")
    p.add_argument("--simulated-exit-code", type=int, default=0, help="with --simulated: the exit code of containers that end")
    p.add_argument("--log-level", default="WARNING")
    p.set_defaults(func=run)
    return p


def build_config(args: argparse.Namespace, *, node_name: str | None = None) -> Any:
    from k8py.kubelet.config import KubeletConfig, load_kubelet_configuration, parse_quantity_bytes

    config = KubeletConfig(node_name=node_name or args.node_name, root_dir=args.root_dir)
    if args.config:
        load_kubelet_configuration(args.config, config)
    # a flag given on the command line wins over the file; one not given leaves the file's (or the default) value
    given = {
        "address": args.address, "port": args.port, "pod_cidr": args.pod_cidr, "pod_cidr_wait": args.pod_cidr_wait, "max_pods": args.max_pods,
        "pod_pids_limit": args.pod_max_pids,
        "container_log_max_size": parse_quantity_bytes(args.container_log_max_size) if args.container_log_max_size else None,
        "container_log_max_files": args.container_log_max_files, "backoff_base": args.backoff_base, "backoff_max": args.backoff_max,
        "node_status_update_frequency": args.node_status_update_frequency, "node_lease_renew_interval": args.lease_renew_interval,
        "sync_frequency": args.sync_frequency, "static_pod_path": args.pod_manifest_path or None,
        "image_gc_high_threshold_percent": args.image_gc_high_threshold, "image_gc_low_threshold_percent": args.image_gc_low_threshold,
        "image_minimum_gc_age": args.minimum_image_gc_age, "image_gc_period": args.image_gc_period,
        "rotate_certificates": args.rotate_certificates, "cert_dir": args.cert_dir or None,
        "server_tls_bootstrap": args.server_tls_bootstrap,
        "container_runtime_endpoint": args.container_runtime_endpoint or None,
        "image_service_endpoint": args.image_service_endpoint or None,
        "anonymous_auth": args.anonymous_auth, "authentication_token_webhook": args.authentication_token_webhook,
        "authorization_mode": args.authorization_mode,
        "authentication_token_webhook_cache_ttl": args.authentication_token_webhook_cache_ttl,
        "authorization_webhook_cache_authorized_ttl": args.authorization_webhook_cache_authorized_ttl,
        "authorization_webhook_cache_unauthorized_ttl": args.authorization_webhook_cache_unauthorized_ttl,
    }
    for attr, value in given.items():
        if value is not None:
            setattr(config, attr, value)
    _eviction_flags(args, config)
    config.node_labels.update(_labels(args.node_labels))
    if args.register_with_taints:
        config.register_with_taints = _taints(args.register_with_taints)
    config.tls_cert_file, config.tls_private_key_file = args.tls_cert_file, args.tls_private_key_file
    if args.client_ca_file:
        config.client_ca_file = args.client_ca_file
    config.image_catalog = args.image_catalog
    config.use_bwrap = not args.no_bwrap
    config.image_pull = not args.no_image_pull
    if args.catalog_registries is not None:
        config.catalog_registries = [r.strip() for r in args.catalog_registries.split(",") if r.strip()]
    config.image_credentials = args.image_credentials
    config.simulated = args.simulated
    if args.cluster_dns:
        config.cluster_dns = [a.strip() for a in args.cluster_dns.split(",") if a.strip()]
    if args.cluster_domain:
        config.cluster_domain = args.cluster_domain
    if args.resolv_conf:
        config.resolv_conf = args.resolv_conf
    return config


def _eviction_flags(args: argparse.Namespace, config: Any) -> None:
    from k8py.kubelet.config import _duration
    from k8py.kubelet.eviction.thresholds import configured_thresholds, flag_map

    try:
        if args.eviction_hard is not None:
            config.eviction_hard = flag_map(args.eviction_hard, "<", "--eviction-hard")
        if args.eviction_soft:
            config.eviction_soft = flag_map(args.eviction_soft, "<", "--eviction-soft")
        if args.eviction_soft_grace_period:
            config.eviction_soft_grace_period = {k: _duration(v) for k, v in
                                                 flag_map(args.eviction_soft_grace_period, "=", "--eviction-soft-grace-period").items()}
        if args.eviction_minimum_reclaim:
            config.eviction_minimum_reclaim = flag_map(args.eviction_minimum_reclaim, "=", "--eviction-minimum-reclaim")
        configured_thresholds(config.eviction_hard, config.eviction_soft, config.eviction_soft_grace_period,
                              config.eviction_minimum_reclaim)  # refuse bad ones now
    except ValueError as err:
        raise SystemExit(f"k8py kubelet: {err}") from None
    for attr in ("eviction_max_pod_grace_period", "eviction_pressure_transition_period", "housekeeping_interval"):
        if getattr(args, attr) is not None:
            setattr(config, attr, getattr(args, attr))


def _scheme(config: Any) -> str:
    return "https" if config.tls_cert_file or config.client_ca_file else "http"


def _tune_gc_for_simulated_nodes() -> None:
    """Thousands of simulated nodes and their pods are millions of long-lived objects
    (dicts of Node summaries, pods, workers), and every watch event and status write
    allocates a few hundred more: with CPython's default thresholds the collector ran
    gen-2 passes over all of them every few seconds, 39 % of the process's CPU at 5,000
    nodes while 10,000 pods started (py-spy --native), in stalls of seconds during which
    no Lease was renewed (nodes went NotReady). Collections run far less often, as the
    API server's and the scheduler's (the kubelet makes few reference cycles); what the
    start-up built is frozen out of them once the nodes are up."""
    tune_gc_for_caches(freeze=False)


async def _main(args: argparse.Namespace) -> int:
    from k8py.client.kubeconfig import load_kubeconfig
    from k8py.client.rest import RestClient

    if args.bootstrap_kubeconfig and not args.simulated:
        from k8py.kubelet.certificate_bootstrap import BootstrapError, bootstrap_client_certificate

        try:
            got = await bootstrap_client_certificate(
                bootstrap_kubeconfig=args.bootstrap_kubeconfig, kubeconfig=args.kubeconfig,
                cert_dir=args.cert_dir or os.path.join(args.root_dir, "pki"), node_name=args.node_name)
        except BootstrapError as err:
            print(f"k8py kubelet: TLS bootstrap failed: {err}", file=sys.stderr)
            return 1
        if got:
            print(f"k8py kubelet: bootstrapped a client certificate for system:node:{args.node_name}; wrote {args.kubeconfig}", flush=True)
    client_config = load_kubeconfig(args.kubeconfig)
    if not args.simulated and build_config(args).rotate_certificates:
        from k8py.kubelet.certificate_rotation import prefer_rotated

        prefer_rotated(client_config, args.cert_dir or os.path.join(args.root_dir, "pki"))  # a restart after a rotation
    client_config.user_agent = f"k8py-kubelet/{__version__} ({'simulated' if args.simulated else args.node_name})"  # for the flow record
    client = RestClient(client_config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        if args.simulated:
            from k8py.kubelet.simulated_nodes import SimulatedNodes

            from k8py.kubelet.runtime.simulated import SimulationDefaults

            defaults = SimulationDefaults(start_latency=args.simulated_start_latency, run_seconds=args.simulated_run_seconds,
                                          exit_code=args.simulated_exit_code)
            _tune_gc_for_simulated_nodes()
            nodes = SimulatedNodes(client, build_config(args), count=args.nodes, defaults=defaults)
            runner = asyncio.create_task(nodes.run(), name="simulated-kubelets")
            await nodes.ready.wait()
            gc.freeze()  # the nodes' own objects, made once: no collection walks them again
            print(f"k8py kubelet: {args.nodes} simulated nodes ({args.node_name}-0 … {args.node_name}-{args.nodes - 1}) running; "
                  f"/healthz and /metrics on {_scheme(nodes.config)}://{nodes.config.address}:{nodes.port}", flush=True)
        else:
            from k8py.kubelet.cgroups.tree import node_cgroup_name
            from k8py.kubelet.kubelet import Kubelet
            from k8py.kubelet.runtime.process.images import ImageCatalog
            from k8py.kubelet.runtime.process.runtime import ProcessRuntime

            config = build_config(args)
            network = None
            if args.pod_network == "cni":
                from k8py.kubelet.network.names import NetworkNames
                from k8py.kubelet.network.pod_network import CNIPodNetwork

                dirs = [d for d in args.cni_bin_dir.split(":") if d]
                why = CNIPodNetwork.available(dirs)
                if why:
                    print(f"k8py kubelet: {why}", file=sys.stderr)
                    return 2
                config.node_labels["k8py.io/pod-network"] = "cni"  # k8py proxy --proxy-mode=auto picks nftables for this node
                network = CNIPodNetwork(NetworkNames(config.node_name, os.path.abspath(config.root_dir)), config.runtime_dir,
                                        plugin_dirs=dirs, service_cidr=args.service_cluster_ip_range)
            from k8py.kubelet.node_cleanup import write_owner

            write_owner(config.root_dir, config.node_name, args.pod_network)  # k8py down removes what this node makes on the host
            catalog = ImageCatalog.from_file(config.image_catalog)
            if config.image_service_endpoint and not config.container_runtime_endpoint:
                print("k8py kubelet: --image-service-endpoint is the CRI runtime's image socket: "
                      "give --container-runtime-endpoint too (the process runtime pulls images itself)", file=sys.stderr)
                return 2
            if config.container_runtime_endpoint:
                runtime = await _cri_runtime(args, config, node_ip=config.address)
                if runtime is None:
                    return 2
            else:
                runtime = ProcessRuntime(config.runtime_dir, catalog=catalog, use_bwrap=config.use_bwrap,
                                         node_ip=config.address, log_max_size=config.container_log_max_size,
                                         log_max_files=config.container_log_max_files, cgroup_name=node_cgroup_name(config.node_name, config.root_dir),
                                         use_cgroups=not args.no_cgroups, images=_images(config, catalog),
                                         network=network)
            if isinstance(runtime, ProcessRuntime):  # where its cgroup tree is, for k8py down (see write_owner)
                write_owner(config.root_dir, config.node_name, args.pod_network, cgroup_bases=runtime.cgroups.bases)
            kubelet = Kubelet(client, config, runtime)
            runner = asyncio.create_task(kubelet.run(), name="kubelet")
            ready = asyncio.create_task(kubelet.ready.wait())
            await asyncio.wait([runner, ready], return_when=asyncio.FIRST_COMPLETED)
            if runner.done():
                runner.result()
            print(f"k8py kubelet: node {config.node_name} running ({runtime.info().isolation}); "
                  f"/healthz and /metrics on {_scheme(config)}://{config.address}:{kubelet.port}", flush=True)
        done = asyncio.create_task(stop.wait())
        await asyncio.wait([runner, done], return_when=asyncio.FIRST_COMPLETED)
        if runner.done():
            runner.result()
        runner.cancel()
        try:
            await runner
        except asyncio.CancelledError:
            pass
        print("k8py kubelet: stopped (containers keep running; a kubelet on the same --root-dir adopts them)", flush=True)
        return 0
    except OSError as err:
        print(f"k8py kubelet: {err}. Pick another --port (0 picks a free one).", file=sys.stderr)
        return 1
    finally:
        await client.close()


async def _cri_runtime(args: argparse.Namespace, config: Any, *, node_ip: str) -> Any:
    """The CRI runtime at --container-runtime-endpoint, connected; None (after saying why) when it cannot be."""
    try:
        from k8py.kubelet.runtime.cri.client import CRIClient
        from k8py.kubelet.runtime.cri.runtime import CRIRuntime
    except ImportError as e:
        print(f"k8py kubelet: --container-runtime-endpoint needs grpcio and protobuf>=7.35 ({e}); "
              "install them with: pip install 'k8py[grpc]'", file=sys.stderr)
        return None
    from k8py.kubelet.runtime.protocols import RuntimeErrorStatus

    try:
        client = CRIClient(config.container_runtime_endpoint, image_endpoint=config.image_service_endpoint)
    except ValueError as e:
        print(f"k8py kubelet: {e}", file=sys.stderr)
        return None
    try:
        return await CRIRuntime(client, cgroup_root=args.cgroup_root, poll_interval=args.runtime_relist_period,
                                node_ip=node_ip, image_gc=_gc_policy(config),
                                log_rotation=(config.container_log_max_size, config.container_log_max_files)).connect()
    except RuntimeErrorStatus as e:
        await client.close()
        print(f"k8py kubelet: {e.message}", file=sys.stderr)
        return None


def _gc_policy(config: Any) -> Any:
    """The image GC thresholds (KubeletConfiguration's imageGC*), for either runtime."""
    from k8py.kubelet.images.gc import GCPolicy

    try:
        return GCPolicy(config.image_gc_high_threshold_percent, config.image_gc_low_threshold_percent,
                        config.image_minimum_gc_age, config.image_gc_period)
    except ValueError as err:
        raise SystemExit(f"k8py kubelet: {err}")


def _images(config: Any, catalog: Any) -> Any:
    """The process runtime's image service: the node's puller and store beside the catalog."""
    from k8py.kubelet.images.puller import ImagePuller
    from k8py.kubelet.images.reference import DEFAULT_CATALOG_REGISTRIES
    from k8py.kubelet.runtime.process.image_service import ProcessImages

    policy = _gc_policy(config)
    puller = None
    if config.image_pull:
        puller = ImagePuller(config.images_dir, catalog_registries=config.catalog_registries or DEFAULT_CATALOG_REGISTRIES)
    return ProcessImages(catalog, puller, gc_policy=policy)


def run(args: argparse.Namespace) -> int:
    logging.getLogger("k8py").setLevel(args.log_level.upper())
    return asyncio.run(_main(args))
