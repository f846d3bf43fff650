"""The authenticator chain over real HTTPS: x509, static tokens, anonymous, 401s, whoami.

Driven by the real kubectl (``kubectl auth whoami``, ``get``) and the official
client, against a ServerThread serving HTTPS only.
"""

from __future__ import annotations

import http.client
import json
import ssl
import tempfile

import kubernetes
import pytest

from k8py.client import certs
from tests.apiserver.authn.conftest import kubeconfig_for, kubectl, official_client_from
from tests.support.servers import ServerThread, sqlite_storage

UNAUTHORIZED = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                b'"message":"Unauthorized","reason":"Unauthorized","code":401}\n')

#: what kubectl 1.32 prints for a 401 from kube-apiserver
LOGIN_ERROR = "error: You must be logged in to the server (the server has asked for the client to provide credentials)"

pytestmark = pytest.mark.kubectl


def _request(server: ServerThread, method: str, path: str, *, headers: dict[str, str] | None = None,
             cert: tuple[bytes, bytes] | None = None, body: bytes | None = None) -> tuple[int, bytes]:
    assert server.server is not None and server.server.serving is not None
    ctx = ssl.create_default_context(cadata=server.server.serving.ca_pem.decode())
    if cert is not None:
        with tempfile.TemporaryDirectory() as d:
            certs.write_pem(f"{d}/c.crt", cert[0])
            certs.write_pem(f"{d}/c.key", cert[1], private=True)
            ctx.load_cert_chain(f"{d}/c.crt", f"{d}/c.key")
    conn = http.client.HTTPSConnection("127.0.0.1", server.server.secure_port, context=ctx, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _whoami(kubeconfig: str, *extra: str) -> dict:
    out = kubectl(kubeconfig, "auth", "whoami", "-o", "json", *extra).stdout
    return json.loads(out)["status"]["userInfo"]


def test_kubectl_with_a_client_certificate_is_the_cn_in_the_o_groups(secure_server, pki, tmp_path):
    kc = kubeconfig_for(secure_server, str(tmp_path / "alice" / "kubeconfig"), cert=pki.client("alice", "alice", ("devs", "ops")))
    assert _whoami(kc) == {"username": "alice", "groups": ["devs", "ops", "system:authenticated"]}
    assert "kube-system" in kubectl(kc, "get", "namespaces", "-o", "name").stdout


def test_official_client_with_a_static_token_is_the_token_files_user(secure_server, tmp_path):
    kc = kubeconfig_for(secure_server, str(tmp_path / "t" / "kubeconfig"), token="secret-alice")
    api = official_client_from(kc)
    review = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review(
        kubernetes.client.V1SelfSubjectReview())
    assert review.status.user_info.username == "alice"
    assert review.status.user_info.uid == "uid-1"
    assert review.status.user_info.groups == ["devs", "ops", "system:authenticated"]
    names = [ns.metadata.name for ns in kubernetes.client.CoreV1Api(api).list_namespace().items]
    assert "default" in names


def test_no_credentials_is_anonymous(secure_server):
    # (kubectl with an empty user prompts for a password on HTTPS, so this one is raw)
    status, body = _request(secure_server, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=b"{}",
                            headers={"Content-Type": "application/json"})
    assert status == 201
    assert json.loads(body) == {
        "kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1", "metadata": {"creationTimestamp": None},
        "status": {"userInfo": {"username": "system:anonymous", "groups": ["system:unauthenticated"]}}}


@pytest.mark.parametrize("token", ["not-a-known-token", "secret-alice-but-longer"])
def test_a_bad_bearer_token_is_401_even_with_anonymous_on(secure_server, token):
    status, body = _request(secure_server, "GET", "/api/v1/namespaces", headers={"Authorization": f"Bearer {token}"})
    assert (status, body) == (401, UNAUTHORIZED)


def test_kubectl_with_a_bad_token_says_it_must_log_in(secure_server, tmp_path):
    kc = kubeconfig_for(secure_server, str(tmp_path / "bad" / "kubeconfig"), token="wrong")
    result = kubectl(kc, "get", "pods", check=False)
    assert result.returncode == 1
    assert LOGIN_ERROR in result.stderr


def test_an_untrusted_client_certificate_is_401(secure_server, pki):
    stranger = certs.new_self_signed_ca("someone-else")
    status, body = _request(secure_server, "GET", "/api/v1/namespaces", cert=pki.client("x", "mallory", ca=stranger))
    assert (status, body) == (401, UNAUTHORIZED)


def test_an_expired_client_certificate_is_401(secure_server, pki, tmp_path):
    status, body = _request(secure_server, "GET", "/api/v1/namespaces", cert=pki.expired_client("alice"))
    assert (status, body) == (401, UNAUTHORIZED)
    kc = kubeconfig_for(secure_server, str(tmp_path / "old" / "kubeconfig"), cert=pki.expired_client("alice"))
    result = kubectl(kc, "get", "pods", check=False)
    assert LOGIN_ERROR in result.stderr


def test_a_serving_only_certificate_is_not_a_client_certificate(secure_server, pki):
    cert, key = pki.ca.issue_serving("alice", dns_names=["alice"])
    status, body = _request(secure_server, "GET", "/api/v1/namespaces",
                            cert=(certs.encode_cert_pem(cert), certs.encode_private_key_pem(key)))
    assert (status, body) == (401, UNAUTHORIZED)


def test_official_client_with_an_untrusted_certificate_gets_401(secure_server, pki, tmp_path):
    stranger = certs.new_self_signed_ca("someone-else")
    kc = kubeconfig_for(secure_server, str(tmp_path / "m" / "kubeconfig"), cert=pki.client("m", "mallory", ca=stranger))
    with pytest.raises(kubernetes.client.ApiException) as err:
        kubernetes.client.CoreV1Api(official_client_from(kc)).list_namespace()
    assert err.value.status == 401
    assert json.loads(err.value.body)["reason"] == "Unauthorized"


def test_anonymous_auth_off_refuses_requests_without_credentials(tmp_path, pki):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None,
                      client_ca_file=pki.ca_file, anonymous_auth=False) as server:
        assert _request(server, "GET", "/version") == (401, UNAUTHORIZED)
        status, _ = _request(server, "GET", "/version", cert=pki.client("a", "alice"))
        assert status == 200


