"""OCI image figures: pod start-up with a host image vs a pulled image under bwrap; image pull cold/warm.

Starts a real API server and a real kubelet (``k8py kubelet``, process
runtime, bubblewrap) as processes on free ports, and Debian's
``docker-registry`` on a free loopback port with its storage in a temp dir.
Then, in one run:

1. **floor**: ``bwrap --ro-bind <image rootfs> / --proc /proc --dev /dev
   --unshare-pid --unshare-ipc --unshare-uts true`` run ``--pods`` times
   (what any bwrap-based container costs on this machine), and the same
   under ``unshare --mount`` with the overlay mount the runtime adds as root;
2. **start-up latency** (the kubelet SLI: create → all containers running,
   seen through a watch), ``--pods`` pods at ``--rate``/s, with the host
   image catalog (``busybox``) and with an image pulled from the registry
   (already on the node: IfNotPresent, so the pull is not in the figure);
3. **pull** of a ~``--image-mib`` MiB image (busybox-static plus random
   bytes, incompressible) through the kubelet's puller: cold (empty store),
   warm (blobs and rootfs present: one manifest request), and the
   registry's raw transfer of the same blobs for comparison.

Target from the issue: process runtime + OCI image p50 ≤ 150 ms.
Run small: ``python bench/oci_bench.py --pods 20``. Needs docker-registry,
busybox-static and bwrap (scripts/test installs them).
"""

from __future__ import annotations

import argparse
import asyncio
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

from kubelet_bench import _kill_recorded, _launch, _pct, _start, _stop  # noqa: E402

from k8py.client.kubeconfig import load_kubeconfig  # noqa: E402
from k8py.client.resources import NAMESPACES  # noqa: E402
from k8py.client.rest import RestClient  # noqa: E402
from k8py.kubelet.images.puller import ImagePuller  # noqa: E402
from tests.support.oci_registry import Registry, busybox_layer, image  # noqa: E402


def _line(label: str, lat: list[float]) -> None:
    print(f"{label:<52} n={len(lat):4d}  p50 {_pct(lat, 50):7.1f} ms  p99 {_pct(lat, 99):7.1f} ms  max {max(lat):7.1f} ms")


def _floor(rootfs: str, n: int, overlay_dir: str | None) -> list[float]:
    bwrap = shutil.which("bwrap") or "bwrap"
    out = []
    for i in range(n):
        argv = [bwrap, "--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "/bin/true"]
        if overlay_dir:
            d = os.path.join(overlay_dir, str(i))
            for sub in ("upper", "work", "merged"):
                os.makedirs(os.path.join(d, sub))
            script = 'mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4" && shift 4 && exec "$@"'
            argv[2] = os.path.join(d, "merged")
            argv[1] = "--bind"
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", rootfs,
                    f"{d}/upper", f"{d}/work", f"{d}/merged", *argv]
        t = time.perf_counter()
        subprocess.run(argv, check=True)
        out.append((time.perf_counter() - t) * 1000)
    return out


