"""A CRD created through one API server is served by another on the same etcd
(each server's registrar follows the CRD keys itself), and deleting it through
the second stops both."""

from __future__ import annotations

from typing import Any, Iterator

import kubernetes
import pytest

from tests.apiserver.crd.test_crd_serving import established, wait_for
from tests.support.etcd import etcd_installed, fresh_prefix, session_etcd
from tests.support.kube import official_client
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.etcd, pytest.mark.skipif(not etcd_installed(), reason="etcd not installed")]


@pytest.fixture
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    etcd = session_etcd()
    prefix = fresh_prefix()
    procs = [ServerProcess.on_etcd(str(tmp_path_factory.mktemp(name)), etcd.etcd_servers, prefix) for name in ("a", "b")]
    out = []
    try:
        for p in procs:
            p.start()
            out.append(official_client(p.url))
        yield out
    finally:
        for c in out:
            c.close()
        for p in procs:
            p.kill()


def test_a_crd_made_through_one_server_is_served_by_the_other(clients) -> None:
    a, b = clients
    kubernetes.client.ApiextensionsV1Api(a).create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    })
    ext_b = kubernetes.client.ApiextensionsV1Api(b)
    wait_for(lambda: established(ext_b, "widgets.example.com"), what="Established")
    api_a, api_b = kubernetes.client.CustomObjectsApi(a), kubernetes.client.CustomObjectsApi(b)

    def served_by_b() -> bool:
        try:
            api_b.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
            return True
        except kubernetes.client.ApiException:
            return False

    wait_for(served_by_b, what="server b to serve widgets")
    api_b.create_namespaced_custom_object("example.com", "v1", "default", "widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"x": 1}})
    got = wait_for(lambda: api_a.list_namespaced_custom_object("example.com", "v1", "default", "widgets")["items"],
                   what="server a to list it")
    assert [i["metadata"]["name"] for i in got] == ["w"]

    ext_b.delete_custom_resource_definition("widgets.example.com")

    def stopped(api) -> bool:
        try:
            api.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
            return False
        except kubernetes.client.ApiException as err:
            return err.status == 404

    wait_for(lambda: stopped(api_a) and stopped(api_b), what="both servers to stop serving widgets")
