"""CRD lifecycle: validation of the CRD itself, name conflicts, serving after a restart."""

from __future__ import annotations

import copy
import json

import kubernetes
import pytest

from tests.apiserver.crd.test_crd_serving import established, wait_for
from tests.support.kube import official_client
from tests.support.servers import ServerThread, sqlite_storage

SCHEMA = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}


def crd(plural: str, kind: str, group: str = "example.com", scope: str = "Namespaced") -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": scope, "names": {"plural": plural, "kind": kind},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": SCHEMA}]},
    }


def test_an_invalid_crd_is_refused_with_field_causes(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    body = crd("widgets", "Widget", scope="Global")
    body["metadata"]["name"] = "wrong.example.com"
    body["spec"]["versions"][0]["storage"] = False
    with pytest.raises(kubernetes.client.ApiException) as err:
        ext.create_custom_resource_definition(body)
    assert err.value.status == 422
    causes = {c["field"]: c["message"] for c in json.loads(err.value.body)["details"]["causes"]}
    assert causes["metadata.name"] == 'Invalid value: "wrong.example.com": must be spec.names.plural+"."+spec.group'
    assert causes["spec.scope"] == 'Unsupported value: "Global": supported values: "Cluster", "Namespaced"'
    assert causes["spec.versions"].endswith("must have exactly one version marked as storage version")
    with pytest.raises(kubernetes.client.ApiException) as err:
        ext.create_custom_resource_definition(crd("things", "Thing", group="nodots"))
    assert "should be a domain with at least one dot" in err.value.body


def test_a_kind_already_in_use_in_the_group_is_not_accepted(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    ext.create_custom_resource_definition(crd("widgets", "Widget"))
    wait_for(lambda: established(ext, "widgets.example.com"), what="the first CRD")
    ext.create_custom_resource_definition(crd("gadgets", "Widget"))

    def rejected():
        conditions = {c.type: c for c in ext.read_custom_resource_definition("gadgets.example.com").status.conditions or []}
        return conditions if "NamesAccepted" in conditions else None

    conditions = wait_for(rejected, what="the conflict to be reported")
    assert (conditions["NamesAccepted"].status, conditions["NamesAccepted"].reason) == ("False", "KindConflict")
    assert conditions["NamesAccepted"].message == '"Widget" is already in use'
    assert (conditions["Established"].status, conditions["Established"].reason) == ("False", "NotAccepted")
    api = kubernetes.client.CustomObjectsApi(k8s)
    with pytest.raises(kubernetes.client.ApiException) as err:
        api.list_namespaced_custom_object("example.com", "v1", "default", "gadgets")
    assert err.value.status == 404


def test_custom_resources_are_served_again_after_a_restart(tmp_path) -> None:
    factory = sqlite_storage(str(tmp_path / "data"))
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": 1}}
    with ServerThread(factory) as server:
        client = official_client(server.url)
        ext = kubernetes.client.ApiextensionsV1Api(client)
        ext.create_custom_resource_definition(crd("widgets", "Widget", scope="Cluster"))
        wait_for(lambda: established(ext, "widgets.example.com"), what="Established")
        kubernetes.client.CustomObjectsApi(client).create_cluster_custom_object("example.com", "v1", "widgets", copy.deepcopy(obj))
        client.close()
    with ServerThread(factory) as server:
        client = official_client(server.url)
        # ready means served: no waiting for the CRD after a restart
        got = kubernetes.client.CustomObjectsApi(client).get_cluster_custom_object("example.com", "v1", "widgets", "w")
        assert got["spec"] == {"a": 1}
        client.close()


def test_a_schema_that_is_not_structural_is_refused(k8s) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    body = crd("widgets", "Widget")
    body["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"properties": {"size": {"type": "integer"}, "any": {"x-kubernetes-int-or-string": True}}}}}}
    with pytest.raises(kubernetes.client.ApiException) as err:
        ext.create_custom_resource_definition(body)
    assert err.value.status == 422
    causes = {c["field"]: c["message"] for c in json.loads(err.value.body)["details"]["causes"]}
    assert causes == {"spec.versions[0].schema.openAPIV3Schema.properties[spec].type":
                      "Required value: must not be empty for specified object fields"}