def _pod(image_name: str):  # type: ignore[no-untyped-def]
    def make(name: str, node: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": image_name, "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"]}]}}
    return make


async def _scenario(kubeconfig: str, label: str, ns: str, count: int, node: str, rate: float, image_name: str) -> list[float]:
    import kubelet_bench
    kubelet_bench._pod = _pod(image_name)  # the shared launcher builds pods through this
    client = RestClient(load_kubeconfig(kubeconfig))
    try:
        await client.create(NAMESPACES, {"metadata": {"name": ns}})
        done = await _launch(client, ns, [f"p{i}" for i in range(count)], node, rate)
        lat = [v * 1000 for v in done.values()]
        _line(label, lat)
        return lat
    finally:
        await client.close()


async def _pulls(ref: str, store: str, rounds: int) -> tuple[list[float], list[float]]:
    cold, warm = [], []
    for i in range(rounds):
        puller = ImagePuller(os.path.join(store, str(i)))
        try:
            t = time.perf_counter()
            await puller.pull(ref)
            cold.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await puller.pull(ref)
            warm.append((time.perf_counter() - t) * 1000)
        finally:
            await puller.close()
    return cold, warm


def _raw_transfer(reg: Registry, repo: str, img) -> float:  # type: ignore[no-untyped-def]
    import hashlib
    import urllib.request
    t = time.perf_counter()
    for layer in img.layers:
        digest = "sha256:" + hashlib.sha256(layer.blob).hexdigest()
        with urllib.request.urlopen(f"http://{reg.host}/v2/{repo}/blobs/{digest}", timeout=60) as r:
            while r.read(1 << 20):
                pass
    return (time.perf_counter() - t) * 1000


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=50)
    ap.add_argument("--rate", type=float, default=5.0)
    ap.add_argument("--image-mib", type=float, default=5.0)
    ap.add_argument("--pull-rounds", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="oci-bench-")
    procs: list[subprocess.Popen[str]] = []
    reg = Registry(f"{tmp}/registry")
    try:
        reg.start()
        small = image([busybox_layer({"etc/os-release": "ID=k8py-bench\n"})])
        small_ref = reg.push("bench/small", "1", small)
        want = int(args.image_mib * 1024 * 1024)
        pad = max(0, want - len(busybox_layer().blob))  # the padding is random: it does not compress
        big = image([busybox_layer({"etc/os-release": "ID=k8py-bench-big\n"}, padding=pad)])
        big_ref = reg.push("bench/big", "1", big)
        api, _ = _start(["apiserver", "--data-dir", f"{tmp}/api", "--port", "0"], r"listening on (http://\S+)")
        procs.append(api)
        kc = f"{tmp}/api/kubeconfig"
        cidr = f"127.{random.randint(65, 127)}.{random.randrange(0, 256, 4)}.0/22"
        kubelet, _ = _start(["kubelet", "--kubeconfig", kc, "--node-name", "bench", "--root-dir", f"{tmp}/kubelet", "--port", "0",
                             "--max-pods", str(2 * args.pods + 10), "--pod-cidr", cidr], r"running\b")
        procs.append(kubelet)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start (shared machine)")
        # the small image on the node first (its pull is not part of the start-up figure)
        asyncio.run(_scenario(kc, "warm-up: one pod from the registry image", "warm", 1, "bench", 0, small_ref))
        rootfs = asyncio.run(_rootfs(f"{tmp}/kubelet/images", small_ref))
        _line("floor: bwrap true (image rootfs, read-only)", _floor(rootfs, args.pods, None))
        if os.geteuid() == 0:
            _line("floor: unshare + overlay mount + bwrap true", _floor(rootfs, args.pods, f"{tmp}/overlays"))
        asyncio.run(_scenario(kc, f"start-up, host image (catalog), {args.rate:g} pods/s", "host", args.pods, "bench", args.rate, "busybox"))
        asyncio.run(_scenario(kc, f"start-up, OCI image under bwrap, {args.rate:g} pods/s", "oci", args.pods, "bench", args.rate, small_ref))
        size = sum(len(layer.blob) for layer in big.layers) + len(big.config_bytes)
        cold, warm = asyncio.run(_pulls(big_ref, f"{tmp}/pull-stores", args.pull_rounds))
        print(f"pull of a {size / 1048576:.1f} MiB image: cold p50 {_pct(cold, 50):.0f} ms (min {min(cold):.0f}), "
              f"warm p50 {_pct(warm, 50):.1f} ms; raw blob transfer {_raw_transfer(reg, 'bench/big', big):.0f} ms")
        return 0
    finally:
        _stop(procs)
        _kill_recorded(f"{tmp}/kubelet")
        reg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def _rootfs(store: str, ref: str) -> str:
    puller = ImagePuller(store)
    try:
        rec = puller.status(ref)
        assert rec is not None, "the warm-up pod's image is not in the kubelet's store"
        return puller.store.rootfs(rec.id)
    finally:
        await puller.close()


if __name__ == "__main__":
    sys.exit(main())
