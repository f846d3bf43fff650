"""Service-account tokens end to end on a real API server: TokenRequest (kubectl create token),
TokenReview, bound objects, expiry on an injected clock, bootstrap tokens and OIDC discovery."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from typing import Any, Iterator

import kubernetes
import pytest
from joserfc import jws
from joserfc.jwk import KeySet

from tests.support.kube import Kubectl, official_client
from tests.support.servers import ServerThread, sqlite_storage


class WallClock:
    """Seconds since the epoch that move only when told (the server's token clock)."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> WallClock:
    return WallClock()


@pytest.fixture
def server(tmp_path, clock) -> Iterator[ServerThread]:
    with ServerThread(sqlite_storage(str(tmp_path / "data")), token_clock=clock,
                      service_account_max_token_expiration=48 * 3600) as s:
        yield s


@pytest.fixture
def api(server) -> Iterator[kubernetes.client.ApiClient]:
    client = official_client(server.url)
    yield client
    client.close()
    client.rest_client.pool_manager.clear()


@pytest.fixture
def kubectl(server, tmp_path) -> Kubectl:
    return Kubectl(server.url, str(tmp_path / "home"))


def _service_account(api: Any, name: str = "default", namespace: str = "default") -> dict[str, Any]:
    core = kubernetes.client.CoreV1Api(api)
    sa = core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    return {"uid": sa.metadata.uid}


def _review(api: Any, token: str, audiences: list[str] | None = None) -> Any:
    auth = kubernetes.client.AuthenticationV1Api(api)
    spec: dict[str, Any] = {"token": token}
    if audiences:
        spec["audiences"] = audiences
    return auth.create_token_review({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}).status


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _wait(predicate: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_kubectl_create_token_is_reviewed_as_its_service_account(api, kubectl, server) -> None:
    sa = _service_account(api, "builder")
    token = kubectl.run("create", "token", "builder", "-n", "default").stdout.strip()
    claims = _claims(token)
    assert claims["sub"] == "system:serviceaccount:default:builder"
    assert claims["iss"] == "https://kubernetes.default.svc.cluster.local"
    assert claims["aud"] == ["https://kubernetes.default.svc.cluster.local"]
    assert claims["exp"] - claims["iat"] == 3600 and claims["nbf"] == claims["iat"]
    assert claims["kubernetes.io"] == {"namespace": "default", "serviceaccount": {"name": "builder", "uid": sa["uid"]}}
    status = _review(api, token)
    assert status.authenticated is True
    assert status.user.username == "system:serviceaccount:default:builder"
    assert status.user.uid == sa["uid"]
    assert status.user.groups == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    assert status.user.extra["authentication.kubernetes.io/credential-id"] == [f"JTI={claims['jti']}"]
    assert status.audiences == ["https://kubernetes.default.svc.cluster.local"]


def test_a_deleted_pods_bound_token_is_rejected(api, kubectl) -> None:
    _service_account(api)
    core = kubernetes.client.CoreV1Api(api)
    pod = core.create_namespaced_pod("default", {"metadata": {"name": "web"},
                                                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    token = kubectl.run("create", "token", "default", "--bound-object-kind", "Pod", "--bound-object-name", "web",
                        "--duration", "20m").stdout.strip()
    claims = _claims(token)
    assert claims["kubernetes.io"]["pod"] == {"name": "web", "uid": pod.metadata.uid}
    assert claims["exp"] - claims["iat"] == 1200
    status = _review(api, token)
    assert status.authenticated
    assert status.user.extra["authentication.kubernetes.io/pod-name"] == ["web"]
    assert status.user.extra["authentication.kubernetes.io/pod-uid"] == [pod.metadata.uid]
    core.delete_namespaced_pod("web", "default", grace_period_seconds=0)
    rejected = _wait(lambda: (s := _review(api, token)) and not s.authenticated and s)
    assert 'pod "web" not found' in rejected.error
    # a pod of the same name made again is another pod: the token stays dead
    core.create_namespaced_pod("default", {"metadata": {"name": "web"},
                                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    _wait(lambda: "does not match claim" in (_review(api, token).error or ""))


def test_tokens_expire_on_the_servers_clock(api, kubectl, clock) -> None:
    _service_account(api)
    token = kubectl.run("create", "token", "default", "--duration", "10m").stdout.strip()
    assert _review(api, token).authenticated
    clock.now += 600 + 59  # within go-jose's minute of leeway
    assert _review(api, token).authenticated
    clock.now += 2
    status = _review(api, token)
    assert not status.authenticated and status.error == "service account token has expired"


def test_token_request_validation_and_binding_errors(api, kubectl) -> None:
    _service_account(api)
    short = kubectl.run("create", "token", "default", "--duration", "5m", check=False)
    assert short.returncode != 0
    assert 'TokenRequest.authentication.k8s.io "default" is invalid: spec.expirationSeconds: Invalid value: 300: ' \
           "may not specify a duration less than 10 minutes" in short.stderr
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    wrong_uid = kubectl.run("create", "token", "default", "--bound-object-kind", "Pod", "--bound-object-name", "p",
                            "--bound-object-uid", "0000", check=False)
    assert "the UID in the bound object reference (0000) does not match the UID in record" in wrong_uid.stderr
    missing = kubectl.run("create", "token", "nobody", check=False)
    assert 'serviceaccounts "nobody" not found' in missing.stderr
    core.create_namespaced_service_account("default", {"metadata": {"name": "other"}})
    other = kubectl.run("create", "token", "other", "--bound-object-kind", "Pod", "--bound-object-name", "p", check=False)
    assert 'cannot bind token for serviceaccount "other" to pod running with different serviceaccount name.' in other.stderr


def test_expiration_is_capped_and_3607_is_extended_with_warnafter(api, server) -> None:
    _service_account(api)
    core = kubernetes.client.CoreV1Api(api)

    def request(seconds: int) -> dict[str, Any]:
        body = {"spec": {"expirationSeconds": seconds, "audiences": ["vault"]}}
        out = core.create_namespaced_service_account_token("default", "default", body)
        return _claims(out.status.token)

    capped = request(100 * 3600)
    assert capped["exp"] - capped["iat"] == 48 * 3600 and capped["aud"] == ["vault"]
    extended = request(3607)
    assert extended["exp"] - extended["iat"] == 365 * 24 * 3600
    assert extended["kubernetes.io"]["warnafter"] == extended["iat"] + 3607
    # meant for vault, not for the API server: only a review asking for vault accepts it
    token = core.create_namespaced_service_account_token("default", "default", {"spec": {"audiences": ["vault"]}}).status.token
    assert not _review(api, token).authenticated
    assert _review(api, token, ["vault"]).authenticated


def test_oidc_discovery_publishes_keys_that_verify_the_tokens(api, server, kubectl) -> None:
    _service_account(api)
    token = kubectl.run("create", "token", "default").stdout.strip()
    with urllib.request.urlopen(server.url + "/.well-known/openid-configuration") as r:
        assert r.headers["Cache-Control"] == "public, max-age=3600"
        config = json.loads(r.read())
    assert config == {
        "issuer": "https://kubernetes.default.svc.cluster.local",
        "jwks_uri": "https://kubernetes.default.svc.cluster.local/openid/v1/jwks",
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    }
    with urllib.request.urlopen(server.url + "/openid/v1/jwks") as r:
        assert r.headers["Content-Type"] == "application/jwk-set+json"
        keyset = KeySet.import_key_set(json.loads(r.read()))
    verified = jws.deserialize_compact(token, keyset)  # an outside verifier, with nothing but the JWKS
    assert json.loads(verified.payload)["sub"] == "system:serviceaccount:default:default"


def _bootstrap_secret(token_id: str, secret: str, **extra: str) -> dict[str, Any]:
    data = {"token-id": token_id, "token-secret": secret, "usage-bootstrap-authentication": "true", **extra}
    return {"metadata": {"name": f"bootstrap-token-{token_id}"}, "type": "bootstrap.kubernetes.io/token",
            "stringData": data}


def test_bootstrap_tokens_authenticate_until_they_expire(api, clock) -> None:
    core = kubernetes.client.CoreV1Api(api)
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock.now + 3600))
    core.create_namespaced_secret("kube-system", _bootstrap_secret(
        "abcdef", "0123456789abcdef", expiration=expires, **{"auth-extra-groups": "system:bootstrappers:k8py:default-node-token"}))
    status = _wait(lambda: (s := _review(api, "abcdef.0123456789abcdef")).authenticated and s)
    assert status.user.username == "system:bootstrap:abcdef"
    assert status.user.groups == ["system:bootstrappers", "system:bootstrappers:k8py:default-node-token", "system:authenticated"]
    wrong = _review(api, "abcdef.0123456789abcdeX".lower().replace("x", "0"))
    assert not wrong.authenticated and wrong.error == "the token does not match its secret"
    clock.now += 3601
    expired = _review(api, "abcdef.0123456789abcdef")
    assert not expired.authenticated and expired.error == f"the bootstrap token expired at {expires}"
    assert not _review(api, "zzzzzz.0123456789abcdef").authenticated


def test_token_review_needs_a_token(server) -> None:
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}}).encode()
    request = urllib.request.Request(server.url + "/apis/authentication.k8s.io/v1/tokenreviews", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request)
    assert err.value.code == 400 and json.loads(err.value.read())["message"] == "token is required"