def test_the_insecure_port_is_unsecured_system_masters(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=0) as server:
        assert server.server is not None and server.server.insecure_url
        conn = http.client.HTTPConnection("127.0.0.1", server.server.insecure_port, timeout=30)
        conn.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=b"{}",
                     headers={"Content-Type": "application/json", "Authorization": "Bearer ignored-here"})
        response = conn.getresponse()
        assert response.status == 201
        assert json.loads(response.read())["status"]["userInfo"] == {
            "username": "system:unsecured", "groups": ["system:masters", "system:authenticated"]}
        conn.close()


def test_the_insecure_port_refuses_a_non_loopback_address(tmp_path):
    with pytest.raises(ValueError, match="loopback only"):
        ServerThread(sqlite_storage(str(tmp_path / "data")), insecure_port=0, insecure_bind="0.0.0.0").start()


def test_kubectl_cannot_reach_the_server_without_trusting_its_certificate(secure_server, tmp_path):
    from k8py.cli.kubeconfig import write_kubeconfig

    kc = write_kubeconfig(str(tmp_path / "nca" / "kubeconfig"), secure_server.url, token="secret-alice")
    result = kubectl(kc, "get", "pods", check=False)
    assert result.returncode == 1
    assert "certificate signed by unknown authority" in result.stderr


def test_self_subject_review_only_takes_create(secure_server):
    status, body = _request(secure_server, "GET", "/apis/authentication.k8s.io/v1/selfsubjectreviews")
    assert status == 405, body
    status, body = _request(secure_server, "GET", "/apis/authentication.k8s.io/v1")
    assert status == 200
    resources = {r["name"]: r["verbs"] for r in json.loads(body)["resources"]}
    assert resources["selfsubjectreviews"] == ["create"]


def test_a_websocket_client_can_send_its_token_as_a_subprotocol(tmp_path, pki):
    """Browsers cannot set Authorization on a WebSocket: upstream reads base64url.bearer.authorization.k8s.io.<token>."""
    import base64

    token_file = tmp_path / "tokens.csv"
    token_file.write_text('secret-alice,alice,uid-1\n')
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None,
                      token_auth_file=str(token_file), anonymous_auth=False) as server:
        def ws_headers(token: str) -> dict[str, str]:
            encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
            return {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                    "Sec-WebSocket-Protocol": f"v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.{encoded}"}

        assert _request(server, "GET", "/version", headers=ws_headers("secret-alice"))[0] == 200
        assert _request(server, "GET", "/version", headers=ws_headers("wrong")) == (401, UNAUTHORIZED)
