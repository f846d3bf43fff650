"""The kubelet's server over HTTPS with a client CA, reached by a secure API server with its
kubelet-client certificate: logs, exec and top through kubectl keep working; nobody else gets in.

The kubelet authorizes as upstream's (Webhook): the API server's identity
(``kube-apiserver-kubelet-client``, no groups) is allowed by a SubjectAccessReview through
the bootstrap binding to ``system:kubelet-api-admin``; others need ``nodes/<subresource>``.
"""

from __future__ import annotations

import http.client
import ssl

import kubernetes
import pytest

from k8py.client import certs
from k8py.cli.kubeconfig import write_kubeconfig
from k8py.client.kubeconfig import load_kubeconfig
from k8py.client.rest import RestClient
from k8py.kubelet.server_auth import KubeletAuth
from k8py.kubelet.server_tls import server_ssl_context
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
    client_cert, client_key = _write(tmp_path / "apiserver-kubelet-client", *ca.issue_client("kube-apiserver-kubelet-client"))
    admin = ca.issue_client("system:admin", ["system:masters"])
    node = ca.issue_client(f"system:node:{NODE}", ["system:nodes"])
    _write(tmp_path / "alice", *ca.issue_client("alice", ["developers"]))  # a user with no rights on nodes
    runtime = HostRuntime(str(tmp_path / "logs"))
    ctx = server_ssl_context(cert_file=kubelet_cert, key_file=kubelet_key, client_ca_file=ca_file,
                             root_dir=str(tmp_path / "root"), address="127.0.0.1", node_name=NODE)
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None, client_ca_file=ca_file,
                      kubelet_client_certificate=client_cert, kubelet_client_key=client_key,
                      kubelet_certificate_authority=ca_file, metrics_window=0.3, authorization_modes=("Node", "RBAC")) as api:
        assert api.server is not None and api.server.serving is not None
        kubeconfig = write_kubeconfig(str(tmp_path / "admin" / "kubeconfig"), api.url, ca_data=api.server.serving.ca_pem,
                                      client_cert_data=certs.encode_cert_pem(admin[0]),
                                      client_key_data=certs.encode_private_key_pem(admin[1]))
        node_kubeconfig = write_kubeconfig(str(tmp_path / "node" / "kubeconfig"), api.url, ca_data=api.server.serving.ca_pem,
                                           client_cert_data=certs.encode_cert_pem(node[0]),
                                           client_key_data=certs.encode_private_key_pem(node[1]))

        def make_auth():
            rest = RestClient(load_kubeconfig(node_kubeconfig))  # the kubelet's own client, system:node:NODE
            # denials are not cached here: tests grant a right after a refusal
            auth = KubeletAuth(node_name=NODE, client=rest, token_webhook=True, authorization_mode="Webhook",
                               unauthorized_ttl=0)
            return (auth.middleware,), rest.close

        kubelet_thread = KubeletServerThread(runtime, NODE, ssl_context=ctx, make_auth=make_auth)
        kubelet = kubelet_thread.start()
        client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        try:
            register_node(client, NODE, kubelet.port)
            yield api, kubelet, runtime, client, Kubectl(api.url, str(tmp_path / "home"), kubeconfig), ca_file
        finally:
            kubelet_thread.stop()


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
    assert response.status == 401 and response.read() == b"Unauthorized"  # upstream's plain-text body
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


# -- who may call the kubelet: upstream's webhook authentication and authorization ------------

