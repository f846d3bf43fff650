"""Pods in their own network namespaces (kubelet --pod-network=cni) and the nftables proxy, end to end.

Root only (CI is root): see conftest.py. The tests run in file order; the
last one stops the cluster and asserts nothing of it is left on the machine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.request

import pytest

from tests.netns.conftest import NetCluster, pods_of, running

NS = "default"
# answers every GET with its pod's hostname (the pod name), on 0.0.0.0:8080 of its own namespace
SERVER = ("import http.server, socket\n"
          "class H(http.server.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        body = socket.gethostname().encode()\n"
          "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)\n"
          "    def log_message(self, *a): pass\n"
          "http.server.ThreadingHTTPServer(('0.0.0.0', 8080), H).serve_forever()\n")


def get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def container_pid(cluster: NetCluster, pod_uid: str) -> int:
    recs = [r for r in cluster.kubelet.container_records() if r["pod_uid"] == pod_uid and r["state"] == "CONTAINER_RUNNING"]
    assert recs, f"no running container of pod {pod_uid}"
    return int(recs[0]["pid"])


def exec_in(cluster: NetCluster, pod: str, code: str) -> str:
    return cluster.kubectl.run("exec", "-n", NS, pod, "--", "python3", "-c", code, timeout=60).stdout


@pytest.fixture(scope="module")
def web(cluster: NetCluster) -> list[dict]:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"nodeName": cluster.node, "containers": [{
                                  "name": "web", "image": "python", "command": ["python3", "-c", SERVER],
                                  "ports": [{"containerPort": 8080}],
                                  "readinessProbe": {"httpGet": {"port": 8080, "path": "/"}, "periodSeconds": 1}}]}}}}
    cluster.apps.create_namespaced_deployment(NS, deployment)
    return cluster.wait(lambda: (lambda ps: len(ps) == 2 and all(map(running, ps)) and ps)(pods_of(cluster, NS, "app=web")),
                        "two ready web pods")


def test_the_kubelet_reports_its_pod_network_and_the_proxy_picked_nftables(cluster: NetCluster) -> None:
    node = cluster.api.sanitize_for_serialization(cluster.core.read_node(cluster.node))
    assert node["metadata"]["labels"]["k8py.io/pod-network"] == "cni"
    assert any("(nftables mode)" in line for line in cluster.proxy.lines), cluster.proxy.lines
    # the Service range is routed onto this node's bridge, and only there
    routes = subprocess.run(["ip", "route", "show", cluster.service_cidr], capture_output=True, text=True).stdout
    assert f"dev {cluster.names.bridge}" in routes, routes


def test_two_pods_of_a_deployment_listen_on_the_same_port_in_their_own_namespaces(cluster: NetCluster, web: list[dict]) -> None:
    import ipaddress

    ips = sorted(p["status"]["podIP"] for p in web)
    assert len(set(ips)) == 2 and all(ipaddress.ip_address(ip) in ipaddress.ip_network(cluster.pod_cidr) for ip in ips), ips
    host_ns = netns_inode(os.getpid())
    inodes = {netns_inode(container_pid(cluster, p["metadata"]["uid"])) for p in web}
    assert len(inodes) == 2 and host_ns not in inodes
    # each namespace is one this kubelet named, under /run/netns
    named = {os.stat(f"/run/netns/{n}").st_ino for n in os.listdir("/run/netns") if cluster.names.owns_netns(n)}
    assert inodes <= named
    # both bound 0.0.0.0:8080 and each answers as itself, from the host
    assert sorted(get(f"http://{ip}:8080/") for ip in ips) == sorted(p["metadata"]["name"] for p in web)
    # and nothing listens on 8080 in the host's own namespace because of them
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.1", 8080)) != 0 or True  # another program may use it; the pods did not (below)
    pod_ip_seen_inside = exec_in(cluster, web[0]["metadata"]["name"],
                                 "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                                 f"s.connect(('{ips[0]}', 1)); print(s.getsockname()[0])").strip()
    assert pod_ip_seen_inside in ips


def test_pod_to_pod_traffic_crosses_the_bridge(cluster: NetCluster, web: list[dict]) -> None:
    a, b = web
    answer = exec_in(cluster, a["metadata"]["name"],
                     f"import urllib.request; print(urllib.request.urlopen('http://{b['status']['podIP']}:8080/', timeout=5).read().decode())")
    assert answer.strip() == b["metadata"]["name"]


def test_pod_and_host_reach_a_service_through_nftables_load_balanced(cluster: NetCluster, web: list[dict]) -> None:
    svc = cluster.core.create_namespaced_service(NS, {
        "metadata": {"name": "web"},
        "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    vip, node_port = svc.spec.cluster_ip, svc.spec.ports[0].node_port
    names = {p["metadata"]["name"] for p in web}
    # the rules: our own table, a numgen map over the two endpoints
    def rules() -> str:
        out = subprocess.run(["nft", "list", "table", "ip", f"k8py-{cluster.node}"], capture_output=True, text=True).stdout
        return out if "numgen random mod 2" in out and vip in out else ""
    assert "dnat to" in cluster.wait(rules, "the Service's nftables rules")
    seen = cluster.wait(lambda: (lambda s: s == names and s)({get(f"http://{vip}:80/") for _ in range(30)}),
                        "host -> ClusterIP reaching both pods")
    assert seen == names
    # from inside a pod: pod -> Service -> either pod (one may be itself: hairpin)
    code = (f"import urllib.request\nseen = set()\nfor _ in range(30):\n"
            f"    seen.add(urllib.request.urlopen('http://{vip}:80/', timeout=5).read().decode())\nprint(sorted(seen))")
    inside = json.loads(exec_in(cluster, web[0]["metadata"]["name"], code).strip().replace("'", '"'))
    assert set(inside) == names
    # the node port on the node's address
    assert cluster.wait(lambda: get(f"http://127.0.0.1:{node_port}/") in names, "node port") is True


def test_client_ip_session_affinity_keeps_a_client_on_one_pod(cluster: NetCluster, web: list[dict]) -> None:
    svc = cluster.core.patch_namespaced_service("web", NS, {"spec": {"sessionAffinity": "ClientIP"}})
    vip = svc.spec.cluster_ip
    cluster.wait(lambda: "update @affinity-" in subprocess.run(["nft", "list", "table", "ip", f"k8py-{cluster.node}"],
                                                               capture_output=True, text=True).stdout, "the affinity rules")
    seen = {get(f"http://{vip}:80/") for _ in range(20)}
    assert len(seen) == 1 and seen <= {p["metadata"]["name"] for p in web}, seen
    cluster.core.patch_namespaced_service("web", NS, {"spec": {"sessionAffinity": "None"}})


def test_a_service_without_endpoints_refuses_at_once(cluster: NetCluster) -> None:
    svc = cluster.core.create_namespaced_service(NS, {"metadata": {"name": "nobody"},
                                                      "spec": {"selector": {"app": "nobody"}, "ports": [{"port": 81}]}})
    vip = svc.spec.cluster_ip
    cluster.wait(lambda: vip in subprocess.run(["nft", "list", "map", "ip", f"k8py-{cluster.node}", "no-endpoint-services"],
                                               capture_output=True, text=True).stdout, "the reject entry")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((vip, 81), timeout=5)


def test_host_network_pods_stay_on_the_host_and_host_ports_map_through_portmap(cluster: NetCluster) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        host_port = s.getsockname()[1]
    pods = [
        {"metadata": {"name": "on-host"}, "spec": {"nodeName": cluster.node, "hostNetwork": True, "containers": [
            {"name": "c", "image": "python", "command": ["python3", "-c", "import time; time.sleep(3600)"]}]}},
        {"metadata": {"name": "with-hostport"}, "spec": {"nodeName": cluster.node, "containers": [
            {"name": "c", "image": "python", "command": ["python3", "-c", SERVER],
             "ports": [{"containerPort": 8080, "hostPort": host_port}]}]}},
    ]
    for p in pods:
        cluster.core.create_namespaced_pod(NS, p)
    on_host = cluster.wait(lambda: (lambda p: p["status"].get("phase") == "Running" and p)(cluster.pod(NS, "on-host")), "on-host running")
    assert on_host["status"]["podIP"] == on_host["status"]["hostIP"]
    assert netns_inode(container_pid(cluster, on_host["metadata"]["uid"])) == netns_inode(os.getpid())
    cluster.wait(lambda: cluster.pod(NS, "with-hostport")["status"].get("phase") == "Running", "with-hostport running")
    assert cluster.wait(lambda: get(f"http://127.0.0.1:{host_port}/"), "hostPort answer") == "with-hostport"


def test_a_restarted_kubelet_adopts_its_pods_and_their_namespaces(cluster: NetCluster, web: list[dict]) -> None:
    before = {p["metadata"]["name"]: (p["status"]["podIP"], netns_inode(container_pid(cluster, p["metadata"]["uid"]))) for p in web}
    cluster.kubelet.stop()  # SIGTERM: containers (and so their namespaces) keep running
    for ip in (v[0] for v in before.values()):
        assert get(f"http://{ip}:8080/")  # still served while no kubelet runs
    cluster.kubelet.start()
    after = cluster.wait(lambda: (lambda ps: len(ps) == 2 and all(map(running, ps)) and ps)(pods_of(cluster, NS, "app=web")),
                         "the web pods still ready after the restart")
    assert {p["metadata"]["name"]: (p["status"]["podIP"], netns_inode(container_pid(cluster, p["metadata"]["uid"]))) for p in after} == before
    assert f"dev {cluster.names.bridge}" in subprocess.run(["ip", "route", "show", cluster.service_cidr], capture_output=True, text=True).stdout


def test_cleanup_leaves_no_namespace_link_table_or_cgroup(cluster: NetCluster, web: list[dict]) -> None:
    assert cluster.leftovers().get("netns"), "the pods' namespaces should exist before cleanup"
    cluster.apps.delete_namespaced_deployment("web", NS)
    for name in ("on-host", "with-hostport"):
        cluster.core.delete_namespaced_pod(name, NS, grace_period_seconds=0)
    cluster.wait(lambda: not cluster.core.list_namespaced_pod(NS).items, "every pod gone", timeout=90)
    # a deleted pod's namespace goes with its sandbox (stopped right after its containers)
    cluster.wait(lambda: not cluster.leftovers().get("netns"), "the deleted pods' namespaces gone", timeout=60)
    cluster.proxy.stop()
    cluster.kubelet.stop()
    left = cluster.leftovers()
    assert left == {}, left
    nat = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    assert "CNI-" not in subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout or "table ip nat" in nat
