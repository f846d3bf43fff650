"""The kubelet's server over HTTPS with a client CA, reached by a secure API server with its
kubelet-client certificate: logs, exec and top through kubectl keep working; nobody else gets in."""

from __future__ import annotations

import http.client
import ssl

import kubernetes
import pytest

from k8py.client import certs
from k8py.cli.kubeconfig import write_kubeconfig
from k8py.kubelet.server_tls import client_certificate_middleware, server_ssl_context
from tests.support.kube import Kubectl
from tests.support.kubelet_server import HostRuntime, KubeletServerThread, register_node, write_log
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.kubectl

NODE = "tls-node"


def _write(path, cert, key) -> tuple[str, str]:
    certs.write_pem(f"{path}.crt", certs.encode_cert_pem(cert))
    certs.write_pem(f"{path}.key", certs.encode_private_key_pem(key), private=True)
    return f"{path}.crt", f"{path}.key"


@pytest.fixture
def secure(tmp_path):
    ca = certs.new_self_signed_ca("k8py-ca")
    ca_file = str(tmp_path / "ca.crt")
    certs.write_pem(ca_file, ca.cert_pem)
    kubelet_cert, kubelet_key = _write(tmp_path / "kubelet", *ca.issue_serving(NODE, dns_names=[NODE], ips=["127.0.0.1"]))
    client_cert, client_key = _write(tmp_path / "apiserver-kubelet-client",
                                     *ca.issue_client("kube-apiserver-kubelet-client", ["system:masters"]))
    admin = ca.issue_client("system:admin", ["system:masters"])
    runtime = HostRuntime(str(tmp_path / "logs"))
    ctx = server_ssl_context(cert_file=kubelet_cert, key_file=kubelet_key, client_ca_file=ca_file,
                             root_dir=str(tmp_path / "root"), address="127.0.0.1", node_name=NODE)
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None, client_ca_file=ca_file,
                      kubelet_client_certificate=client_cert, kubelet_client_key=client_key,
                      kubelet_certificate_authority=ca_file, metrics_window=0.3) as api, \
            KubeletServerThread(runtime, NODE, ssl_context=ctx, middlewares=(client_certificate_middleware,)) as kubelet:
        assert api.server is not None and api.server.serving is not None
        kubeconfig = write_kubeconfig(str(tmp_path / "admin" / "kubeconfig"), api.url, ca_data=api.server.serving.ca_pem,
                                      client_cert_data=certs.encode_cert_pem(admin[0]),
                                      client_key_data=certs.encode_private_key_pem(admin[1]))
        client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        register_node(client, NODE, kubelet.port)
        yield api, kubelet, runtime, client, Kubectl(api.url, str(tmp_path / "home"), kubeconfig), ca_file


def _pod(client, runtime, name: str) -> None:
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox"}]}})
    updated = core.patch_namespaced_pod_status(name, "default", {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    runtime.add_pod(client.sanitize_for_serialization(updated))


def test_logs_and_exec_go_through_the_tls_kubelet(secure):
    api, kubelet, runtime, client, kubectl, _ = secure
    _pod(client, runtime, "web")
    c = runtime.add("default", "web", "main")
    write_log(c.log_path, ("stdout", "over tls"))
    assert kubectl.run("logs", "web").stdout == "over tls\n"
    assert kubectl.run("exec", "web", "--", "sh", "-c", "echo exec over tls").stdout == "exec over tls\n"


def test_the_kubelet_refuses_requests_without_a_client_certificate(secure):
    _, kubelet, _, _, _, ca_file = secure
    ctx = ssl.create_default_context(cafile=ca_file)
    conn = http.client.HTTPSConnection("127.0.0.1", kubelet.port, context=ctx, timeout=30)
    conn.request("GET", "/pods")
    response = conn.getresponse()
    assert response.status == 401 and b'"reason":"Unauthorized"' in response.read()
    conn.request("GET", "/healthz")  # the health check needs no certificate
    assert conn.getresponse().status == 200
    conn.close()


def test_the_kubelet_refuses_a_certificate_from_another_ca(secure, tmp_path):
    _, kubelet, _, _, _, ca_file = secure
    stranger = certs.new_self_signed_ca("stranger")
    cert, key = _write(tmp_path / "mallory", *stranger.issue_client("mallory", ["system:masters"]))
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.load_cert_chain(cert, key)
    conn = http.client.HTTPSConnection("127.0.0.1", kubelet.port, context=ctx, timeout=30)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        conn.request("GET", "/pods")
        conn.getresponse()
    conn.close()


def test_an_api_server_without_the_kubelet_ca_cannot_reach_it(tmp_path, secure):
    """A plain-HTTP-to-kubelet API server gets a clear 503, not a hang."""
    _, kubelet, runtime, _, _, _ = secure
    with ServerThread(sqlite_storage(str(tmp_path / "other"))) as plain:
        other = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=plain.url))
        register_node(other, NODE, kubelet.port)
        core = kubernetes.client.CoreV1Api(other)
        core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox"}]}})
        with pytest.raises(kubernetes.client.ApiException) as err:
            core.read_namespaced_pod_log("p", "default")
        assert err.value.status in (502, 503), err.value.body


def test_kubectl_top_scrapes_the_tls_kubelet(secure):
    _, _, _, _, kubectl, _ = secure
    out = kubectl.run("top", "nodes").stdout.splitlines()
    assert out[1].split()[0] == NODE


def test_port_forward_and_nodes_proxy_go_through_the_tls_kubelet(secure):
    import http.server
    import socket
    import threading
    import urllib.request

    _, _, runtime, client, kubectl, _ = secure
    _pod(client, runtime, "web")
    runtime.add("default", "web", "main")

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args: object) -> None:
            pass

    pod_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=pod_server.serve_forever, name="pod-port", daemon=True).start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    proc = kubectl.popen("port-forward", "pod/web", f"{local}:{pod_server.server_address[1]}")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"Forwarding from 127.0.0.1:{local}"), line + (proc.stderr.read() if proc.poll() is not None else "")
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=30) as resp:
            assert resp.read() == b"hello"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        pod_server.shutdown()
        pod_server.server_close()
    assert kubectl.run("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/healthz").stdout == "ok"
    assert '"PodList"' in kubectl.run("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/pods").stdout
