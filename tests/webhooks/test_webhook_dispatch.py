"""The webhook dispatchers against real HTTPS webhooks: configurations read
from a real API server's watch cache, AdmissionReview v1 over TLS verified
with the caBundle, patches applied, denials and failures as upstream words
them. The plugins are called directly with a request's attributes (the
admission chain's part is tested end to end in test_webhooks_e2e)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from k8py.api.errors import StatusError
from k8py.apiserver.webhooks import build_webhook_plugins
from tests.support.webhook_server import HTTPSServer, allow, deny, patch_response, review_app
from tests.webhooks.conftest import configmap_create, put

RULE = {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}


def hook(name: str, url: str, ca_bundle: str, **extra) -> dict:
    return {"name": name, "clientConfig": {"url": url, "caBundle": ca_bundle}, "rules": [RULE],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], **extra}


def config(name: str, *hooks: dict) -> dict:
    return {"metadata": {"name": name}, "webhooks": list(hooks)}


async def test_a_mutating_webhook_patches_the_object_and_sees_the_request_as_upstream_writes_it(server):
    app = review_app({"/mutate": lambda req: patch_response(
        [{"op": "add", "path": "/data/added", "value": "by-webhook"}], warnings=["configmaps are patched"],
        auditAnnotations={"decision": "patched"})})
    with HTTPSServer(app) as webhook:
        await put(server, "admissionregistration.k8s.io", "mutatingwebhookconfigurations",
                  config("patcher", hook("patch.example.com", webhook.url + "/mutate", webhook.ca_bundle)))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            attrs = configmap_create(data={"a": "1"})
            await plugins.mutating.admit(attrs)
        finally:
            await plugins.close()
    assert attrs.object["data"] == {"a": "1", "added": "by-webhook"}
    assert attrs.warnings == ["configmaps are patched"]
    assert attrs.annotations["patch.example.com/decision"] == "patched"
    assert json.loads(attrs.annotations["mutation.webhook.admission.k8s.io/round_0_index_0"]) == {
        "configuration": "patcher", "webhook": "patch.example.com", "mutated": True}
    (request,) = webhook.requests
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["requestKind"] == request["kind"] and request["requestResource"] == request["resource"]
    assert (request["operation"], request["name"], request["namespace"], request["dryRun"]) == ("CREATE", "cm", "default", False)
    assert request["userInfo"] == {"username": "alice", "groups": ["devs", "system:authenticated"]}
    assert request["object"]["data"] == {"a": "1"} and "oldObject" not in request
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}


async def test_a_denial_carries_the_webhooks_message_and_code_as_upstream(server):
    app = review_app({"/deny": lambda req: deny("configmaps named cm are not allowed", code=403, reason="Forbidden")})
    with HTTPSServer(app) as webhook:
        await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations",
                  config("deny", hook("deny.example.com", webhook.url + "/deny", webhook.ca_bundle)))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            with pytest.raises(StatusError) as denied:
                await plugins.validating.validate(configmap_create())
        finally:
            await plugins.close()
    assert denied.value.to_dict() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'admission webhook "deny.example.com" denied the request: configmaps named cm are not allowed',
        "reason": "Forbidden", "code": 403}


async def test_a_denial_without_a_message_or_code_is_a_400_without_explanation(server):
    app = review_app({"/bare": lambda req: {"allowed": False}})
    with HTTPSServer(app) as webhook:
        await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations",
                  config("bare", hook("bare.example.com", webhook.url + "/bare", webhook.ca_bundle)))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            with pytest.raises(StatusError) as bare:
                await plugins.validating.validate(configmap_create())
        finally:
            await plugins.close()
    assert (bare.value.code, bare.value.message) == (400, 'admission webhook "bare.example.com" denied the request without explanation')


async def test_a_hanging_webhook_fails_the_request_after_its_timeout_or_is_ignored(server):
    release = threading.Event()

    async def hang(req):
        while not release.is_set():
            await asyncio.sleep(0.05)
        return allow()

    with HTTPSServer(review_app({"/hang": hang})) as webhook:
        url = webhook.url + "/hang"
        await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations", config(
            "hang", hook("fail.example.com", url, webhook.ca_bundle, timeoutSeconds=1, failurePolicy="Fail",
                         objectSelector={"matchLabels": {"policy": "fail"}}),
            hook("ignore.example.com", url, webhook.ca_bundle, timeoutSeconds=1, failurePolicy="Ignore",
                 objectSelector={"matchLabels": {"policy": "ignore"}})))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            with pytest.raises(StatusError) as failed:
                await plugins.validating.validate(configmap_create(labels={"policy": "fail"}))
            ignored = configmap_create(labels={"policy": "ignore"})
            await plugins.validating.validate(ignored)  # fails open
        finally:
            release.set()
            await plugins.close()
    text = f'failed calling webhook "fail.example.com": failed to call webhook: Post "{url}?timeout=1s": context deadline exceeded'
    assert failed.value.to_dict() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"Internal error occurred: {text}", "reason": "InternalError",
        "details": {"causes": [{"message": text}]}, "code": 500}
    assert ignored.annotations == {"failed-open.validating.webhook.admission.k8s.io/round_0_index_1": "ignore.example.com"}


async def test_a_webhook_whose_certificate_the_ca_bundle_does_not_sign_is_not_trusted(server):
    with HTTPSServer(review_app({"/ok": lambda req: allow()})) as webhook, \
            HTTPSServer(review_app({"/ok": lambda req: allow()})) as other:
        url = webhook.url + "/ok"
        await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations",
                  config("wrong-ca", hook("ca.example.com", url, other.ca_bundle)))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            with pytest.raises(StatusError) as failed:
                await plugins.validating.validate(configmap_create())
        finally:
            await plugins.close()
    assert failed.value.message == (
        f'Internal error occurred: failed calling webhook "ca.example.com": failed to call webhook: Post "{url}?timeout=10s": '
        "tls: failed to verify certificate: x509: certificate signed by unknown authority")
    assert webhook.requests == []


async def test_a_webhook_behind_a_service_is_dialled_at_its_endpoint_with_the_service_name_verified(server):
    app = review_app({"/validate": lambda req: deny("seen through the service")})
    with HTTPSServer(app, dns_names=("hooks.webhooks.svc",)) as webhook:
        await put(server, "", "namespaces", {"metadata": {"name": "webhooks"}})
        await put(server, "", "services", {"metadata": {"name": "hooks"}, "spec": {"ports": [{"port": 443, "targetPort": 8443}]}},
                  namespace="webhooks")
        await put(server, "", "endpoints", {"metadata": {"name": "hooks"}, "subsets": [
            {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": webhook.port}]}]}, namespace="webhooks")
        await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations", config("svc", {
            "name": "svc.example.com", "rules": [RULE], "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "webhooks", "name": "hooks", "path": "/validate"},
                             "caBundle": webhook.ca_bundle}}))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            with pytest.raises(StatusError) as denied:
                await plugins.validating.validate(configmap_create())
        finally:
            await plugins.close()
    assert denied.value.message == 'admission webhook "svc.example.com" denied the request: seen through the service'


async def test_selectors_and_rules_decide_which_webhooks_are_called(server):
    app = review_app({"/deny": lambda req: deny("no")})
    with HTTPSServer(app) as webhook:
        await put(server, "", "namespaces", {"metadata": {"name": "guarded", "labels": {"guard": "on"}}})
        url = webhook.url + "/deny"
        await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations", config(
            "selective", hook("ns.example.com", url, webhook.ca_bundle, namespaceSelector={"matchLabels": {"guard": "on"}}),
            hook("secrets.example.com", url, webhook.ca_bundle, rules=[{**RULE, "resources": ["secrets"]}]),
            hook("status.example.com", url, webhook.ca_bundle, rules=[{**RULE, "resources": ["configmaps/status"]}]),
            hook("cluster.example.com", url, webhook.ca_bundle, rules=[{**RULE, "scope": "Cluster"}])))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            await plugins.validating.validate(configmap_create(namespace="default"))  # nothing applies
            with pytest.raises(StatusError) as denied:
                await plugins.validating.validate(configmap_create(namespace="guarded"))
        finally:
            await plugins.close()
    assert denied.value.message == 'admission webhook "ns.example.com" denied the request: no'
    assert len(webhook.requests) == 1


async def test_an_if_needed_webhook_is_called_again_when_a_later_webhook_changed_the_object(server):
    def first(req):
        return patch_response([{"op": "add", "path": "/data/first", "value": str(len(req["object"]["data"]))}])

    def second(req):
        if "second" in req["object"]["data"]:
            return allow()
        return patch_response([{"op": "add", "path": "/data/second", "value": "x"}])

    with HTTPSServer(review_app({"/first": first, "/second": second})) as webhook:
        await put(server, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", config(
            "a", hook("first.example.com", webhook.url + "/first", webhook.ca_bundle, reinvocationPolicy="IfNeeded")))
        await put(server, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", config(
            "b", hook("second.example.com", webhook.url + "/second", webhook.ca_bundle)))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            attrs = configmap_create()
            await plugins.mutating.admit(attrs)
        finally:
            await plugins.close()
    # round 0: first (0 keys -> "0"), second adds "second"; round 1: first again sees 2 keys
    assert attrs.object["data"] == {"first": "2", "second": "x"}
    assert [r["object"]["data"].get("second") for r in webhook.requests] == [None, None, "x"]
    assert "mutation.webhook.admission.k8s.io/round_1_index_0" in attrs.annotations


async def test_dry_run_requests_reach_only_webhooks_without_side_effects(server):
    with HTTPSServer(review_app({"/ok": lambda req: allow()})) as webhook:
        await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations", config(
            "dry", hook("dry.example.com", webhook.url + "/ok", webhook.ca_bundle, sideEffects="NoneOnDryRun")))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            await plugins.validating.validate(configmap_create(dry_run=True))
        finally:
            await plugins.close()
    assert [r["dryRun"] for r in webhook.requests] == [True]


async def test_match_conditions_in_cel_decide_whether_a_webhook_is_called(server):
    with HTTPSServer(review_app({"/deny": lambda req: deny("conditions matched")})) as webhook:
        await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations", config("cel", hook(
            "cel.example.com", webhook.url + "/deny", webhook.ca_bundle, matchConditions=[
                {"name": "not-excluded", "expression": "!has(object.metadata.labels) || !('skip' in object.metadata.labels)"},
                {"name": "alice-only", "expression": "request.userInfo.username == 'alice'"}])))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            await plugins.validating.validate(configmap_create(labels={"skip": "yes"}))
            with pytest.raises(StatusError) as denied:
                await plugins.validating.validate(configmap_create())
        finally:
            await plugins.close()
    assert denied.value.message == 'admission webhook "cel.example.com" denied the request: conditions matched'
    assert len(webhook.requests) == 1


async def test_a_match_condition_that_errors_fails_the_request_unless_the_policy_is_ignore(server):
    with HTTPSServer(review_app({"/ok": lambda req: allow()})) as webhook:
        url = webhook.url + "/ok"
        bad = [{"name": "typo", "expression": "object.metadata.labels.team == 'a'"}]
        await put(server, "admissionregistration.k8s.io", "validatingwebhookconfigurations", config(
            "errors", hook("fail.example.com", url, webhook.ca_bundle, matchConditions=bad,
                           objectSelector={"matchLabels": {"policy": "fail"}}),
            hook("ignore.example.com", url, webhook.ca_bundle, matchConditions=bad, failurePolicy="Ignore",
                 objectSelector={"matchLabels": {"policy": "ignore"}})))
        plugins = build_webhook_plugins(server.registry, server.cacher)
        try:
            with pytest.raises(StatusError) as failed:
                await plugins.validating.validate(configmap_create(labels={"policy": "fail"}))
            await plugins.validating.validate(configmap_create(labels={"policy": "ignore"}))
        finally:
            await plugins.close()
    assert failed.value.code == 500
    assert failed.value.message.startswith(
        'Internal error occurred: failed calling webhook "fail.example.com": failed to evaluate match conditions: ')
    assert "no such key: team" in failed.value.message
    assert webhook.requests == []
