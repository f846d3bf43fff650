"""CEL's authorizer library in a ValidatingAdmissionPolicy, decided by the
API server's own RBAC authorizer: checks as the requesting user, as a
service account, on a path and on the request's resource."""

from __future__ import annotations

import os
from typing import AsyncIterator

import pytest

from k8py.api.errors import StatusError
from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.server import APIServer, APIServerConfig
from k8py.apiserver.webhooks.admission_plugins import AUTHORIZER_KEY
from k8py.apiserver.webhooks import build_webhook_plugins
from k8py.storage.sqlite import SqliteStorage
from tests.webhooks.conftest import configmap_create, put
from tests.webhooks.test_validating_policy import GROUP, binding, policy

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
async def rbac_server(tmp_path) -> AsyncIterator[APIServer]:
    os.makedirs(tmp_path / "data", exist_ok=True)
    api = APIServer(SqliteStorage(str(tmp_path / "data" / "k8py.db")),
                    APIServerConfig(endpoint_reconciler_interval=0.0, authorization_modes=("RBAC",), secure_port=None, insecure_port=0))
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


async def grant(server: APIServer, user: str, verbs: list[str], resources: list[str], kind: str = "User") -> None:
    await put(server, RBAC, "roles", {"metadata": {"name": f"{user}-role"}, "rules": [
        {"apiGroups": [""], "resources": resources, "verbs": verbs}]}, namespace="default")
    subject = {"kind": kind, "name": user} if kind == "User" else {"kind": kind, "name": user, "namespace": "default"}
    if kind == "User":
        subject["apiGroup"] = RBAC
    await put(server, RBAC, "rolebindings", {"metadata": {"name": f"{user}-binding"}, "subjects": [subject],
                                             "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": f"{user}-role"}},
              namespace="default")


async def test_a_policy_asks_the_servers_authorizer_about_the_requesting_user(rbac_server):
    server = rbac_server
    await grant(server, "alice", ["get", "list"], ["pods"])
    await grant(server, "carol", ["get", "delete"], ["pods"])
    await grant(server, "builder", ["delete"], ["pods"], kind="ServiceAccount")
    await put(server, GROUP, "validatingadmissionpolicies", policy(
        "authz.example.com",
        validations=[
            {"expression": "authorizer.group('').resource('pods').namespace(object.metadata.namespace)"
                           ".check('get').allowed()",
             "message": "only users who may read pods may write configmaps"},
            {"expression": "!has(object.data) || !('purge' in object.data) || "
                           "authorizer.serviceAccount('default', 'builder').group('').resource('pods')"
                           ".namespace('default').check('delete').allowed() && "
                           "authorizer.group('').resource('pods').namespace('default').check('delete').allowed()",
             "messageExpression": "'purge needs pod delete: ' + authorizer.group('').resource('pods')"
                                  ".namespace('default').check('delete').reason()"},
            {"expression": "!authorizer.requestResource.check('create').allowed() || true"},
            {"expression": "!authorizer.path('/healthz').check('get').allowed() || true"},
        ]))
    await put(server, GROUP, "validatingadmissionpolicybindings", binding("authz-binding", "authz.example.com"))
    # the server's authorizer, as the admission chain's plugins get it
    authorizer = server.access_control.admission_context.extra[AUTHORIZER_KEY]
    plugins = build_webhook_plugins(server.registry, server.cacher, authorizer=lambda: authorizer)
    try:
        await plugins.policy.validate(configmap_create(user=UserInfo("alice", groups=("system:authenticated",))))
        with pytest.raises(StatusError) as bob:
            await plugins.policy.validate(configmap_create(user=UserInfo("bob", groups=("system:authenticated",))))
        with pytest.raises(StatusError) as purge:
            await plugins.policy.validate(configmap_create(
                data={"purge": "yes"}, user=UserInfo("alice", groups=("system:authenticated",))))
        # carol and the service account may both delete pods
        await plugins.policy.validate(configmap_create(
            data={"purge": "yes"}, user=UserInfo("carol", groups=("system:authenticated",))))
    finally:
        await plugins.close()
    assert bob.value.message == (
        'configmaps "cm" is forbidden: ValidatingAdmissionPolicy \'authz.example.com\' with binding '
        "'authz-binding' denied request: only users who may read pods may write configmaps")
    # alice may not delete pods: the reason is RBAC's (empty on a plain denial, and the message is trimmed)
    assert purge.value.message.endswith("denied request: purge needs pod delete:")


async def test_a_policy_using_the_authorizer_is_accepted_at_create_and_a_wrong_member_refused(rbac_server):
    ok = policy("ok.example.com", validations=[
        {"expression": "authorizer.group('apps').resource('deployments').subresource('scale').name('web')"
                       ".check('update').allowed()"}])
    await put(rbac_server, GROUP, "validatingadmissionpolicies", ok)
    bad = policy("bad.example.com", validations=[{"expression": "authorizer.resource('pods').check('get').allowed()"}])
    with pytest.raises(StatusError) as refused:
        await put(rbac_server, GROUP, "validatingadmissionpolicies", bad)
    assert "found no matching overload for 'resource' applied to 'kubernetes.authorization.Authorizer.(string)'" \
        in refused.value.message


async def test_a_webhook_match_condition_asks_the_authorizer(rbac_server):
    server = rbac_server
    await grant(server, "alice", ["get"], ["pods"])
    await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations", {
        "metadata": {"name": "readers"}, "webhooks": [{
            "name": "readers.example.com", "clientConfig": {"url": "https://127.0.0.1:1/never"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "matchConditions": [{"name": "pod-readers",
                                 "expression": "authorizer.group('').resource('pods').namespace(object.metadata.namespace)"
                                               ".check('get').allowed()"}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail", "timeoutSeconds": 1}]})
    authorizer = server.access_control.admission_context.extra[AUTHORIZER_KEY]
    plugins = build_webhook_plugins(server.registry, server.cacher, authorizer=lambda: authorizer)
    try:
        # bob may not read pods: the condition is false, the webhook is not called
        await plugins.validating.validate(configmap_create(user=UserInfo("bob", groups=("system:authenticated",))))
        # alice may: the webhook is called (and cannot be reached)
        with pytest.raises(StatusError) as called:
            await plugins.validating.validate(configmap_create(user=UserInfo("alice", groups=("system:authenticated",))))
    finally:
        await plugins.close()
    assert called.value.message.startswith('Internal error occurred: failed calling webhook "readers.example.com"')
