"""Pod start-up with a network namespace per pod, beside the CNI ADD floor (issue 16, part 2). Root only.

In one run, on one API server (``k8py apiserver``, Service range in 10.x):

1. **CNI floor**: what the runtime's network step costs by itself —
   ``ip netns add`` + CNI ADD of ``loopback`` and ``bridge``/``host-local``
   (:class:`~k8py.kubelet.network.pod_network.CNIPodNetwork.setup`), then
   CNI DEL + ``ip netns delete`` (``teardown``), ``--floor`` times;
2. **start-up latency** (upstream's SLI: creation → all containers
   running, seen through a watch; as bench/kubelet_bench.py measures it) of
   ``--pods`` pods created ``--rate`` per second on a kubelet with the
   default loopback network, then on one with ``--pod-network=cni``.

The difference between the two start-up runs is what a pod network adds
per pod; the floor says how much of that is the CNI plugins themselves.
Everything made (namespaces, bridges, cgroups, processes) is removed at
the end. ``python bench/netns_bench.py --pods 20``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kubelet_bench import _kill_recorded, _pct, _scenario, _start, _stop  # noqa: E402

from k8py.kubelet.cgroups.tree import CgroupTree, node_cgroup_name  # noqa: E402
from k8py.kubelet.network.names import NetworkNames  # noqa: E402
from k8py.kubelet.network.pod_network import CNIPodNetwork  # noqa: E402
from k8py.kubelet.runtime.protocols import PodSandboxConfig  # noqa: E402


async def cni_floor(tmp: str, pod_cidr: str, n: int) -> tuple[list[float], list[float]]:
    """Prints and returns the milliseconds of each setup (netns + ADD) and each teardown (DEL + netns delete)."""
    net = CNIPodNetwork(NetworkNames("floor", f"{tmp}/floor"), f"{tmp}/floor")
    await net.set_cidr(pod_cidr)
    ups, downs = [], []
    try:
        for i in range(n):
            sid = f"{i:064x}"
            t0 = time.perf_counter()
            _, name = await net.setup(sid, PodSandboxConfig(f"f{i}", "bench", f"uid{i}"))
            t1 = time.perf_counter()
            await net.teardown(sid, name)
            t2 = time.perf_counter()
            ups.append((t1 - t0) * 1000)
            downs.append((t2 - t1) * 1000)
    finally:
        await net.cleanup()
    print(f"{'CNI floor: netns add + ADD (loopback, bridge)':<52} n={n:4d}  p50 {statistics.median(ups):7.1f} ms  "
          f"p99 {_pct(ups, 99):7.1f} ms")
    print(f"{'CNI floor: DEL + netns delete':<52} n={n:4d}  p50 {statistics.median(downs):7.1f} ms  p99 {_pct(downs, 99):7.1f} ms")
    return ups, downs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=50)
    ap.add_argument("--rate", type=float, default=5.0, help="pods created per second")
    ap.add_argument("--floor", type=int, default=30, help="CNI ADD/DEL cycles for the floor")
    args = ap.parse_args()
    why = CNIPodNetwork.available()
    if why:
        print(f"netns_bench: {why}", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="k8py-netns-bench-")
    a = random.randint(100, 250)
    pod_cidr, floor_cidr, svc_cidr = (f"10.{a}.{random.randrange(0, 256, 4)}.0/22", f"10.{a}.{random.randint(0, 255)}.0/24",
                                      f"10.{a + 1}.{random.randint(0, 255)}.0/24")
    procs: list[subprocess.Popen[str]] = []
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start (shared machine)")
    try:
        asyncio.run(cni_floor(tmp, floor_cidr, args.floor))
        api, _ = _start(["apiserver", "--data-dir", f"{tmp}/api", "--port", "0", "--service-cluster-ip-range", svc_cidr],
                        r"listening on (http://\S+)")
        procs.append(api)
        kc = f"{tmp}/api/kubeconfig"
        maxpods = str(args.pods + 10)
        loop_cidr = f"127.{random.randint(65, 127)}.{random.randrange(0, 256, 4)}.0/22"
        kubelet, _ = _start(["kubelet", "--kubeconfig", kc, "--node-name", "bench-loopback", "--root-dir", f"{tmp}/k1", "--port", "0",
                             "--max-pods", maxpods, "--pod-cidr", loop_cidr], r"running\b")
        procs.append(kubelet)
        netk, _ = _start(["kubelet", "--kubeconfig", kc, "--node-name", "bench-netns", "--root-dir", f"{tmp}/k2", "--port", "0",
                          "--max-pods", maxpods, "--pod-cidr", pod_cidr, "--pod-network", "cni",
                          "--service-cluster-ip-range", svc_cidr], r"running\b")
        procs.append(netk)
        asyncio.run(_scenario(kc, f"start-up, process runtime, loopback, {args.rate:g}/s", "lat-loopback", args.pods,
                              "bench-loopback", args.rate))
        asyncio.run(_scenario(kc, f"start-up, process runtime + pod netns, {args.rate:g}/s", "lat-netns", args.pods,
                              "bench-netns", args.rate))
        return 0
    finally:
        _stop(procs)
        for root, node in ((f"{tmp}/k1", "bench-loopback"), (f"{tmp}/k2", "bench-netns")):
            _kill_recorded(root)
            CgroupTree(node_cgroup_name(node, root)).cleanup()
        asyncio.run(CNIPodNetwork(NetworkNames("bench-netns", os.path.abspath(f"{tmp}/k2")), f"{tmp}/k2/runtime").cleanup())
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
