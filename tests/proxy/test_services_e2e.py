"""Services end to end, as processes: an API server, ``k8py
controller-manager``, ``k8py scheduler``, a ``k8py kubelet`` running real pod
processes, ``k8py proxy`` and ``k8py dns``; the real kubectl creates
everything. The pods are a small Python HTTP server that answers with its
pod name, with a readiness probe the test can make fail.

DNS is queried both from the test process (dnspython: A, SRV, headless,
StatefulSet pod names) and from inside a pod (``kubectl exec`` running
Python's resolver, which reads the resolv.conf the kubelet writes for
``--cluster-dns``: short names through the search path)."""

from __future__ import annotations

import ipaddress
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Iterator

import dns.message
import dns.query
import dns.rdatatype
import pytest
import yaml

from tests.support.kube import Kubectl
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

SERVER = r"""
import http.server, os, signal, threading, time
name, ip = os.environ["POD_NAME"], os.environ["POD_IP"]
ready = [True]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/unready":
            ready[0] = False
        if self.path == "/healthz" and not ready[0]:
            self.send_response(503); self.send_header("Content-Length", "0"); self.end_headers(); return
        body = name.encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer((ip, 8080), H)
# as a preStop sleep would: keep serving while the proxies hear of the deletion
signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=lambda: (time.sleep(2), srv.shutdown())).start())
srv.serve_forever()
"""


def _container(name: str = "web") -> dict[str, Any]:
    return {
        "name": name, "image": "python:3", "command": ["python3", "-c", SERVER],
        "ports": [{"name": "http", "containerPort": 8080}],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1, "failureThreshold": 1},
    }


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 5, "containers": [_container()]}}}}


def _service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}], **spec}}


def wait_for(check, what: str, timeout: float = 120):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except (OSError, subprocess.SubprocessError, KeyError, ValueError):
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def get(ip: str, port: int, path: str = "/", timeout: float = 5) -> str:
    with urllib.request.urlopen(f"http://{ip}:{port}{path}", timeout=timeout) as r:
        return r.read().decode()


