"""``k8py up --pod-network cni`` end to end, then ``k8py down`` leaving nothing behind (root only).

The whole cluster as a user gets it: pods on the node's bridge with 10.x
IPs from node IPAM, a Service range beside them, the proxy in nftables
mode, and after ``k8py down`` no namespace, bridge, nft table or cgroup of
that cluster left on the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest

from k8py.cluster.spec import proxy_nftables_table
from k8py.kubelet.cgroups.tree import node_cgroup_name
from k8py.kubelet.network.names import NetworkNames
from tests.support.tools import POD_NETWORK_MISSING, pod_network_missing

NODE = "k8py-node-0"


def _k8py(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "k8py", *args], capture_output=True, text=True, timeout=timeout)


def _wait(check, what: str, timeout: float = 90):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, subprocess.SubprocessError, ValueError) as err:
            last = err
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")


def _leftovers(names: NetworkNames, data: str) -> dict[str, list[str]]:
    netns = [n for n in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else []) if names.owns_netns(n)]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    own = open("/proc/self/cgroup").read()
    cgroups = []
    for line in own.splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            d = os.path.join("/sys/fs/cgroup", c, path.lstrip("/"), f"k8py-{node_cgroup_name(NODE, names.root_dir)}")
            if c in ("memory", "cpu", "cpuacct", "pids") and os.path.isdir(d):
                cgroups.append(d)
    out = {"netns": netns, "links": [names.bridge] if f" {names.bridge}:" in links else [],
           "nft": [table] if f"table ip {(table := proxy_nftables_table(data, NODE))}\n" in tables + "\n" else [], "cgroups": cgroups}
    return {k: v for k, v in out.items() if v}


def test_up_with_pod_networks_serves_a_service_and_down_removes_everything(tmp_path) -> None:
    why = pod_network_missing()
    if why:
        pytest.skip(f"{POD_NETWORK_MISSING}: {why}")
    data = str(tmp_path / "cluster")
    names = NetworkNames(NODE, os.path.join(data, "kubelet", NODE))
    up = _k8py("up", "--pod-network", "cni", "--detach", "--port", "0", "--no-dns", "--data-dir", data)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        env = dict(os.environ, KUBECONFIG=os.path.join(data, "kubeconfig"))

        def kc(*args: str) -> str:
            return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60, check=True).stdout
        kc("create", "deployment", "web", "--image=nginx", "--replicas=2")
        kc("expose", "deployment", "web", "--port", "80")
        ips = _wait(lambda: (lambda out: len(out.split()) == 2 and out.split())(
            kc("get", "pods", "-l", "app=web", "--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].status.podIP}")),
            "two running web pods")
        cluster_cidr = kc("get", "node", NODE, "-o", "jsonpath={.spec.podCIDR}")
        assert all(ip.startswith("10.") for ip in ips) and cluster_cidr.startswith("10."), (ips, cluster_cidr)
        vip = kc("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")
        assert vip.startswith("10.")
        page = _wait(lambda: urllib.request.urlopen(f"http://{vip}/", timeout=5).read().decode(), "the Service answering")
        assert "nginx" in page
        assert "(nftables mode)" in open(os.path.join(data, "logs", "proxy.log")).read()
        assert set(_leftovers(names, data)) >= {"netns", "links", "nft", "cgroups"}
    finally:
        down = _k8py("down", "--data-dir", data)
    assert down.returncode == 0 and f"removed the host state of {NODE}" in down.stdout, down.stdout + down.stderr
    assert _leftovers(names, data) == {}
