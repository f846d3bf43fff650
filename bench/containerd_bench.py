"""containerd figures: the kubelet's pod start-up latency on containerd beside containerd's own floor, in one run.

Starts Debian's containerd the way ``k8py up --runtime containerd`` does
(:mod:`k8py.cluster.containerd`: own root, state and socket, the local
sandbox and busybox images, a CNI bridge), a real API server and a real
kubelet (``k8py kubelet --container-runtime-endpoint``) as processes. Then,
interleaved so that both see the same machine load:

1. **floor**: what containerd itself needs for a pod — ``RunPodSandbox`` +
   ``CreateContainer`` + ``StartContainer`` called directly over CRI with the
   configs the kubelet sends (pod cgroup below the node's cgroup root, own
   pid namespace, log directory), ``busybox:1.35`` running ``sleep``;
2. **start-up latency** (the kubelet SLI: create → all containers running,
   seen through a watch; client-side times): the same pod through the API
   server and the kubelet.

Rounds alternate (floor, kubelet, floor, …) ``--pods`` times, one pod at a
time (``--gap`` seconds apart), all left running until the end. Target from
the issue: kubelet p50 within 1.5× the floor's. Needs root, containerd,
runc and the CNI plugins. Run small: ``python bench/containerd_bench.py --pods 10``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import kubelet_bench  # noqa: E402
from kubelet_bench import _launch, _pct, _start, _stop  # noqa: E402

from k8py.client.kubeconfig import load_kubeconfig  # noqa: E402
from k8py.client.resources import NAMESPACES  # noqa: E402
from k8py.client.rest import RestClient  # noqa: E402
from k8py.cluster.local_images import BUSYBOX_IMAGE  # noqa: E402
from k8py.kubelet.runtime.cri.client import CRIClient, pb  # noqa: E402
from tests.support.containerd import Containerd, containerd_missing  # noqa: E402

NODE = "bench-cri"


def _line(label: str, lat: list[float]) -> None:
    print(f"{label:<56} n={len(lat):4d}  p50 {_pct(lat, 50):7.1f} ms  p99 {_pct(lat, 99):7.1f} ms  max {max(lat):7.1f} ms",
          flush=True)


def _pod(name: str, node: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sleep", "3600"]}]}}


async def _floor_pod(cri: CRIClient, ctrd: Containerd, logs: str, i: int) -> float:
    """One pod straight through CRI, shaped as the kubelet shapes it; returns milliseconds."""
    uid = str(uuid.uuid4())
    log_dir = os.path.join(logs, uid)
    os.makedirs(log_dir, exist_ok=True)
    sandbox = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name=f"floor-{i}", namespace="floor", uid=uid),
                                  hostname=f"floor-{i}", log_directory=log_dir)
    sandbox.linux.cgroup_parent = f"{ctrd.cgroup_parent}/kubepods/besteffort/pod{uid}"
    sandbox.linux.security_context.namespace_options.pid = pb.CONTAINER
    container = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="c"), image=pb.ImageSpec(image=BUSYBOX_IMAGE),
                                   command=["sleep", "3600"], log_path="c/0.log")
    container.linux.security_context.namespace_options.pid = pb.CONTAINER
    started = time.perf_counter()
    sid = await cri.run_pod_sandbox(sandbox)
    cid = await cri.create_container(sid, container, sandbox)
    await cri.start_container(cid)
    return (time.perf_counter() - started) * 1000


async def _rounds(kc: str, ctrd: Containerd, tmp: str, pods: int, gap: float) -> tuple[list[float], list[float]]:
    kubelet_bench._pod = _pod  # the shared launcher builds pods through this
    floor: list[float] = []
    sli: list[float] = []
    client = RestClient(load_kubeconfig(kc))
    try:
        await client.create(NAMESPACES, {"metadata": {"name": "lat-cri"}})
        async with CRIClient(ctrd.endpoint) as cri:
            await _floor_pod(cri, ctrd, os.path.join(tmp, "floor-logs"), -1)  # warm-up: first snapshot, first CNI ADD
            done = await _launch(client, "lat-cri", ["warm"], NODE, 0)
            assert done, "the warm-up pod never ran"
            for i in range(pods):
                floor.append(await _floor_pod(cri, ctrd, os.path.join(tmp, "floor-logs"), i))
                await asyncio.sleep(gap)
                sli.extend(v * 1000 for v in (await _launch(client, "lat-cri", [f"p{i}"], NODE, 0)).values())
                await asyncio.sleep(gap)
    finally:
        await client.close()
    return floor, sli


def main() -> int:
    signal.signal(signal.SIGTERM, kubelet_bench._interrupt)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=20)
    ap.add_argument("--gap", type=float, default=0.3, help="seconds between one pod running and the next start")
    ap.add_argument("--relist", type=float, default=1.0, help="the kubelet's --runtime-relist-period")
    args = ap.parse_args()
    why = containerd_missing()
    if why:
        print(f"containerd bench: {why}", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="k8cb-", dir="/tmp")  # short: containerd's socket path
    procs: list[subprocess.Popen[str]] = []
    ctrd = Containerd(os.path.join(tmp, "ctrd"))
    try:
        t0 = time.perf_counter()
        ctrd.start()
        print(f"containerd up with its local images in {(time.perf_counter() - t0) * 1000:.0f} ms", flush=True)
        api, _ = _start(["apiserver", "--data-dir", f"{tmp}/api", "--port", "0"], r"listening on (http://\S+)")
        procs.append(api)
        kc = f"{tmp}/api/kubeconfig"
        kubelet, _ = _start(["kubelet", "--kubeconfig", kc, "--node-name", NODE, "--root-dir", f"{tmp}/kubelet", "--port", "0",
                             "--container-runtime-endpoint", ctrd.endpoint, "--cgroup-root", ctrd.cgroup_parent,
                             "--runtime-relist-period", str(args.relist), "--max-pods", str(args.pods + 10)], r"running\b")
        procs.append(kubelet)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start (shared machine)", flush=True)
        floor, sli = asyncio.run(_rounds(kc, ctrd, tmp, args.pods, args.gap))
        _line("containerd floor: RunPodSandbox+CreateContainer+StartContainer", floor)
        _line("kubelet on containerd: create -> running (SLI)", sli)
        ratio = _pct(sli, 50) / _pct(floor, 50)
        print(f"p50 ratio kubelet/floor: {ratio:.2f}x (target <= 1.5x); load average {os.getloadavg()[0]:.1f} at the end", flush=True)
        return 0
    finally:
        _stop(procs)
        ctrd.stop()  # shims, containers, bridge, cgroups
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