def _kubelet_get(port: int, ca_file: str, path: str, *, cert: tuple[str, str] | None = None, token: str = "",
                 method: str = "GET") -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cafile=ca_file)
    if cert is not None:
        ctx.load_cert_chain(*cert)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    try:
        conn.request(method, path, headers={"Authorization": f"Bearer {token}"} if token else {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _eventually(check, timeout: float = 30.0):
    """Poll ``check`` until it returns a true value (RBAC's policy cache follows a watch)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def _cert(tmp_path, name: str) -> tuple[str, str]:
    return str(tmp_path / f"{name}.crt"), str(tmp_path / f"{name}.key")


@pytest.mark.parametrize("method, path, verb, subresource", [
    ("GET", "/pods", "get", "proxy"),
    ("GET", "/stats/summary", "get", "stats"),
    ("GET", "/metrics/resource", "get", "metrics"),
    ("GET", "/metrics", "get", "metrics"),
    ("GET", "/containerLogs/default/web/main", "get", "proxy"),
    ("POST", "/exec/default/web/main?command=ls", "create", "proxy"),
])
def test_a_user_without_rights_on_the_node_gets_upstreams_403_from_the_kubelet(secure, tmp_path, method, path, verb, subresource):
    _, kubelet, _, _, _, ca_file = secure
    status, body = _kubelet_get(kubelet.port, ca_file, path, cert=_cert(tmp_path, "alice"), method=method)
    assert status == 403
    assert body == f"Forbidden (user=alice, verb={verb}, resource=nodes, subresource={subresource})".encode()


def test_a_grant_of_nodes_stats_opens_stats_and_nothing_else(secure, tmp_path):
    _, kubelet, _, client, _, ca_file = secure
    rbac = kubernetes.client.RbacAuthorizationV1Api(client)
    rbac.create_cluster_role({"metadata": {"name": "node-stats"}, "rules": [
        {"apiGroups": [""], "resources": ["nodes/stats"], "resourceNames": [NODE], "verbs": ["get"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": "alice-node-stats"},
                                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-stats"},
                                      "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    alice = _cert(tmp_path, "alice")
    got = _eventually(lambda: _kubelet_get(kubelet.port, ca_file, "/stats/summary", cert=alice)[0] == 200)
    assert got, _kubelet_get(kubelet.port, ca_file, "/stats/summary", cert=alice)
    assert _kubelet_get(kubelet.port, ca_file, "/pods", cert=alice)[0] == 403
    assert _kubelet_get(kubelet.port, ca_file, "/metrics/resource", cert=alice)[0] == 403


def test_a_bearer_token_is_reviewed_by_the_api_server_and_authorized_as_its_service_account(secure):
    _, kubelet, _, client, _, ca_file = secure
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_service_account("default", {"metadata": {"name": "scraper"}})
    token = core.create_namespaced_service_account_token("scraper", "default", {"spec": {}}).status.token
    status, body = _kubelet_get(kubelet.port, ca_file, "/pods", token=token)
    assert (status, body) == (403, b"Forbidden (user=system:serviceaccount:default:scraper, verb=get, resource=nodes, subresource=proxy)")
    kubernetes.client.RbacAuthorizationV1Api(client).create_cluster_role_binding({
        "metadata": {"name": "scraper-kubelet-api"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": "default"}]})
    assert _eventually(lambda: _kubelet_get(kubelet.port, ca_file, "/pods", token=token)[0] == 200)
    # a token the API server does not accept is 401, never anonymous
    assert _kubelet_get(kubelet.port, ca_file, "/pods", token=token[:-4] + "AAAA") == (401, b"Unauthorized")
    assert _kubelet_get(kubelet.port, ca_file, "/pods", token="not-a-token") == (401, b"Unauthorized")


def test_decisions_are_cached_for_their_ttl_by_the_injected_clock(secure, tmp_path):
    """An allow is kept 300 s, a deny 30 s (upstream's webhook cache), measured on a fake clock."""
    import asyncio

    from k8py.kubelet.server_auth import KubeletUser, request_attributes

    api, _, _, client, _, _ = secure
    rbac = kubernetes.client.RbacAuthorizationV1Api(client)
    binding = {"metadata": {"name": "bob-kubelet-api"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]}
    now = [1000.0]
    bob, attrs = KubeletUser("bob", ("system:authenticated",)), request_attributes("GET", "/pods", NODE)

    async def check() -> list[bool]:
        rest = RestClient(load_kubeconfig(str(tmp_path / "node" / "kubeconfig")))
        auth = KubeletAuth(node_name=NODE, client=rest, authorization_mode="Webhook", clock=lambda: now[0])
        try:
            seen = [await auth.authorize(bob, attrs)]          # denied, and kept 30 s
            await asyncio.to_thread(rbac.create_cluster_role_binding, binding)
            await asyncio.sleep(0)
            seen.append(await auth.authorize(bob, attrs))      # still the cached deny
            now[0] += 31
            for _ in range(300):                                # past the deny's TTL: asked again (RBAC follows a watch)
                if await auth.authorize(bob, attrs):
                    break
                now[0] += 31
                await asyncio.sleep(0.1)
            seen.append(await auth.authorize(bob, attrs))
            await asyncio.to_thread(rbac.delete_cluster_role_binding, "bob-kubelet-api")
            now[0] += 299
            seen.append(await auth.authorize(bob, attrs))      # the allow is kept 300 s
            now[0] += 2
            for _ in range(300):                                # past the allow's TTL: asked again
                if not await auth.authorize(bob, attrs):
                    break
                now[0] += 301
                await asyncio.sleep(0.1)
            seen.append(await auth.authorize(bob, attrs))
            return seen
        finally:
            await rest.close()

    assert asyncio.run(check()) == [False, False, True, True, False]


def test_request_attributes_follow_upstreams_path_mapping():
    from k8py.kubelet.server_auth import RequestAttributes, request_attributes

    assert request_attributes("GET", "/stats", "n").subresource == "stats"
    assert request_attributes("GET", "/statsx", "n").subresource == "proxy"  # a prefix is a path segment
    assert request_attributes("HEAD", "/logs/kubelet.log", "n") == RequestAttributes("get", "log", "n")
    assert request_attributes("PUT", "/spec/", "n").verb == "update"
    assert request_attributes("PATCH", "/checkpoint/a/b/c", "n").subresource == "checkpoint"
    assert request_attributes("DELETE", "/pods", "n").verb == "delete"
