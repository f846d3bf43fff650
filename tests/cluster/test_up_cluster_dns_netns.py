"""Cluster DNS from inside a pod's own network namespace with ``k8py up --pod-network cni`` (root).

Pods in their own namespaces cannot reach the host's loopback, where k8py
dns answers with the loopback pod network; with cni the server answers on
the kube-dns Service's cluster IP, made local to the host on the cluster's
own link (k8py.cluster.dns_address). A pod resolves a Service by name
through its resolv.conf and reaches it; ``k8py down`` removes the link.
(The containerd runtime's e2e, test_up_containerd.py, checks the same from a
containerd pod.)
"""

from __future__ import annotations

import os
import subprocess

import pytest

from k8py.cluster import dns_address
from k8py.cluster.spec import proxy_nftables_table
from tests.cluster.up_helpers import k8py, log_tails, wait_for
from tests.support.tools import POD_NETWORK_MISSING, pod_network_missing

pytestmark = pytest.mark.timeout(600)


def test_pods_in_their_own_namespaces_resolve_services_through_cluster_dns(tmp_path) -> None:
    why = pod_network_missing()
    if why:
        pytest.skip(f"{POD_NETWORK_MISSING}: {why}")
    data = str(tmp_path / "cluster")
    logs = tuple(os.path.join(data, "logs", f) for f in ("kubelet-k8py-node-0.log", "dns.log", "proxy.log"))
    config = tmp_path / "cluster.yaml"
    config.write_text("components:\n  proxy: [--log-level, INFO]\n")  # its syncs in proxy.log, for the diagnosis below
    up = k8py("up", "--pod-network", "cni", "--detach", "--port", "0", "--data-dir", data, "--config", str(config), timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    link = dns_address.link_name(data)
    try:
        env = dict(os.environ, KUBECONFIG=os.path.join(data, "kubeconfig"))

        def kc(*args: str) -> str:
            return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60, check=True).stdout

        # the cluster's DNS link holds the DNS address: the Service range's 10th, in 10.x (not loopback)
        held = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", link], capture_output=True, text=True).stdout.split()
        dns_ip = held[held.index("inet") + 1].split("/")[0]
        assert dns_ip.startswith("10.") and dns_ip.endswith(".10"), held
        kc("create", "deployment", "web", "--image=nginx")
        kc("expose", "deployment", "web", "--port", "80")
        kc("rollout", "status", "deployment/web", "--timeout=50s")
        wait_for(lambda: "true" in kc("get", "endpointslices", "-l", "kubernetes.io/service-name=web",
                                      "-o", "jsonpath={.items[*].endpoints[*].conditions.ready}"),
                 "web's endpoint to be ready", timeout=60, logs=logs)
        # the proxy programs the Service a moment after its slice says ready, as kube-proxy does:
        # the client tries a few times, as any client of a just-created Service has to
        kc("run", "client", "--image=busybox", "--restart=Never", "--",
           "sh", "-c", "cat /etc/resolv.conf; ip -o -4 addr show eth0; busybox nslookup web.default.svc.cluster.local "
                       "&& for i in 1 2 3 4 5 6 7 8 9 10; do page=$(busybox wget -qO- http://web.default.svc.cluster.local/) "
                       "&& break; sleep 0.5; done; echo \"$page\" | head -c 200")
        wait_for(lambda: kc("get", "pod", "client", "-o", "jsonpath={.status.phase}") in ("Succeeded", "Failed"),
                 "the client pod to finish", timeout=180, logs=logs)
        out = kc("logs", "client")
        vip = kc("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")
        assert f"nameserver {dns_ip}" in out and "eth0" in out, out  # its own namespace, cluster DNS in resolv.conf
        assert kc("get", "pod", "client", "-o", "jsonpath={.status.phase}") == "Succeeded", out
        assert vip in out and "nginx" in out.lower(), out + _host_view(data, logs)
    finally:
        down = k8py("down", "--data-dir", data, timeout=180)
    assert down.returncode == 0, down.stdout + down.stderr
    assert subprocess.run(["ip", "link", "show", "dev", link], capture_output=True).returncode != 0, f"{link} left behind"


def _host_view(data: str, logs: tuple[str, ...]) -> str:
    """What the host forwards with: the proxy's table, routes, addresses, and the components' logs."""
    table = proxy_nftables_table(data, "k8py-node-0")
    views = [["nft", "list", "table", "ip", table], ["ip", "-4", "route", "show", "table", "all"], ["ip", "-4", "-o", "addr"]]
    out = "".join(f"\n--- {' '.join(v)}:\n" + subprocess.run(v, capture_output=True, text=True).stdout for v in views)
    return out + log_tails(logs, 60)
