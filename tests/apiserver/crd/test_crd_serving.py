"""CustomResourceDefinitions served end to end: the real kubectl and the
official client's CustomObjectsApi against a real API server (both stores)."""

from __future__ import annotations

import json
import time
from typing import Any

import kubernetes
import pytest

GROUP = "stable.example.com"

CRD_YAML = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: {scope}
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"""

CR_YAML = """\
apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: my-cron
spec:
  cronSpec: "* * * * */5"
  image: my-cron-image
"""


def wait_for(predicate: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def established(ext: kubernetes.client.ApiextensionsV1Api, name: str) -> bool:
    crd = ext.read_custom_resource_definition(name)
    conditions = {c.type: c.status for c in (crd.status.conditions or [])}
    return conditions.get("Established") == "True" and conditions.get("NamesAccepted") == "True"


@pytest.mark.parametrize("scope", ["Namespaced", "Cluster"])
def test_kubectl_apply_crd_then_get_by_plural_and_short_name(kubectl, k8s, scope) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    kubectl.run("apply", "-f", "-", input=CRD_YAML.format(scope=scope))
    wait_for(lambda: established(ext, "crontabs.stable.example.com"), what="Established")
    crd = ext.read_custom_resource_definition("crontabs.stable.example.com")
    assert crd.status.accepted_names.plural == "crontabs"
    assert crd.status.accepted_names.short_names == ["ct"]
    assert crd.status.stored_versions == ["v1"]

    out = kubectl.run("apply", "-f", "-", input=CR_YAML).stdout
    assert "crontab.stable.example.com/my-cron created" in out
    rows = kubectl.run("get", "crontabs").stdout.split("\n")
    assert rows[0].split() == ["NAME", "AGE"]
    assert rows[1].split()[0] == "my-cron"
    assert kubectl.run("get", "ct", "-o", "name").stdout.strip() == "crontab.stable.example.com/my-cron"
    got = json.loads(kubectl.run("get", "crontab", "my-cron", "-o", "json").stdout)
    assert got["spec"] == {"cronSpec": "* * * * */5", "image": "my-cron-image"}
    assert got["metadata"]["generation"] == 1
    if scope == "Namespaced":
        assert got["metadata"]["namespace"] == "default"
        assert "crontab.stable.example.com/my-cron" in kubectl.run("get", "all", "-o", "name").stdout
    else:
        assert "namespace" not in got["metadata"]

    resources = kubectl.run("api-resources", "--api-group", GROUP).stdout
    line = [r.split() for r in resources.splitlines() if r.startswith("crontabs")][0]
    assert line == ["crontabs", "ct", "stable.example.com/v1", str(scope == "Namespaced").lower(), "CronTab"]

    # kubectl patch defaults to strategic merge: refused for custom resources, as upstream
    failed = kubectl.run("patch", "crontab", "my-cron", "-p", '{"spec":{"image":"x"}}', check=False)
    assert failed.returncode != 0
    assert "strategic merge patch" in failed.stderr or "415" in failed.stderr or "unknown format" in failed.stderr
    kubectl.run("patch", "crontab", "my-cron", "--type", "merge", "-p", '{"spec":{"image":"v2"}}')
    kubectl.run("patch", "crontab", "my-cron", "--type", "json",
                "-p", '[{"op":"replace","path":"/spec/cronSpec","value":"0 * * * *"}]')
    got = json.loads(kubectl.run("get", "ct", "my-cron", "-o", "json").stdout)
    assert got["spec"] == {"cronSpec": "0 * * * *", "image": "v2"}
    assert got["metadata"]["generation"] == 3

    # deleting the CRD deletes its objects and stops serving the resource
    kubectl.run("delete", "crd", "crontabs.stable.example.com", "--timeout=60s")
    gone = kubectl.run("get", "crontabs", check=False)
    assert gone.returncode != 0
    # kubectl's discovery cache may still name it: then the list itself is refused
    assert ("the server doesn't have a resource type" in gone.stderr
            or "the server could not find the requested resource" in gone.stderr)
    assert GROUP not in kubectl.run("api-versions").stdout


def test_custom_objects_api_crud_watch_and_crd_cleanup(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    api = kubernetes.client.CustomObjectsApi(k8s)
    body = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }
    ext.create_custom_resource_definition(body)
    wait_for(lambda: established(ext, "widgets.example.com"), what="Established")
    crd = ext.read_custom_resource_definition("widgets.example.com")
    assert crd.spec.names.singular == "widget" and crd.spec.names.list_kind == "WidgetList"

    obj = {"apiVersion": "example.com/v1alpha1", "kind": "Widget", "metadata": {"name": "w1"},
           "spec": {"size": 3}, "status": {"ignored": True}}
    created = api.create_namespaced_custom_object(GROUP_W, "v1alpha1", "default", "widgets", obj)
    assert "status" not in created  # the status subresource owns status
    rv = created["metadata"]["resourceVersion"]
    w = kubernetes.watch.Watch()
    stream = w.stream(api.list_namespaced_custom_object, GROUP_W, "v1alpha1", "default", "widgets",
                      resource_version=rv, timeout_seconds=30)
    api.patch_namespaced_custom_object_status(GROUP_W, "v1alpha1", "default", "widgets", "w1",
                                              {"status": {"ready": True}})
    event = next(stream)
    assert event["type"] == "MODIFIED" and event["object"]["status"] == {"ready": True}
    api.patch_namespaced_custom_object(GROUP_W, "v1alpha1", "default", "widgets", "w1", {"spec": {"size": 5}})
    event = next(stream)
    assert event["object"]["spec"] == {"size": 5} and event["object"]["metadata"]["generation"] == 2
    w.stop()
    listed = api.list_namespaced_custom_object(GROUP_W, "v1alpha1", "default", "widgets")
    assert listed["kind"] == "WidgetList" and [i["metadata"]["name"] for i in listed["items"]] == ["w1"]
    with pytest.raises(kubernetes.client.ApiException) as err:
        api.create_namespaced_custom_object(GROUP_W, "v1alpha1", "default", "widgets", obj)
    assert err.value.status == 409

    ext.delete_custom_resource_definition("widgets.example.com")

    def crd_gone() -> bool:
        try:
            ext.read_custom_resource_definition("widgets.example.com")
            return False
        except kubernetes.client.ApiException as e:
            return e.status == 404
    wait_for(crd_gone, what="the CRD to be deleted")
    with pytest.raises(kubernetes.client.ApiException) as err:
        api.get_namespaced_custom_object(GROUP_W, "v1alpha1", "default", "widgets", "w1")
    assert err.value.status == 404
    # re-creating the CRD finds no old objects
    ext.create_custom_resource_definition(body)
    wait_for(lambda: established(ext, "widgets.example.com"), what="Established again")
    assert api.list_namespaced_custom_object(GROUP_W, "v1alpha1", "default", "widgets")["items"] == []


GROUP_W = "example.com"


def test_deletecollection_and_label_selectors_on_custom_objects(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gizmos", "kind": "Gizmo"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    })
    wait_for(lambda: established(ext, "gizmos.example.com"), what="Established")
    api = kubernetes.client.CustomObjectsApi(k8s)
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        api.create_namespaced_custom_object("example.com", "v1", "default", "gizmos", {
            "apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": name, "labels": {"tier": tier}}})
    web = api.list_namespaced_custom_object("example.com", "v1", "default", "gizmos", label_selector="tier=web")
    assert sorted(i["metadata"]["name"] for i in web["items"]) == ["a", "c"]
    api.delete_collection_namespaced_custom_object("example.com", "v1", "default", "gizmos", label_selector="tier=web")
    left = api.list_namespaced_custom_object("example.com", "v1", "default", "gizmos")
    assert [i["metadata"]["name"] for i in left["items"]] == ["b"]
    everywhere = api.list_cluster_custom_object("example.com", "v1", "gizmos")
    assert [i["metadata"]["name"] for i in everywhere["items"]] == ["b"]
