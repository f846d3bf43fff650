"""CRD conversion webhooks: ConversionReview v1 over HTTPS to a tiny webhook
in the test. Objects are stored in the storage version and served in the
requested one for get, list, watch, create and patch; a failing webhook is
upstream's 500; a Webhook strategy without a clientConfig is refused."""

from __future__ import annotations

import json
import threading

import kubernetes
import pytest
from aiohttp import web

from tests.apiserver.crd.test_crd_serving import established, wait_for
from tests.support.webhook_server import SERVER, HTTPSServer

GROUP = "convert.example.com"
NAME = f"ports.{GROUP}"


def v1_to_v2(obj: dict) -> dict:
    spec = dict(obj.get("spec") or {})
    host, _, port = str(spec.pop("hostPort", "")).partition(":")
    return {**obj, "apiVersion": f"{GROUP}/v2", "spec": {**spec, "host": host, "port": int(port or 0)}}


def v2_to_v1(obj: dict) -> dict:
    spec = dict(obj.get("spec") or {})
    host, port = spec.pop("host", ""), spec.pop("port", 0)
    return {**obj, "apiVersion": f"{GROUP}/v1", "spec": {**spec, "hostPort": f"{host}:{port}"}}


async def convert(request: web.Request) -> web.Response:
    review = await request.json()
    request.app[SERVER].requests.append(review)
    req = review["request"]
    desired = req["desiredAPIVersion"]
    out = []
    for obj in req["objects"]:
        if obj["apiVersion"] == desired:
            out.append(obj)
        elif desired.endswith("/v2"):
            out.append(v1_to_v2(obj))
        else:
            out.append(v2_to_v1(obj))
    return web.json_response({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": {
        "uid": req["uid"], "convertedObjects": out, "result": {"status": "Success"}}})


def crd(webhook: dict | None) -> dict:
    def version(name: str, storage: bool, props: dict) -> dict:
        return {"name": name, "served": True, "storage": storage, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": NAME},
        "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "ports", "kind": "Port"},
                 "conversion": {"strategy": "Webhook", **({"webhook": webhook} if webhook else {})},
                 "versions": [
                     version("v1", True, {"hostPort": {"type": "string"}}),
                     version("v2", False, {"host": {"type": "string"}, "port": {"type": "integer",
                                                                            "default": 443}})]},
    }


@pytest.fixture
def webhook():
    app = web.Application()
    app.router.add_post("/convert", convert)
    with HTTPSServer(app) as server:
        yield server


@pytest.fixture
def ports(k8s, webhook) -> kubernetes.client.CustomObjectsApi:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    ext.create_custom_resource_definition(crd({
        "clientConfig": {"url": f"{webhook.url}/convert", "caBundle": webhook.ca_bundle},
        "conversionReviewVersions": ["v1"]}))
    wait_for(lambda: established(ext, NAME), what="Established")
    return kubernetes.client.CustomObjectsApi(k8s)


def port(name: str, version: str, **spec) -> dict:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Port", "metadata": {"name": name}, "spec": spec}


