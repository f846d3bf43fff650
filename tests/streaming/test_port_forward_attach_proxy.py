"""``kubectl port-forward`` (SPDY tunnelled in a WebSocket), the official client's
port-forward (WebSocket channels), ``kubectl attach`` and ``nodes/proxy``."""

from __future__ import annotations

import http.server
import json
import os
import socket
import threading
import time
import urllib.request
from typing import Iterator

import pytest
from kubernetes.stream import portforward

from tests.support.kubelet_server import write_log


class _Welcome(http.server.BaseHTTPRequestHandler):
    body = b"<h1>Welcome to nginx!</h1>\n" * 4000  # ~100 KiB: several DATA frames

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pod_port() -> Iterator[int]:
    """A web server on a free port plays the pod's port (the double forwards to 127.0.0.1)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Welcome)
    threading.Thread(target=server.serve_forever, name="pod-port", daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kubectl_port_forward_carries_http(cluster, pod_port):
    cluster.pod("web")
    cluster.runtime.add("default", "web", "main")
    local = _free_port()
    proc = cluster.kubectl.popen("port-forward", "pod/web", f"{local}:{pod_port}")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"Forwarding from 127.0.0.1:{local} -> {pod_port}"), line + (proc.stderr.read() if proc.poll() is not None else "")
        for _ in range(3):  # one SPDY session, a stream pair per connection
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=30) as resp:
                assert resp.read() == _Welcome.body
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_port_forward_to_a_closed_port_reports_the_error(cluster):
    cluster.pod("web")
    cluster.runtime.add("default", "web", "main")
    local, closed = _free_port(), _free_port()
    proc = cluster.kubectl.popen("port-forward", "pod/web", f"{local}:{closed}")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("Forwarding from")
        with socket.create_connection(("127.0.0.1", local), timeout=30) as s:
            s.settimeout(30)
            assert s.recv(1) == b""  # kubectl closes the local connection
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert f"error forwarding port {closed} to pod web" in err


def test_the_official_client_port_forwards_over_websocket_channels(cluster, pod_port):
    cluster.pod("web")
    cluster.runtime.add("default", "web", "main")
    pf = portforward(cluster.core.connect_get_namespaced_pod_portforward, "web", "default", ports=str(pod_port))
    try:
        sock = pf.socket(pod_port)
        sock.settimeout(30)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        received = b""
        while len(received) < len(_Welcome.body) or b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        assert received.startswith(b"HTTP/1.0 200")
        assert received.endswith(_Welcome.body)
        sock.close()
        assert pf.error(pod_port) is None
    finally:
        pf.close()


def test_kubectl_attach_streams_output_from_now_on_and_ends_with_the_container(cluster):
    import subprocess

    from tests.support.kube import KUBECTL

    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    write_log(c.log_path, ("stdout", "old output"))
    env = {**os.environ, "HOME": cluster.kubectl.home, "KUBECONFIG": cluster.kubectl.kubeconfig}
    proc = subprocess.Popen([KUBECTL, "attach", "web"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    stop = threading.Event()

    def keep_writing() -> None:  # attach shows output from the moment it is up
        while not stop.wait(0.1):
            write_log(c.log_path, ("stdout", "live output"))

    writer = threading.Thread(target=keep_writing, name="container-output", daemon=True)
    writer.start()
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "live output\n"
        stop.set()
        writer.join()
        cluster.runtime.exit(c.id)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "old output" not in out
    finally:
        stop.set()
        proc.kill()
        proc.wait()


def test_attach_sends_stdin_to_the_containers_fifo(cluster, tmp_path):
    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    fifo = str(tmp_path / "stdin.fifo")
    os.mkfifo(fifo)
    cluster.runtime.fifos[c.id] = fifo
    reader_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    env = {**os.environ, "HOME": cluster.kubectl.home, "KUBECONFIG": cluster.kubectl.kubeconfig}
    import subprocess

    from tests.support.kube import KUBECTL

    proc = subprocess.Popen([KUBECTL, "attach", "-i", "web"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"typed into attach\n")
        proc.stdin.flush()
        got = b""
        deadline = time.monotonic() + 30
        while b"\n" not in got:
            assert time.monotonic() < deadline, got
            try:
                got += os.read(reader_fd, 4096)
            except BlockingIOError:
                time.sleep(0.05)
        assert got == b"typed into attach\n"
    finally:
        proc.kill()
        proc.wait()
        os.close(reader_fd)


def test_nodes_proxy_reaches_the_kubelet(cluster):
    cluster.pod("web")
    cluster.runtime.add("default", "web", "main", pid=os.getpid())
    assert cluster.kubectl.run("get", "--raw", "/api/v1/nodes/node-1/proxy/healthz").stdout == "ok"
    summary = json.loads(cluster.kubectl.run("get", "--raw", "/api/v1/nodes/node-1/proxy/stats/summary").stdout)
    assert summary["node"]["nodeName"] == "node-1"
    assert summary["node"]["memory"]["workingSetBytes"] > 0
    [pod] = summary["pods"]
    assert pod["podRef"]["name"] == "web"
    assert pod["containers"][0]["memory"]["workingSetBytes"] > 0
    metrics = cluster.kubectl.run("get", "--raw", "/api/v1/nodes/node-1/proxy/metrics/resource").stdout
    assert 'container_memory_working_set_bytes{container="main",namespace="default",pod="web"}' in metrics
    assert "node_cpu_usage_seconds_total " in metrics
    pods = json.loads(cluster.kubectl.run("get", "--raw", "/api/v1/nodes/node-1/proxy/pods").stdout)
    assert pods["kind"] == "PodList" and [p["metadata"]["name"] for p in pods["items"]] == ["web"]
    missing = cluster.kubectl.run("get", "--raw", "/api/v1/nodes/nope/proxy/healthz", check=False)
    assert 'nodes "nope" not found' in missing.stderr


def test_kubectl_forwards_two_ports_at_once_and_parallel_connections(cluster, pod_port):
    import concurrent.futures

    second = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Welcome)
    threading.Thread(target=second.serve_forever, name="pod-port-2", daemon=True).start()
    try:
        cluster.pod("web")
        cluster.runtime.add("default", "web", "main")
        a, b = _free_port(), _free_port()
        proc = cluster.kubectl.popen("port-forward", "pod/web", f"{a}:{pod_port}", f"{b}:{second.server_address[1]}")
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().startswith("Forwarding from")
            deadline = time.monotonic() + 30
            while True:  # kubectl prints one line per port and address family; wait until both listen
                try:
                    for port in (a, b):
                        socket.create_connection(("127.0.0.1", port), timeout=5).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)

            def fetch(port: int) -> bytes:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as resp:
                    return resp.read()

            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                bodies = list(pool.map(fetch, [a, b] * 4))
            assert all(body == _Welcome.body for body in bodies)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        second.shutdown()
        second.server_close()


def test_a_client_offering_no_subprotocol_port_forwards_over_the_unnamed_channel_protocol(cluster, pod_port):
    # kr8s opens the port-forward WebSocket without Sec-WebSocket-Protocol; upstream serves it
    # the unnamed (base binary channel) protocol, with the port prefix on each channel
    import asyncio

    import httpx
    import kr8s.asyncio
    from kr8s.asyncio.objects import Pod

    cluster.pod("web")
    cluster.runtime.add("default", "web", "main")

    # kr8s left to itself picks a random port in 10000-60000 and binds it later; the top of that
    # range is the kernel's ephemeral range, where parallel tests take their source ports (one
    # such bind failed with EADDRINUSE). Give it a free port below that range, as the kr8s suite does.
    import random
    import socket

    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        first_ephemeral = int(f.read().split()[0])
    while True:
        local_port = random.randint(10000, first_ephemeral - 1)
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", local_port)) != 0:
                break

    async def fetch() -> bytes:
        api = await kr8s.asyncio.api(url=cluster.apiserver.url)
        pod = await Pod.get("web", namespace="default", api=api)
        async with pod.portforward(pod_port, local_port=local_port) as port:
            async with httpx.AsyncClient(timeout=30) as session:
                return (await session.get(f"http://127.0.0.1:{port}/")).content

    assert asyncio.run(fetch()) == _Welcome.body
