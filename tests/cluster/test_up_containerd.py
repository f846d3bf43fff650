"""``k8py up --runtime containerd`` end to end, then ``k8py down`` leaving nothing behind (root, Debian's containerd).

The cluster as a user gets it: one supervised containerd per node with its
own root, state and socket, the local sandbox and busybox images, pods on
the node's bridge with IPs from its podCIDR (containerd writes its CNI config
from the template once the kubelet passes the CIDR on), two pods of one
Deployment on the same port in their own namespaces behind a Service
(nftables), cluster DNS answering from inside a pod's namespace; and after
``k8py down`` no shim, container process, bridge, cgroup, nft table, mount
or state directory of that cluster on the machine; ``k8py up`` on the same
data directory resumes it with its pods running again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import urllib.request

import pytest

from k8py.cluster.containerd import ContainerdLayout
from k8py.cluster.containerd_cleanup import containerd_pids, shim_pids
from k8py.cluster.spec import proxy_nftables_table
from tests.cluster.up_helpers import k8py, wait_for
from tests.support.containerd import containerd_missing

pytestmark = pytest.mark.timeout(600)

NODE = "k8py-node-0"
CONTAINERD_MISSING = "containerd tests need root, Debian's containerd and containernetworking-plugins"


def leftovers(data: str) -> dict[str, object]:
    layout = ContainerdLayout.for_node(data, NODE)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout.split("\n")
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f if line.split()[4].startswith((data + "/", layout.state + "/"))]
    cgroups = [d for c in ("memory", "cpu", "pids", "systemd", "unified") if os.path.isdir(d := f"/sys/fs/cgroup/{c}{layout.cgroup_parent}")]
    found = {"shims": shim_pids(layout), "containerd": containerd_pids(layout), "state": os.path.isdir(layout.state),
             "bridge": f" {layout.bridge}:" in links, "nft": f"table ip {proxy_nftables_table(data, NODE)}" in tables,
             "mounts": mounts, "cgroups": cgroups}
    return {k: v for k, v in found.items() if v}


def test_up_runs_pods_on_containerd_with_services_and_dns_and_down_removes_everything(tmp_path) -> None:
    why = containerd_missing()
    if why:
        pytest.skip(f"{CONTAINERD_MISSING}: {why}")
    data = str(tmp_path / "cluster")
    logs = tuple(os.path.join(data, "logs", f) for f in ("kubelet-k8py-node-0.log", "containerd-k8py-node-0.log", "proxy.log"))
    up = k8py("up", "--runtime", "containerd", "--detach", "--port", "0", "--data-dir", data, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "containerd/k8py-node-0 up" in up.stdout, up.stdout
    try:
        env = dict(os.environ, KUBECONFIG=os.path.join(data, "kubeconfig"))

        def kc(*args: str, check: bool = True) -> str:
            return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60, check=check).stdout

        node = json.loads(kc("get", "node", NODE, "-o", "json"))
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.")
        pod_cidr = ipaddress.ip_network(node["spec"]["podCIDR"])
        layout = ContainerdLayout.for_node(data, NODE)
        assert leftovers(data).keys() >= {"containerd", "state", "bridge"}
        # two pods on one port, each in its own namespace, behind a Service
        kc("create", "deployment", "web", "--image=busybox:1.35", "--replicas=2", "--port=8080", "--",
           "sh", "-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www")
        kc("expose", "deployment", "web", "--port", "80", "--target-port", "8080")
        pods = wait_for(lambda: (lambda out: len(out.split()) == 2 and out.split())(
            kc("get", "pods", "-l", "app=web", "--field-selector=status.phase=Running",
               "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.podIP} {end}")), "two running web pods", timeout=180, logs=logs)
        ips = {p.split("=")[1] for p in pods}
        assert len(ips) == 2 and all(ipaddress.ip_address(ip) in pod_cidr for ip in ips), (pods, pod_cidr)
        # containerd wrote the CNI config from the template with the node's CIDR
        conf = open(os.path.join(layout.cni_conf_dir, "10-containerd-net.conflist")).read()
        assert str(pod_cidr) in conf and layout.bridge in conf
        vip = kc("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")
        names = {p.split("=")[0] for p in pods}
        seen: set[str] = set()

        def both_answer() -> bool:
            try:
                seen.add(urllib.request.urlopen(f"http://{vip}/", timeout=5).read().decode().strip())
            except OSError:
                pass
            return seen >= names
        wait_for(both_answer, f"both pods answering on the Service {vip} (seen {seen})", timeout=120, logs=logs)
        assert "(nftables mode)" in open(os.path.join(data, "logs", "proxy.log")).read()
        # from inside a pod's namespace: the Service by its DNS name, through cluster DNS
        kc("run", "client", "--image=busybox:1.35", "--restart=Never", "--",
           "sh", "-c", "cat /etc/resolv.conf; nslookup web.default.svc.cluster.local && wget -qO- http://web.default.svc.cluster.local/")
        wait_for(lambda: kc("get", "pod", "client", "-o", "jsonpath={.status.phase}") in ("Succeeded", "Failed"),
                 "the client pod to finish", timeout=120, logs=logs)
        out = kc("logs", "client")
        assert kc("get", "pod", "client", "-o", "jsonpath={.status.phase}") == "Succeeded", out
        assert vip in out and out.strip().splitlines()[-1] in names, out
    finally:
        down = k8py("down", "--data-dir", data, timeout=180)
    assert down.returncode == 0, down.stdout + down.stderr
    assert leftovers(data) == {}
    # the same data directory again: the cluster resumes, the Deployment's pods run again (new sandboxes)
    up = k8py("up", "--runtime", "containerd", "--detach", "--port", "0", "--data-dir", data, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        again = wait_for(lambda: (lambda out: len(out.split()) == 2 and out.split())(
            kc("get", "pods", "-l", "app=web", "--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].status.podIP}")),
            "the web pods running again after the cluster resumed", timeout=180, logs=logs)
        assert all(ipaddress.ip_address(ip) in pod_cidr for ip in again), again
    finally:
        down = k8py("down", "--data-dir", data, timeout=180)
    assert down.returncode == 0, down.stdout + down.stderr
    assert leftovers(data) == {}


def test_up_with_containerd_says_what_is_missing(tmp_path) -> None:
    # containerd not on PATH: which package to install
    env = dict(os.environ, PATH="/nonexistent")
    r = subprocess.run([sys.executable, "-m", "k8py", "up", "--runtime", "containerd", "--data-dir", str(tmp_path / "a")],
                       capture_output=True, text=True, env=env, timeout=120)
    if os.geteuid() == 0:
        assert r.returncode == 2 and "containerd is not on PATH: apt-get install containerd" in r.stderr, r.stderr
    else:
        assert r.returncode == 2 and "needs root" in r.stderr, r.stderr
    # not root: says so. In a user namespace of its own the process is uid 65534, yet still reads what
    # root may read (the interpreter and the checkout may live under a 0700 /root, where a real
    # nobody, e.g. through setpriv, could not even import k8py)
    if os.geteuid() == 0:
        r = subprocess.run(["unshare", "--user", sys.executable, "-m", "k8py", "up",
                            "--runtime", "containerd", "--data-dir", str(tmp_path / "b")],
                           capture_output=True, text=True, timeout=120, env=dict(os.environ, HOME=str(tmp_path)), cwd="/")
        assert r.returncode == 2 and "--runtime containerd needs root" in r.stderr, r.stdout + r.stderr
    r = k8py("up", "--runtime", "containerd", "--pod-network", "cni", "--data-dir", str(tmp_path / "c"))
    assert r.returncode == 2 and "drop --pod-network cni" in r.stderr, r.stderr
    r = k8py("up", "--container-runtime-endpoint", "unix:///run/x.sock", "--data-dir", str(tmp_path / "d"))
    assert r.returncode == 2 and "needs --runtime containerd" in r.stderr, r.stderr


def test_up_on_a_running_containerd_uses_it_and_down_removes_only_its_pods(tmp_path) -> None:
    why = containerd_missing()
    if why:
        pytest.skip(f"{CONTAINERD_MISSING}: {why}")
    import tempfile

    from k8py.kubelet.runtime.cri.client import CRIClient
    from tests.support.containerd import Containerd

    workdir = tempfile.mkdtemp(prefix="k8cu-", dir="/tmp")  # short: the socket path
    data = str(tmp_path / "cluster")
    layout = ContainerdLayout.for_node(data, NODE)

    def sandboxes(ctrd: Containerd) -> list[str]:
        async def names() -> list[str]:
            async with CRIClient(ctrd.endpoint) as cri:
                return [s.metadata.name for s in await cri.list_pod_sandbox()]
        return asyncio.run(names())

    try:
        with Containerd(workdir) as ctrd:
            up = k8py("up", "--runtime", "containerd", "--container-runtime-endpoint", ctrd.endpoint, "--no-dns", "--detach",
                      "--port", "0", "--data-dir", data, timeout=300)
            assert up.returncode == 0, up.stdout + up.stderr
            assert "containerd/" not in up.stdout, up.stdout  # no containerd of its own
            try:
                env = dict(os.environ, KUBECONFIG=os.path.join(data, "kubeconfig"))

                def kc(*args: str) -> str:
                    return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60, check=True).stdout
                kc("run", "sleeper", "--image=busybox:1.35", "--", "sleep", "600")
                ip = wait_for(lambda: kc("get", "pod", "sleeper", "-o", "jsonpath={.status.podIP}"), "the pod on the running containerd",
                              timeout=180, logs=(os.path.join(data, "logs", "kubelet-k8py-node-0.log"),))
                assert ipaddress.ip_address(str(ip)) in ipaddress.ip_network(ctrd.subnet)  # that containerd's own CNI config
                assert "sleeper" in sandboxes(ctrd)
            finally:
                down = k8py("down", "--data-dir", data, timeout=180)
            assert down.returncode == 0, down.stdout + down.stderr
            assert ctrd.proc is not None and ctrd.proc.poll() is None, "k8py down stopped a containerd it did not start"
            assert "sleeper" not in sandboxes(ctrd), "k8py down left its pod in the containerd"
            assert not os.path.isdir(f"/sys/fs/cgroup/memory{layout.cgroup_parent}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
