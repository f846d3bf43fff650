"""Impersonation headers (``kubectl --as/--as-group/--as-uid``), checked with the ``impersonate`` verb."""

from __future__ import annotations

import json

import pytest

from k8py.apiserver.authz.attributes import Attributes, Decision
from tests.apiserver.authn.conftest import TOKENS, kubeconfig_for, kubectl
from tests.apiserver.authn.test_authentication import _request, _whoami
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.kubectl


class OnlyUsersAndUids:
    """Allows impersonating users, service accounts, uids and the extra 'scopes'; refuses groups."""

    def __init__(self) -> None:
        self.asked: list[Attributes] = []

    async def authorize(self, a: Attributes) -> tuple[Decision, str]:
        self.asked.append(a)
        if a.verb == "impersonate" and a.resource in ("users", "serviceaccounts", "uids"):
            return Decision.ALLOW, ""
        if a.verb == "impersonate" and a.resource == "userextras" and a.subresource == "scopes":
            return Decision.ALLOW, ""
        if a.verb == "impersonate":
            return Decision.NO_OPINION, ""
        return Decision.ALLOW, ""


@pytest.fixture
def guarded(tmp_path, pki):
    token_file = tmp_path / "tokens.csv"
    token_file.write_text(TOKENS)
    authorizer = OnlyUsersAndUids()
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None,
                      client_ca_file=pki.ca_file, token_auth_file=str(token_file), authorizer=authorizer) as server:
        yield server, authorizer


def test_kubectl_as_user_and_group_with_always_allow(secure_server, pki, tmp_path):
    kc = kubeconfig_for(secure_server, str(tmp_path / "a" / "kubeconfig"), cert=pki.client("a", "alice"))
    assert _whoami(kc, "--as", "bob", "--as-group", "g1", "--as-group", "g2") == {
        "username": "bob", "groups": ["g1", "g2", "system:authenticated"]}
    assert _whoami(kc, "--as", "bob", "--as-uid", "1234") == {
        "username": "bob", "uid": "1234", "groups": ["system:authenticated"]}


def test_impersonating_a_service_account_gives_its_groups(secure_server, pki, tmp_path):
    kc = kubeconfig_for(secure_server, str(tmp_path / "a" / "kubeconfig"), cert=pki.client("a", "alice"))
    assert _whoami(kc, "--as", "system:serviceaccount:team:builder") == {
        "username": "system:serviceaccount:team:builder",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]}


def test_impersonating_anonymous_gives_unauthenticated(secure_server, pki, tmp_path):
    kc = kubeconfig_for(secure_server, str(tmp_path / "a" / "kubeconfig"), cert=pki.client("a", "alice"))
    assert _whoami(kc, "--as", "system:anonymous") == {"username": "system:anonymous", "groups": ["system:unauthenticated"]}


def test_each_impersonated_attribute_is_checked_as_the_real_user(guarded):
    server, authorizer = guarded
    status, body = _request(server, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=b"{}", headers={
        "Authorization": "Bearer secret-alice", "Content-Type": "application/json",
        "Impersonate-User": "system:serviceaccount:ns1:sa1", "Impersonate-Uid": "u-9",
        "Impersonate-Extra-Scopes": "view"})
    assert status == 201, body
    assert json.loads(body)["status"]["userInfo"] == {
        "username": "system:serviceaccount:ns1:sa1", "uid": "u-9",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated"],
        "extra": {"scopes": ["view"]}}
    checks = [(a.user.name, a.verb, a.api_group, a.resource, a.subresource, a.namespace, a.name)
              for a in authorizer.asked if a.verb == "impersonate"]
    assert checks == [
        ("alice", "impersonate", "", "serviceaccounts", "", "ns1", "sa1"),
        ("alice", "impersonate", "authentication.k8s.io", "userextras", "scopes", "", "view"),
        ("alice", "impersonate", "authentication.k8s.io", "uids", "", "", "u-9"),
    ]


def test_a_refused_impersonation_is_upstreams_forbidden(guarded, pki, tmp_path):
    server, _ = guarded
    status, body = _request(server, "GET", "/api/v1/namespaces", headers={
        "Authorization": "Bearer secret-alice", "Impersonate-User": "bob", "Impersonate-Group": "admins"})
    assert status == 403
    assert json.loads(body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'groups "admins" is forbidden: User "alice" cannot impersonate resource "groups" in API group "" at the cluster scope',
        "reason": "Forbidden", "details": {"name": "admins", "kind": "groups"}, "code": 403}
    kc = kubeconfig_for(server, str(tmp_path / "a" / "kubeconfig"), cert=pki.client("a", "alice"))
    # kubectl says it in its own words for a 403 (as against kube-apiserver: `get`'s
    # discovery client does not decode it, "Error from server (Forbidden): unknown")
    result = kubectl(kc, "auth", "whoami", "--as", "bob", "--as-group", "admins", check=False)
    assert result.returncode == 1
    assert "you do not have permission to call it" in result.stderr
    result = kubectl(kc, "get", "pods", "--as", "bob", "--as-group", "admins", check=False)
    assert "Error from server (Forbidden)" in result.stderr


def test_groups_without_a_user_are_refused(secure_server):
    status, body = _request(secure_server, "GET", "/api/v1/namespaces", headers={
        "Authorization": "Bearer secret-alice", "Impersonate-Group": "admins"})
    assert status == 500
    assert "without impersonating a user" in json.loads(body)["message"]


def test_an_unknown_impersonate_header_leaves_the_request_as_its_sender(secure_server):
    # the cheap "any Impersonate-* header?" pass must not turn an unknown one into an empty user
    body = b'{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}'
    for headers in ({"Impersonate-Something": "x"}, {"impersonate-extra-scopes": "view"}):
        status, reply = _request(secure_server, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", headers={
            "Authorization": "Bearer secret-alice", "Content-Type": "application/json", **headers}, body=body)
        if "impersonate-extra-scopes" in headers:  # an extra without a user: refused, lower-case or not
            assert status == 500 and "without impersonating a user" in json.loads(reply)["message"]
        else:
            assert status == 201, reply
            assert json.loads(reply)["status"]["userInfo"]["username"] == "alice"
