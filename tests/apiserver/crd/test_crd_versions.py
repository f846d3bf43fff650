"""Several versions of one CRD (conversion None): each served version reads
and writes the same stored objects, with its own apiVersion."""

from __future__ import annotations

import kubernetes
import pytest

from tests.apiserver.crd.test_crd_serving import established, wait_for

SCHEMA = {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}


def test_served_versions_share_the_storage_version(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [
                     {"name": "v1alpha1", "served": False, "storage": False, "schema": SCHEMA},
                     {"name": "v1beta1", "served": True, "storage": False, "schema": SCHEMA},
                     {"name": "v1", "served": True, "storage": True, "schema": SCHEMA},
                 ]},
    })
    wait_for(lambda: established(ext, "widgets.example.com"), what="Established")
    assert ext.read_custom_resource_definition("widgets.example.com").status.stored_versions == ["v1"]
    api = kubernetes.client.CustomObjectsApi(k8s)
    created = api.create_namespaced_custom_object(
        "example.com", "v1beta1", "default", "widgets",
        {"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}})
    assert created["apiVersion"] == "example.com/v1beta1"
    rv = created["metadata"]["resourceVersion"]

    as_v1 = api.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w")
    assert as_v1["apiVersion"] == "example.com/v1" and as_v1["spec"] == {"size": 1}
    listed = api.list_namespaced_custom_object("example.com", "v1beta1", "default", "widgets")
    assert [i["apiVersion"] for i in listed["items"]] == ["example.com/v1beta1"]

    w = kubernetes.watch.Watch()
    stream = w.stream(api.list_namespaced_custom_object, "example.com", "v1beta1", "default", "widgets",
                      resource_version=rv, timeout_seconds=30)
    api.patch_namespaced_custom_object("example.com", "v1", "default", "widgets", "w", {"spec": {"size": 2}})
    event = next(stream)
    w.stop()
    assert event["object"]["apiVersion"] == "example.com/v1beta1" and event["object"]["spec"] == {"size": 2}

    with pytest.raises(kubernetes.client.ApiException) as err:
        api.list_namespaced_custom_object("example.com", "v1alpha1", "default", "widgets")
    assert err.value.status == 404
    groups = {g.name: g for g in kubernetes.client.ApisApi(k8s).get_api_versions().groups}
    assert [v.version for v in groups["example.com"].versions] == ["v1", "v1beta1"]
    assert groups["example.com"].preferred_version.version == "v1"


def test_selectable_fields_filter_lists(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    schema = {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"color": {"type": "string"}}}}}}
    ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "shirts.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "shirts", "kind": "Shirt"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema,
                               "selectableFields": [{"jsonPath": ".spec.color"}]}]},
    })
    wait_for(lambda: established(ext, "shirts.example.com"), what="Established")
    api = kubernetes.client.CustomObjectsApi(k8s)
    for name, color in (("a", "red"), ("b", "blue"), ("c", "red")):
        api.create_namespaced_custom_object("example.com", "v1", "default", "shirts", {
            "apiVersion": "example.com/v1", "kind": "Shirt", "metadata": {"name": name}, "spec": {"color": color}})
    red = api.list_namespaced_custom_object("example.com", "v1", "default", "shirts", field_selector="spec.color=red")
    assert [i["metadata"]["name"] for i in red["items"]] == ["a", "c"]
    with pytest.raises(kubernetes.client.ApiException) as err:
        api.list_namespaced_custom_object("example.com", "v1", "default", "shirts", field_selector="spec.size=1")
    assert err.value.status == 400 and "field label not supported: spec.size" in err.value.body


def test_a_non_storage_version_fills_its_defaults_on_read(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    with_default = {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 5}}}}}}
    ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "boxes.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "boxes", "kind": "Box"},
                 "versions": [{"name": "v1beta1", "served": True, "storage": False, "schema": with_default},
                              {"name": "v1", "served": True, "storage": True, "schema": SCHEMA}]},
    })
    wait_for(lambda: established(ext, "boxes.example.com"), what="Established")
    api = kubernetes.client.CustomObjectsApi(k8s)
    api.create_namespaced_custom_object("example.com", "v1", "default", "boxes", {
        "apiVersion": "example.com/v1", "kind": "Box", "metadata": {"name": "b"}, "spec": {}})
    assert api.get_namespaced_custom_object("example.com", "v1", "default", "boxes", "b")["spec"] == {}
    assert api.get_namespaced_custom_object("example.com", "v1beta1", "default", "boxes", "b")["spec"] == {"size": 5}
    listed = api.list_namespaced_custom_object("example.com", "v1beta1", "default", "boxes")
    assert [i["spec"] for i in listed["items"]] == [{"size": 5}]
