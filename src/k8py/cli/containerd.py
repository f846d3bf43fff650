"""``k8py containerd``: run Debian's containerd for one node (what ``k8py up --runtime containerd`` supervises).

``k8py containerd --data-dir DIR --node-name N`` keeps the node's containerd
below ``DIR/containerd/N`` (see :mod:`k8py.cluster.containerd`), prints its
endpoint for ``k8py kubelet --container-runtime-endpoint`` and serves
``/healthz`` and ``/metrics`` once the runtime can run pods.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("containerd", help="run Debian's containerd for one node, configured for k8py (root)")
    p.add_argument("--data-dir", required=True, help="the cluster's data directory (containerd keeps its images below DIR/containerd/NODE)")
    p.add_argument("--node-name", required=True, help="the node this containerd serves")
    p.add_argument("--service-cluster-ip-range", default="", help="routed onto the node's pod bridge (no Service packet leaves the machine)")
    p.add_argument("--pod-subnet", default="",
                   help="a fixed pod subnet for the CNI config (default: containerd writes it from the node's podCIDR, "
                        "which the kubelet passes with UpdateRuntimeConfig)")
    p.add_argument("--insecure-registry", action="append", default=[], help="a registry host:port reached over plain HTTP (repeatable)")
    p.add_argument("--cni-bin-dir", default="/usr/lib/cni")
    p.add_argument("--port", type=int, default=0, help="port of /healthz and /metrics; 0 picks a free one")
    p.add_argument("--log-level", default="WARNING")


def run(args: argparse.Namespace) -> int:
    from k8py.cli.proxy import _serve
    from k8py.cluster.containerd import ContainerdLayout, containerd_missing
    from k8py.cluster.containerd_node import ContainerdOptions, run as run_containerd

    why = containerd_missing(args.cni_bin_dir)
    if why:
        print(f"k8py containerd: {why}", file=sys.stderr)
        return 2
    from k8py.kubelet.network import host

    host.remember_ip_forward()  # the bridge plugin turns it on; k8py down puts it back when the last k8py bridge goes
    layout = ContainerdLayout.for_node(os.path.abspath(args.data_dir), args.node_name)
    options = ContainerdOptions(layout=layout, node=args.node_name, service_cidr=args.service_cluster_ip_range,
                                subnet=args.pod_subnet, registries=tuple(args.insecure_registry),
                                cni_bin_dir=args.cni_bin_dir, port=args.port)

    def serving(url: str, endpoint: str) -> None:
        print(f"k8py containerd: node {args.node_name} runtime at {endpoint} (cgroups below {layout.cgroup_parent}, "
              f"bridge {layout.bridge}); /healthz and /metrics on {url}", flush=True)

    return _serve("containerd", lambda: run_containerd(options, on_serving=serving))
