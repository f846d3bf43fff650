"""A real pod-network cluster for the tests of this directory (root only).

One API server (Service range in 10.x, not loopback: pods in their own
network namespaces cannot reach the host's 127.x), the controller manager
(Deployments, ReplicaSets, EndpointSlices), a kubelet with
``--pod-network=cni`` and ``k8py proxy --proxy-mode=auto`` (which must pick
nftables for that node), each a real process. Ranges and the node name are
drawn at random per run, so the bridge, the namespaces and the nft table
are this run's only; :func:`leftovers` lists whatever of them exists, and
the fixture's finaliser removes anything a failed test left.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import kubernetes
import pytest

from k8py.kubelet.network.names import NetworkNames
from k8py.proxy.nftables.ruleset import table_name
from tests.support.kube import Kubectl, official_client
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerThread, sqlite_storage
from tests.support.tools import POD_NETWORK_MISSING, pod_network_missing


def _used_networks() -> list[ipaddress.IPv4Network]:
    out = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    nets = []
    for line in out.splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("default", "broadcast", "local", "unreachable", "multicast"):
            first = line.split()[1] if len(line.split()) > 1 else ""
        try:
            nets.append(ipaddress.ip_network(first, strict=False))
        except ValueError:
            continue
    return nets


def free_ranges() -> tuple[str, str]:
    """A pod /24 and a Service /24 inside 10.0.0.0/8 that no route on this machine touches."""
    used = _used_networks()
    while True:
        a = random.randint(100, 250)
        pod = ipaddress.ip_network(f"10.{a}.{random.randint(0, 255)}.0/24")
        svc = ipaddress.ip_network(f"10.{a}.{random.randint(0, 255)}.0/24")
        if pod != svc and not any(pod.overlaps(n) or svc.overlaps(n) for n in used if n.prefixlen > 0):
            return str(pod), str(svc)


class Proc:
    """A k8py component as a child process, started once its ready line shows."""

    def __init__(self, args: list[str], ready: str, timeout: float = 60) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "k8py", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if re.search(ready, line):
                import threading

                threading.Thread(target=self._drain, daemon=True).start()
                return
        raise RuntimeError(f"k8py {args[0]} did not start:\n" + "".join(self.lines))

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@dataclass
class NetCluster:
    server: ServerThread
    kubectl: Kubectl
    kubelet: KubeletProcess
    manager: Proc
    proxy: Proc
    api: kubernetes.client.ApiClient
    node: str
    pod_cidr: str
    service_cidr: str
    names: NetworkNames

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def apps(self) -> kubernetes.client.AppsV1Api:
        return kubernetes.client.AppsV1Api(self.api)

    def pod(self, ns: str, name: str) -> dict[str, Any]:
        return self.api.sanitize_for_serialization(self.core.read_namespaced_pod(name, ns))

    def wait(self, check: Callable[[], Any], what: str, timeout: float = 90) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = check()
            except (kubernetes.client.ApiException, OSError, subprocess.SubprocessError, AssertionError) as err:
                last = err
            else:
                if last:
                    return last
            time.sleep(0.2)
        raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})\nkubelet:\n" + "".join(list(self.kubelet.output)[-40:])
                             + "\nproxy:\n" + "".join(self.proxy.lines[-20:]))

    def leftovers(self) -> dict[str, list[str]]:
        """This run's namespaces, bridge, nft table and cgroups that exist now."""
        netns = [n for n in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else []) if self.names.owns_netns(n)]
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        bridge = [self.names.bridge] if f" {self.names.bridge}:" in links else []
        tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout.split("\n")
        table = [t for t in tables if t.strip() == f"table ip {table_name(self.node)}"]
        cgroups = []
        for root, dirs, _ in os.walk("/sys/fs/cgroup"):
            cgroups += [os.path.join(root, d) for d in dirs if self.node in d]
            if root.count("/") > 8:
                dirs[:] = []
        return {k: v for k, v in {"netns": netns, "links": bridge, "nft": table, "cgroups": cgroups}.items() if v}


def pods_of(cluster: NetCluster, ns: str, selector: str) -> list[dict[str, Any]]:
    return [cluster.api.sanitize_for_serialization(p) for p in cluster.core.list_namespaced_pod(ns, label_selector=selector).items]


def running(pod: dict[str, Any]) -> bool:
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or [])


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory) -> Iterator[NetCluster]:
    why = pod_network_missing()
    if why:
        pytest.skip(f"{POD_NETWORK_MISSING}: {why}")
    tmp = str(tmp_path_factory.mktemp("netns"))
    pod_cidr, service_cidr = free_ranges()
    node = f"k8pytest-{random.randint(0, 0xFFFFFF):06x}"
    server = ServerThread(sqlite_storage(f"{tmp}/api"), service_cidr=service_cidr).start()
    kubectl = Kubectl(server.url, f"{tmp}/home")
    procs: list[Any] = []
    kubelet = KubeletProcess(kubectl.kubeconfig, f"{tmp}/kubelet", node_name=node,
                             extra=("--pod-network", "cni", "--pod-cidr", pod_cidr, "--service-cluster-ip-range", service_cidr,
                                    *getattr(request.module, "KUBELET_EXTRA", ())))
    api = official_client(server.url)
    names = NetworkNames(node, os.path.abspath(f"{tmp}/kubelet"))
    try:
        kubelet.start()
        manager = Proc(["controller-manager", "--kubeconfig", kubectl.kubeconfig, "--port", "0",
                        "--controllers", "deployment,replicaset,endpointslice,serviceaccount,garbagecollector"], r"serving /healthz")
        procs.append(manager)
        proxy = Proc(["proxy", "--kubeconfig", kubectl.kubeconfig, "--node-name", node, "--port", "0", "--proxy-mode", "auto",
                      "--log-level", "INFO"], r"serving /healthz")
        procs.append(proxy)
        yield NetCluster(server, kubectl, kubelet, manager, proxy, api, node, pod_cidr, service_cidr, names)
    finally:
        api.close()
        for p in reversed(procs):
            p.stop()
        kubelet.stop()
        kubelet.kill_containers()
        server.stop()
        _force_cleanup(names, node, f"{tmp}/kubelet")
        from k8py.kubelet.cgroups.tree import CgroupTree, node_cgroup_name

        CgroupTree(node_cgroup_name(node, f"{tmp}/kubelet")).cleanup()


def _force_cleanup(names: NetworkNames, node: str, root: str) -> None:
    """Whatever a failed test left: this run's names only."""
    import asyncio

    from k8py.kubelet.network.pod_network import CNIPodNetwork

    asyncio.run(CNIPodNetwork(names, os.path.join(root, "runtime")).cleanup())
    subprocess.run(["nft", "delete", "table", "ip", table_name(node)], capture_output=True)
