"""e2e: hostPort in the default loopback pod network — the real kubelet relays
the node's address:hostPort to podIP:containerPort, refuses a port already
held and a UDP hostPort with a clear FailedCreatePodSandBox event, and frees
the port when the pod goes."""

from __future__ import annotations

import socket
import time
import urllib.request

from tests.kubelet.conftest import Node, pod_manifest, ready


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nginx(name: str, host_port: int, protocol: str = "TCP") -> dict:
    # Ready means serving only with a readiness probe: without one the built-in nginx may still be
    # binding its port when the pod turns Ready, and the relay then closes the connection
    probe = {"tcpSocket": {"port": 80}, "periodSeconds": 1} if protocol == "TCP" else None
    container = {"name": "nginx", "image": "nginx", "ports": [
        {"containerPort": 80, "hostPort": host_port, "protocol": protocol}], **({"readinessProbe": probe} if probe else {})}
    return pod_manifest(name, [container], terminationGracePeriodSeconds=1)


def _sandbox_failure(node: Node, ns: str, name: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in node.events(ns, name):
            if e["reason"] == "FailedCreatePodSandBox":
                return e["message"]
        time.sleep(0.2)
    raise AssertionError(f"no FailedCreatePodSandBox event for {name}: {node.events(ns, name)}")


def test_a_host_port_reaches_the_pod_and_is_freed_when_it_goes(node: Node, ns: str) -> None:
    port = _free_port()
    node.core.create_namespaced_pod(ns, _nginx("hp", port))
    node.wait_pod(ns, "hp", ready, what="Ready")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
        assert b"Welcome to nginx!" in r.read()

    # a second pod asking for the same hostPort is refused clearly and never runs
    node.core.create_namespaced_pod(ns, _nginx("clash", port))
    message = _sandbox_failure(node, ns, "clash")
    assert f"hostPort 127.0.0.1:{port}" in message and "pick another hostPort" in message
    assert not node.pod(ns, "clash")["status"].get("podIP")

    node.kubectl.run("delete", "pod", "hp", "-n", ns, "--wait=false")
    node.wait_gone(ns, "hp")
    # the port is free again: the waiting pod gets it on its next try
    node.wait_pod(ns, "clash", ready, timeout=90, what="Ready once the port was freed")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
        assert b"Welcome to nginx!" in r.read()


def test_a_udp_host_port_is_refused_with_what_to_do(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, _nginx("udp", _free_port(), "UDP"))
    message = _sandbox_failure(node, ns, "udp")
    assert "not supported by the loopback pod network (TCP only)" in message and "--pod-network=cni" in message


def _get(port: int, timeout: float = 30) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
                return r.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_restarted_kubelet_reopens_the_host_ports_of_the_pods_it_adopts(tmp_path) -> None:
    from tests.kubelet.conftest import start_node
    from tests.support.kube import official_client
    from tests.support.kubelet import KubeletProcess

    server, kubelet, kubectl = start_node(str(tmp_path))
    api = official_client(server.url)
    node = Node(server, kubelet, kubectl, api)
    second = None
    try:
        port = _free_port()
        node.core.create_namespaced_pod("default", _nginx("kept", port))
        node.wait_pod("default", "kept", ready, what="Ready")
        assert b"Welcome to nginx!" in _get(port)
        kubelet.stop()  # the relay lived in the kubelet: the port closes, the container stays
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
        second = KubeletProcess(kubelet.kubeconfig, kubelet.root_dir, node_name="node-1").start()
        node.kubelet = second
        assert b"Welcome to nginx!" in _get(port)
    finally:
        for k in (second, kubelet):
            if k is not None:
                k.stop()
                k.kill_containers()
        api.close()
        server.stop()