def test_objects_are_stored_in_the_storage_version_and_served_in_the_requested_one(ports, webhook, k8s) -> None:
    created = ports.create_namespaced_custom_object(GROUP, "v2", "default", "ports",
                                                    port("web", "v2", host="example.org", port=8080))
    assert created["apiVersion"] == f"{GROUP}/v2" and created["spec"] == {"host": "example.org", "port": 8080}
    as_v1 = ports.get_namespaced_custom_object(GROUP, "v1", "default", "ports", "web")
    assert as_v1["spec"] == {"hostPort": "example.org:8080"}
    as_v2 = ports.get_namespaced_custom_object(GROUP, "v2", "default", "ports", "web")
    assert as_v2["apiVersion"] == f"{GROUP}/v2" and as_v2["spec"] == {"host": "example.org", "port": 8080}
    assert as_v2["metadata"]["uid"] == as_v1["metadata"]["uid"]
    # a v1 object reads as v2 with the v2 schema's defaults filled
    ports.create_namespaced_custom_object(GROUP, "v1", "default", "ports", port("old", "v1", hostPort="a:"))
    listed = ports.list_namespaced_custom_object(GROUP, "v2", "default", "ports")
    assert {i["metadata"]["name"]: i["spec"] for i in listed["items"]} == {
        "web": {"host": "example.org", "port": 8080}, "old": {"host": "a", "port": 0}}
    assert all(i["apiVersion"] == f"{GROUP}/v2" for i in listed["items"])
    reviews = [r["request"] for r in webhook.requests]
    assert {r["desiredAPIVersion"] for r in reviews} == {f"{GROUP}/v1", f"{GROUP}/v2"}
    assert all(r["uid"] for r in reviews)
    # a patch through v2 is converted to v1 for storage, and back
    patched = ports.patch_namespaced_custom_object(GROUP, "v2", "default", "ports", "web", {"spec": {"port": 9090}})
    assert patched["spec"] == {"host": "example.org", "port": 9090}
    assert ports.get_namespaced_custom_object(GROUP, "v1", "default", "ports", "web")["spec"] == {
        "hostPort": "example.org:9090"}
    stored = kubernetes.client.ApiextensionsV1Api(k8s).read_custom_resource_definition(NAME).status.stored_versions
    assert stored == ["v1"]


def test_a_watch_in_a_non_storage_version_gets_converted_events(ports) -> None:
    ports.create_namespaced_custom_object(GROUP, "v1", "default", "ports", port("w1", "v1", hostPort="h:1"))
    listed = ports.list_namespaced_custom_object(GROUP, "v2", "default", "ports")
    events: list[dict] = []
    done = threading.Event()

    def watch() -> None:
        w = kubernetes.watch.Watch()
        for event in w.stream(ports.list_namespaced_custom_object, GROUP, "v2", "default", "ports",
                              resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=30):
            events.append(event)
            if len(events) == 2:
                w.stop()
        done.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    ports.create_namespaced_custom_object(GROUP, "v1", "default", "ports", port("w2", "v1", hostPort="h:2"))
    ports.patch_namespaced_custom_object(GROUP, "v1", "default", "ports", "w2", {"spec": {"hostPort": "h:3"}})
    assert done.wait(60)
    assert [(e["type"], e["object"]["apiVersion"], e["object"]["spec"]) for e in events] == [
        ("ADDED", f"{GROUP}/v2", {"host": "h", "port": 2}), ("MODIFIED", f"{GROUP}/v2", {"host": "h", "port": 3})]


def test_a_failing_webhook_is_upstreams_500(k8s, webhook) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    ext.create_custom_resource_definition(crd({
        "clientConfig": {"url": f"{webhook.url}/missing", "caBundle": webhook.ca_bundle},
        "conversionReviewVersions": ["v1"]}))
    wait_for(lambda: established(ext, NAME), what="Established")
    api = kubernetes.client.CustomObjectsApi(k8s)
    api.create_namespaced_custom_object(GROUP, "v1", "default", "ports", port("p", "v1", hostPort="a:1"))
    with pytest.raises(kubernetes.client.ApiException) as err:
        api.get_namespaced_custom_object(GROUP, "v2", "default", "ports", "p")
    assert err.value.status == 500
    message = json.loads(err.value.body)["message"]
    assert message.startswith(f"Internal error occurred: conversion webhook for {GROUP}/v1, Kind=Port failed: ")
    assert "404" in message or "Not Found" in message


