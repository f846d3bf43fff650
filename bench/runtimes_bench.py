"""Issue 16's benchmarks in one run: pod start-up on each runtime beside the floors under it, and image pulls.

One API server (``k8py apiserver``), one local registry (Debian's
``docker-registry``), one containerd (as ``k8py up --runtime containerd``
configures it) and three kubelets (``k8py kubelet``), all processes on this
machine, started once. Then, in this order, so every figure sees the same
machine:

floors (what the parts below a runtime cost by themselves)
  - ``bwrap true`` on the image's rootfs (read-only; bench/oci_bench.py);
  - ``runc run`` of ``/bin/true`` on the same rootfs, ``runc spec``'s config
    (own namespaces, cgroups below a bench-only parent) — root only;
  - CNI ADD: ``ip netns add`` + loopback + bridge/host-local, and its DEL
    (bench/netns_bench.py) — root only;
  - containerd's own RunPodSandbox + CreateContainer + StartContainer over
    CRI, with the configs the kubelet sends (bench/containerd_bench.py),
    interleaved with the containerd kubelet's pods — root only;

pod start-up latency (the kubelet SLI: create → all containers running, seen
through a watch; client-side; bench/kubelet_bench.py's launcher)
  - process runtime, host image (the catalog's ``busybox``);
  - process runtime, OCI image pulled from the registry, run under bwrap
    (already on the node: the pull is not in the figure);
  - process runtime + pod network namespace (``--pod-network cni``);
  - containerd (``--container-runtime-endpoint``), ``busybox:1.35``;

image pull of a ``--image-mib`` MiB image (incompressible) from the local
registry through the kubelet's puller: cold (empty store) and warm (one
manifest request), beside the raw blob transfer.

Targets (issue 16): process + OCI image p50 ≤ 150 ms; containerd p50 within
1.5× its own floor. The figures' code lives in the benches named above and
is imported from them. Without root (or containerd, or the CNI plugins) the
parts that need them are left out and the run says so. Everything made
(processes, containerd's state, netns, bridges, cgroups) is removed at the
end. Run small: ``python bench/runtimes_bench.py --pods 10``.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import containerd_bench  # noqa: E402
import kubelet_bench  # noqa: E402
import netns_bench  # noqa: E402
import oci_bench  # noqa: E402
from kubelet_bench import _kill_recorded, _pct, _start, _stop  # noqa: E402

from k8py.kubelet.cgroups.tree import CgroupTree, node_cgroup_name  # noqa: E402
from k8py.kubelet.network.names import NetworkNames  # noqa: E402
from k8py.kubelet.network.pod_network import CNIPodNetwork  # noqa: E402
from tests.support.containerd import Containerd, containerd_missing  # noqa: E402
from tests.support.oci_registry import Registry, busybox_layer, image  # noqa: E402

#: (label, p50 ms) of every figure, for the summary at the end
SUMMARY: list[tuple[str, float]] = []


def _record(label: str, lat: list[float], *, printed: bool = False) -> float:
    if not printed:
        oci_bench._line(label, lat)
    p50 = _pct(lat, 50)
    SUMMARY.append((label, p50))
    return p50


def runc_floor(rootfs: str, tmp: str, n: int) -> list[float]:
    """``runc run`` of ``/bin/true`` on ``rootfs``, ``n`` times; milliseconds each (runc deletes each container)."""
    bundle = os.path.join(tmp, "runc-bundle")
    os.makedirs(bundle)
    subprocess.run(["runc", "spec", "--bundle", bundle], check=True)
    with open(os.path.join(bundle, "config.json"), encoding="utf-8") as f:
        spec = json.load(f)
    parent = f"k8py-bench-runc-{os.getpid()}"
    spec["root"] = {"path": rootfs, "readonly": True}
    spec["process"].update(args=["/bin/true"], terminal=False)
    with open(os.path.join(bundle, "config.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f)
    state = os.path.join(tmp, "runc-state")
    out = []
    try:
        for i in range(n):
            spec["linux"]["cgroupsPath"] = f"/{parent}/c{i}"
            with open(os.path.join(bundle, "config.json"), "w", encoding="utf-8") as f:
                json.dump(spec, f)
            t = time.perf_counter()
            subprocess.run(["runc", "--root", state, "run", "--bundle", bundle, f"k8py-bench-{os.getpid()}-{i}"], check=True,
                           stdin=subprocess.DEVNULL)
            out.append((time.perf_counter() - t) * 1000)
    finally:
        for d in glob.glob(f"/sys/fs/cgroup/*/{parent}") + glob.glob(f"/sys/fs/cgroup/{parent}"):
            for sub in sorted(glob.glob(f"{d}/*/"), reverse=True):
                _rmdir(sub)
            _rmdir(d)
    return out


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def main() -> int:
    signal.signal(signal.SIGTERM, kubelet_bench._interrupt)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=20, help="pods per start-up scenario (and runs per floor)")
    ap.add_argument("--rate", type=float, default=5.0, help="pods created per second on the process runtime")
    ap.add_argument("--gap", type=float, default=0.3, help="seconds between containerd pods (one at a time)")
    ap.add_argument("--image-mib", type=float, default=5.0)
    ap.add_argument("--pull-rounds", type=int, default=5)
    args = ap.parse_args()
    root = os.geteuid() == 0
    no_cni = CNIPodNetwork.available() if root else "not root"
    no_containerd = containerd_missing() if root else "not root"
    tmp = tempfile.mkdtemp(prefix="k8rb-", dir="/tmp")  # short: containerd's socket path
    procs: list[subprocess.Popen[str]] = []
    reg = Registry(f"{tmp}/registry")
    ctrd = None if no_containerd else Containerd(os.path.join(tmp, "ctrd"))
    a = random.randint(100, 250)
    pod_cidr, floor_cidr, svc_cidr = (f"10.{a}.{random.randrange(0, 256, 4)}.0/22", f"10.{a}.{random.randint(0, 255)}.0/24",
                                      f"10.{a + 1}.{random.randint(0, 255)}.0/24")
    try:
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start (shared machine)", flush=True)
        reg.start()
        small_ref = reg.push("bench/small", "1", image([busybox_layer({"etc/os-release": "ID=k8py-bench\n"})]))
        pad = max(0, int(args.image_mib * 1024 * 1024) - len(busybox_layer().blob))  # random padding: incompressible
        big = image([busybox_layer({"etc/os-release": "ID=k8py-bench-big\n"}, padding=pad)])
        big_ref = reg.push("bench/big", "1", big)
        if ctrd is not None:
            t0 = time.perf_counter()
            ctrd.start()
            print(f"containerd {ctrd.layout.socket} up with its local images in {(time.perf_counter() - t0) * 1000:.0f} ms",
                  flush=True)
        api, _ = _start(["apiserver", "--data-dir", f"{tmp}/api", "--port", "0", "--service-cluster-ip-range", svc_cidr],
                        r"listening on (http://\S+)")
        procs.append(api)
        kc = f"{tmp}/api/kubeconfig"
        maxpods = str(2 * args.pods + 10)
        loop_cidr = f"127.{random.randint(65, 127)}.{random.randrange(0, 256, 4)}.0/22"
        procs.append(_start(["kubelet", "--kubeconfig", kc, "--node-name", "bench-process", "--root-dir", f"{tmp}/k1", "--port", "0",
                             "--max-pods", maxpods, "--pod-cidr", loop_cidr], r"running\b")[0])
        if not no_cni:
            procs.append(_start(["kubelet", "--kubeconfig", kc, "--node-name", "bench-netns", "--root-dir", f"{tmp}/k2", "--port", "0",
                                 "--max-pods", maxpods, "--pod-cidr", pod_cidr, "--pod-network", "cni",
                                 "--service-cluster-ip-range", svc_cidr], r"running\b")[0])
        if ctrd is not None:
            procs.append(_start(["kubelet", "--kubeconfig", kc, "--node-name", containerd_bench.NODE, "--root-dir", f"{tmp}/k3",
                                 "--port", "0", "--container-runtime-endpoint", ctrd.endpoint, "--cgroup-root", ctrd.cgroup_parent,
                                 "--runtime-relist-period", "1", "--max-pods", maxpods], r"running\b")[0])

        # the registry image on the process node first: its pull is not part of the start-up figure
        asyncio.run(oci_bench._scenario(kc, "warm-up: one pod from the registry image", "warm", 1, "bench-process", 0, small_ref))
        rootfs = asyncio.run(oci_bench._rootfs(f"{tmp}/k1/images", small_ref))

        print("-- floors", flush=True)
        _record("floor: bwrap true (image rootfs, read-only)", oci_bench._floor(rootfs, args.pods, None))
        if root and shutil.which("runc"):
            _record("floor: runc run /bin/true (same rootfs)", runc_floor(rootfs, tmp, args.pods))
        else:
            print("floor: runc run — left out (needs root and runc)")
        if not no_cni:
            ups, _ = asyncio.run(netns_bench.cni_floor(tmp, floor_cidr, args.pods))
            _record("floor: CNI ADD (netns add + loopback + bridge)", ups, printed=True)
        else:
            print(f"floor: CNI ADD — left out ({no_cni})")

        print("-- pod start-up latency (create -> running, watched)", flush=True)
        host = asyncio.run(oci_bench._scenario(kc, f"process runtime, host image, {args.rate:g}/s", "host", args.pods,
                                               "bench-process", args.rate, "busybox"))
        _record("start-up: process runtime, host image", host, printed=True)
        oci = asyncio.run(oci_bench._scenario(kc, f"process runtime, OCI image under bwrap, {args.rate:g}/s", "oci", args.pods,
                                              "bench-process", args.rate, small_ref))
        oci_p50 = _record("start-up: process runtime, OCI image under bwrap", oci, printed=True)
        if not no_cni:
            netns = asyncio.run(oci_bench._scenario(kc, f"process runtime + pod netns, {args.rate:g}/s", "netns", args.pods,
                                                    "bench-netns", args.rate, "busybox"))
            _record("start-up: process runtime + pod netns", netns, printed=True)
        ratio = None
        if ctrd is not None:
            floor, sli = asyncio.run(containerd_bench._rounds(kc, ctrd, tmp, args.pods, args.gap))
            floor_p50 = _record("floor: containerd RunPodSandbox+CreateContainer+StartContainer", floor)
            ratio = _record("start-up: containerd (kubelet over CRI), one at a time", sli) / floor_p50
        else:
            print(f"start-up: containerd — left out ({no_containerd})")

        print("-- image pull (kubelet's puller, local registry)", flush=True)
        size = sum(len(layer.blob) for layer in big.layers) + len(big.config_bytes)
        cold, warm = asyncio.run(oci_bench._pulls(big_ref, f"{tmp}/pull-stores", args.pull_rounds))
        _record(f"pull {size / 1048576:.1f} MiB image, cold", cold)
        _record(f"pull {size / 1048576:.1f} MiB image, warm", warm)
        print(f"raw blob transfer of the same image: {oci_bench._raw_transfer(reg, 'bench/big', big):.0f} ms")

        print("-- targets", flush=True)
        print(f"process runtime + OCI image p50 {oci_p50:.1f} ms (target <= 150 ms): {'met' if oci_p50 <= 150 else 'MISSED'}")
        if ratio is not None:
            print(f"containerd p50 / its floor's p50: {ratio:.2f}x (target <= 1.5x): {'met' if ratio <= 1.5 else 'MISSED'}")
        print(f"load average {os.getloadavg()[0]:.1f} at the end (2 cores shared with other work)", flush=True)
        print("-- summary (p50 ms)")
        for label, p50 in SUMMARY:
            print(f"  {label:<64} {p50:8.1f}")
        return 0
    finally:
        _stop(procs)
        _kill_recorded(f"{tmp}/k1")
        CgroupTree(node_cgroup_name("bench-process", f"{tmp}/k1")).cleanup()
        if not no_cni:
            _kill_recorded(f"{tmp}/k2")
            CgroupTree(node_cgroup_name("bench-netns", f"{tmp}/k2")).cleanup()
            asyncio.run(CNIPodNetwork(NetworkNames("bench-netns", os.path.abspath(f"{tmp}/k2")), f"{tmp}/k2/runtime").cleanup())
        if ctrd is not None:
            ctrd.stop()  # shims, containers, bridge, cgroups
        reg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
