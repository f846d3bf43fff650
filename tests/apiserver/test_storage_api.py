"""storage.k8s.io/v1 is served as upstream serves it: kubectl resolves its kinds by name and
short name, the official client creates a namespaced CSIStorageCapacity, and a StorageClass is
defaulted on create and refuses a change to its provisioner."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.kube import Kubectl

pytestmark = pytest.mark.kubectl


def test_kubectl_discovers_the_storage_kinds(kubectl: Kubectl) -> None:
    out = kubectl.run("api-resources", "--api-group=storage.k8s.io", "-o", "wide").stdout
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(rows) == {"csidrivers", "csinodes", "csistoragecapacities", "storageclasses", "volumeattachments"}
    assert rows["storageclasses"].split()[1] == "sc"
    assert " true " in rows["csistoragecapacities"] and " false " in rows["storageclasses"]


def test_a_storage_class_is_defaulted_and_its_provisioner_is_immutable(kubectl: Kubectl) -> None:
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
          "provisioner": "example.com/fast"}
    kubectl.run("create", "-f", "-", input=json.dumps(sc))
    got = json.loads(kubectl.run("get", "sc", "fast", "-o", "json").stdout)
    assert (got["reclaimPolicy"], got["volumeBindingMode"]) == ("Delete", "Immediate")
    changed = kubectl.run("patch", "sc", "fast", "--type=merge", "-p", '{"provisioner":"example.com/slow"}', check=False)
    assert changed.returncode != 0 and "provisioner" in changed.stderr
    missing = kubectl.run("create", "-f", "-", check=False,
                          input=json.dumps({**sc, "metadata": {"name": "none"}, "provisioner": ""}))
    assert missing.returncode != 0 and "provisioner: Required value" in missing.stderr


def test_the_official_client_writes_a_csi_storage_capacity(k8s) -> None:
    api = client.StorageV1Api(k8s)
    body = client.V1CSIStorageCapacity(metadata=client.V1ObjectMeta(name="cap"), storage_class_name="fast",
                                       capacity="10Gi")
    api.create_namespaced_csi_storage_capacity("default", body)
    got = api.read_namespaced_csi_storage_capacity("cap", "default")
    assert (got.storage_class_name, got.capacity) == ("fast", "10Gi")
    with pytest.raises(ApiException) as err:
        api.patch_namespaced_csi_storage_capacity("cap", "default", {"storageClassName": "slow"})
    assert err.value.status == 422
    assert [c.metadata.name for c in api.list_csi_storage_capacity_for_all_namespaces().items] == ["cap"]