def test_the_webhook_strategy_needs_a_client_config(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    with pytest.raises(kubernetes.client.ApiException) as err:
        ext.create_custom_resource_definition(crd(None))
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["message"] == (
        f'CustomResourceDefinition.apiextensions.k8s.io "{NAME}" is invalid: [spec.conversion.webhookClientConfig: '
        "Required value: required when strategy is set to Webhook, spec.conversion.conversionReviewVersions: "
        "Required value: must include at least one of v1, v1beta1]")


def test_a_webhook_reached_through_a_service(k8s) -> None:
    app = web.Application()
    app.router.add_post("/convert", convert)
    with HTTPSServer(app, dns_names=("converter.default.svc",)) as server:
        core = kubernetes.client.CoreV1Api(k8s)
        core.create_namespaced_service("default", {"metadata": {"name": "converter"}, "spec": {
            "ports": [{"port": 443, "targetPort": server.port}]}})
        core.create_namespaced_endpoints("default", {"metadata": {"name": "converter"}, "subsets": [{
            "addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": server.port}]}]})
        ext = kubernetes.client.ApiextensionsV1Api(k8s)
        ext.create_custom_resource_definition(crd({
            "clientConfig": {"service": {"namespace": "default", "name": "converter", "path": "/convert"},
                             "caBundle": server.ca_bundle},
            "conversionReviewVersions": ["v1"]}))
        wait_for(lambda: established(ext, NAME), what="Established")
        api = kubernetes.client.CustomObjectsApi(k8s)

        def created() -> bool:
            try:
                api.create_namespaced_custom_object(GROUP, "v2", "default", "ports", port("s", "v2", host="h", port=1))
            except kubernetes.client.ApiException as err:
                if err.status == 500:  # the Endpoints not yet in the watch cache the resolver reads
                    return False
                raise
            return True

        wait_for(created, what="a create converted through the Service")
        assert api.get_namespaced_custom_object(GROUP, "v1", "default", "ports", "s")["spec"] == {"hostPort": "h:1"}
        assert server.requests and server.requests[0]["request"]["desiredAPIVersion"] == f"{GROUP}/v1"


def _switch_storage_to_v2(ext: kubernetes.client.ApiextensionsV1Api) -> None:
    current = ext.read_custom_resource_definition(NAME)
    for version in current.spec.versions:
        version.storage = version.name == "v2"
    ext.replace_custom_resource_definition(NAME, current)
    wait_for(lambda: ext.read_custom_resource_definition(NAME).status.stored_versions == ["v1", "v2"],
             what="storedVersions [v1, v2]")


def test_objects_of_an_older_storage_version_are_converted_when_read(ports, k8s) -> None:
    ports.create_namespaced_custom_object(GROUP, "v1", "default", "ports", port("before", "v1", hostPort="a:1"))
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    _switch_storage_to_v2(ext)

    def read_as_v2() -> dict | None:
        obj = ports.get_namespaced_custom_object(GROUP, "v2", "default", "ports", "before")
        return obj if obj["apiVersion"] == f"{GROUP}/v2" else None

    # still stored as v1, read through the (new) storage version with the webhook
    assert wait_for(read_as_v2, what="the v2 view")["spec"] == {"host": "a", "port": 1}
    listed = ports.list_namespaced_custom_object(GROUP, "v2", "default", "ports")
    assert [(i["apiVersion"], i["spec"]) for i in listed["items"]] == [(f"{GROUP}/v2", {"host": "a", "port": 1})]
    ports.create_namespaced_custom_object(GROUP, "v2", "default", "ports", port("after", "v2", host="b", port=2))
    assert ports.get_namespaced_custom_object(GROUP, "v1", "default", "ports", "after")["spec"] == {"hostPort": "b:2"}


def test_with_conversion_none_an_older_storage_version_reads_as_the_new_one(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    body = crd(None)
    body["spec"]["conversion"] = {"strategy": "None"}
    for version in body["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}
    ext.create_custom_resource_definition(body)
    wait_for(lambda: established(ext, NAME), what="Established")
    api = kubernetes.client.CustomObjectsApi(k8s)
    api.create_namespaced_custom_object(GROUP, "v1", "default", "ports", port("p", "v1", any="thing"))
    _switch_storage_to_v2(ext)
    got = wait_for(lambda: (lambda o: o if o["apiVersion"] == f"{GROUP}/v2" else None)(
        api.get_namespaced_custom_object(GROUP, "v2", "default", "ports", "p")), what="the v2 apiVersion")
    assert got["spec"] == {"any": "thing"}