class Stack:
    def __init__(self, kubectl: Kubectl, node_address: str, dns_address: str) -> None:
        self.kubectl = kubectl
        self.node_address = node_address
        self.dns_address = dns_address

    def apply(self, *objs: dict[str, Any]) -> None:
        # documents, not a v1 List: kubectl validates a List through OpenAPI v2, which k8py does not serve
        self.kubectl.run("apply", "-f", "-", input=yaml.safe_dump_all(objs))

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl.run("get", *args, "-o", "json").stdout)

    def cluster_ip(self, name: str) -> str:
        return self.json("service", name)["spec"]["clusterIP"]

    def ready_pods(self, app: str) -> list[dict[str, Any]]:
        items = self.json("pods", "-l", f"app={app}")["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp") and any(
            c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])]

    def dns(self, name: str, rdtype: str = "A") -> dns.message.Message:
        return dns.query.udp(dns.message.make_query(name, rdtype), self.dns_address, timeout=3)


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("services")
    cidr = f"127.{random.randint(193, 207)}.{random.randint(0, 255)}.0/24"
    dns_address = str(ipaddress.ip_network(cidr)[10])
    node_address = f"127.128.{random.randint(0, 255)}.{random.randint(2, 254)}"
    with ServerThread(sqlite_storage(str(tmp / "data")), bookmark_interval=1.0, service_cidr=cidr) as server:
        kubectl = Kubectl(server.url, str(tmp / "home"))
        kc = kubectl.kubeconfig
        commands = (
            # a cluster CIDR of its own: node IPAM would otherwise give node-1 the same pod range
            # as every other test cluster running on this machine
            ["controller-manager", "--kubeconfig", kc, "--port", "0", "--cluster-cidr", f"127.{random.randint(65, 127)}.0.0/16"],
            ["scheduler", "--kubeconfig", kc, "--port", "0"],
            ["proxy", "--kubeconfig", kc, "--node-name", "node-1", "--port", "0"],
            ["dns", "--kubeconfig", kc, "--bind", dns_address, "--dns-port", "53", "--port", "0", "--upstream", "127.0.0.1"],
        )
        procs = [subprocess.Popen([sys.executable, "-m", "k8py", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env={**os.environ}) for cmd in commands]
        kubelet = KubeletProcess(kc, str(tmp / "kubelet"), node_name="node-1",
                                 extra=("--address", node_address, "--cluster-dns", dns_address))
        try:
            for proc in procs:
                line = proc.stdout.readline()
                assert "/healthz" in line, line + (proc.stderr.read() if proc.poll() is not None else "")
            kubelet.start()
            yield Stack(kubectl, node_address, dns_address)
        finally:
            kubectl.run("delete", "deployments,statefulsets,services", "--all", "--wait=false", check=False)
            kubelet.stop()  # first: a running kubelet would restart what is killed
            kubelet.kill_containers()
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    assert proc.wait(20) == 0, proc.args
                finally:
                    if proc.poll() is None:
                        proc.kill()


def test_a_deployment_behind_a_service_answers_from_every_pod_and_drops_an_unready_one(stack):
    stack.apply(_deployment("web", 3), _service("web"))
    pods = wait_for(lambda: len(stack.ready_pods("web")) == 3 and stack.ready_pods("web"), "3 ready pods")
    vip = stack.cluster_ip("web")
    assert ipaddress.ip_address(vip) not in ipaddress.ip_network("127.64.0.0/10")
    names = {p["metadata"]["name"] for p in pods}
    wait_for(lambda: {get(vip, 80) for _ in range(9)} == names, "all three pods answering through the cluster IP")

    victim = pods[0]
    get(victim["status"]["podIP"], 8080, "/unready")
    flipped = time.monotonic()
    wait_for(lambda: victim["metadata"]["name"] not in {get(vip, 80) for _ in range(9)}, "the unready pod to leave")
    took = time.monotonic() - flipped
    # probe period 1 s; the slack is for a loaded machine
    assert took < 10, f"the unready pod still got traffic {took:.1f}s after its probe started failing"
    assert victim["metadata"]["name"] not in {get(vip, 80) for _ in range(20)}
    print(f"unready pod out of rotation {took:.2f}s after its probe started failing")


def test_no_connection_is_refused_while_a_deleted_pod_is_replaced(stack):
    stack.apply(_deployment("loop", 3), _service("loop"))
    pods = wait_for(lambda: len(stack.ready_pods("loop")) == 3 and stack.ready_pods("loop"), "3 ready pods")
    vip = stack.cluster_ip("loop")
    wait_for(lambda: len({get(vip, 80) for _ in range(9)}) == 3, "all pods answering")
    errors: list[str] = []
    answers: list[str] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            try:
                answers.append(get(vip, 80))
            except (OSError, urllib.error.URLError) as err:
                errors.append(repr(err))

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    try:
        victim = pods[0]["metadata"]["name"]
        stack.kubectl.run("delete", "pod", victim, "--wait=false")
        wait_for(lambda: len(stack.ready_pods("loop")) == 3 and victim not in {p["metadata"]["name"] for p in stack.ready_pods("loop")},
                 "a replacement to be ready")
        new = {p["metadata"]["name"] for p in stack.ready_pods("loop")} - {p["metadata"]["name"] for p in pods}
        wait_for(lambda: new & set(answers[-30:]), "the replacement to get traffic")
    finally:
        stop.set()
        thread.join(10)
    assert not errors, errors[:5]
    assert len(answers) > 20


def test_node_port_session_affinity_port_forward_and_kubectl_proxy(stack):
    stack.apply(_deployment("np", 2), _service("np", type="NodePort", sessionAffinity="ClientIP"))
    wait_for(lambda: len(stack.ready_pods("np")) == 2, "2 ready pods")
    svc = stack.json("service", "np")
    node_port, vip = svc["spec"]["ports"][0]["nodePort"], svc["spec"]["clusterIP"]
    first = wait_for(lambda: get(stack.node_address, node_port), "the node port to answer")
    assert {get(stack.node_address, node_port) for _ in range(10)} == {first}
    assert len({get(vip, 80) for _ in range(10)}) == 1

    names = {p["metadata"]["name"] for p in stack.ready_pods("np")}
    forward = stack.kubectl.popen("port-forward", "svc/np", ":80")
    try:
        line = forward.stdout.readline()
        port = int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1))
        assert get("127.0.0.1", port) in names
    finally:
        forward.terminate()
        forward.wait(10)

    proxy = stack.kubectl.popen("proxy", "--port=0")
    try:
        line = proxy.stdout.readline()
        port = int(re.search(r":(\d+)", line).group(1))
        assert get("127.0.0.1", port, "/api/v1/namespaces/default/services/np:http/proxy/") in names
        pod = sorted(names)[0]
        assert get("127.0.0.1", port, f"/api/v1/namespaces/default/pods/{pod}:8080/proxy/") == pod
    finally:
        proxy.terminate()
        proxy.wait(10)


def test_dns_answers_services_srv_headless_and_statefulset_pods(stack):
    headless = _service("db", clusterIP="None")
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
           "spec": {"serviceName": "db", "replicas": 2, "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [_container("db")]}}}}
    stack.apply(_deployment("named", 1), _service("named"), headless, sts)
    try:
        wait_for(lambda: len(stack.ready_pods("db")) == 2 and len(stack.ready_pods("named")) == 1, "pods ready", timeout=60)
    except AssertionError:
        print(stack.kubectl.run("get", "pods", "-o", "wide").stdout)
        pod = stack.json("pods", "-l", "app=named")["items"][0]["metadata"]["name"]
        print(stack.kubectl.run("logs", pod, "--previous", check=False).stdout[-3000:])
        raise
    vip = stack.cluster_ip("named")

    def a(name: str) -> list[str]:
        return sorted(r.to_text() for rrset in stack.dns(name).answer for r in rrset if rrset.rdtype == dns.rdatatype.A)

    wait_for(lambda: a("named.default.svc.cluster.local") == [vip], "the Service's A record")
    srv = stack.dns("_http._tcp.named.default.svc.cluster.local", "SRV")
    assert [r.port for rrset in srv.answer for r in rrset] == [80]
    ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in stack.ready_pods("db")}
    wait_for(lambda: a("db.default.svc.cluster.local") == sorted(ips.values()), "one A per ready pod of the headless Service")
    assert a("db-0.db.default.svc.cluster.local") == [ips["db-0"]]
    assert a("db-1.db.default.svc.cluster.local") == [ips["db-1"]]
    kube_dns = stack.json("service", "kube-dns", "-n", "kube-system")
    assert kube_dns["spec"]["clusterIP"] == stack.dns_address

    # from inside a pod: its resolv.conf names the cluster DNS, with the search path
    pod = stack.ready_pods("named")[0]["metadata"]["name"]
    script = ("import socket; print(open('/etc/resolv.conf').read()); "
              "print(socket.gethostbyname('named')); print(socket.gethostbyname('db-1.db')); "
              "print(socket.gethostbyname('named.default.svc.cluster.local'))")
    out = stack.kubectl.run("exec", pod, "--", "python3", "-c", script).stdout
    assert f"nameserver {stack.dns_address}" in out and "search default.svc.cluster.local svc.cluster.local cluster.local" in out
    assert "options ndots:5" in out
    assert out.strip().splitlines()[-3:] == [vip, ips["db-1"], vip]


def test_a_service_without_selector_reaches_manual_endpoints(stack):
    stack.apply(_deployment("backend", 1))
    pod = wait_for(lambda: stack.ready_pods("backend") and stack.ready_pods("backend")[0], "the backend pod")
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "manual"},
           "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}
    endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "manual"},
                 "subsets": [{"addresses": [{"ip": pod["status"]["podIP"]}], "ports": [{"name": "http", "port": 8080}]}]}
    stack.apply(svc, endpoints)
    vip = stack.cluster_ip("manual")
    assert wait_for(lambda: get(vip, 80), "the manual endpoint to answer") == pod["metadata"]["name"]
    slices = stack.json("endpointslices", "-l", "kubernetes.io/service-name=manual")["items"]
    assert slices and slices[0]["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == "endpointslicemirroring-controller.k8s.io"
