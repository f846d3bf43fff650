"""The volume manager lays out payload volumes on disk (files, modes, items, projections)."""

from __future__ import annotations

import base64
import os

import pytest

from k8py.kubelet.container_env import resource_value
from k8py.kubelet.volumes.manager import MountError, VolumeManager

OBJECTS = {
    ("configmap", "ns", "cfg"): {"data": {"a": "A", "b": "B"}},
    ("secret", "ns", "sec"): {"data": {"pw": base64.b64encode(b"s3cret").decode()}},
}


async def _get(kind: str, ns: str, name: str):  # type: ignore[no-untyped-def]
    return OBJECTS.get((kind, ns, name))


def _pod(volumes: list[dict]) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "x"}},
            "spec": {"volumes": volumes, "containers": [{"name": "c", "resources": {"limits": {"memory": "64Mi", "cpu": "500m"}}}]}}


async def test_configmap_items_secret_modes_and_projections_land_on_disk(tmp_path) -> None:
    vm = VolumeManager(str(tmp_path), get=_get, node_alloc=lambda: {"cpu": "2", "memory": "4Gi"})
    paths = await vm.setup(_pod([
        {"name": "items", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "sub/renamed", "mode": 0o600}]}},
        {"name": "sec", "secret": {"secretName": "sec", "defaultMode": 0o400}},
        {"name": "proj", "projected": {"sources": [
            {"configMap": {"name": "cfg"}},
            {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                                       {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}]}},
            {"serviceAccountToken": {"path": "token"}}]}},
        {"name": "opt", "configMap": {"name": "absent", "optional": True}},
        {"name": "scratch", "emptyDir": {}},
    ]), pod_ip="127.64.0.9", host_ip="127.0.0.1")
    assert open(os.path.join(paths["items"], "sub", "renamed")).read() == "A"
    assert oct(os.stat(os.path.join(paths["items"], "sub", "renamed")).st_mode & 0o777) == "0o600"
    assert not os.path.exists(os.path.join(paths["items"], "b"))
    assert open(os.path.join(paths["sec"], "pw")).read() == "s3cret" and oct(os.stat(os.path.join(paths["sec"], "pw")).st_mode & 0o777) == "0o400"
    proj = paths["proj"]
    assert sorted(e for e in os.listdir(proj) if not e.startswith("..")) == ["a", "b", "labels", "mem", "token"]
    assert open(os.path.join(proj, "labels")).read() == 'app="x"' and open(os.path.join(proj, "mem")).read() == "64"
    assert [e for e in os.listdir(paths["opt"]) if not e.startswith("..")] == []  # optional and absent: empty
    assert os.path.isdir(paths["scratch"])
    mounts = VolumeManager.mounts({"volumeMounts": [{"name": "sec", "mountPath": "/etc/sec", "readOnly": True},
                                                    {"name": "scratch", "mountPath": "/data", "subPath": "one"}]}, paths)
    assert (mounts[0].container_path, mounts[0].readonly) == ("/etc/sec", True)
    assert mounts[1].host_path == os.path.join(paths["scratch"], "one") and os.path.isdir(mounts[1].host_path)
    vm.cleanup("u1")
    assert not os.path.exists(vm.pod_dir("u1"))


async def test_a_missing_required_configmap_is_a_mount_error_with_upstreams_message(tmp_path) -> None:
    vm = VolumeManager(str(tmp_path), get=_get, node_alloc=dict)
    with pytest.raises(MountError) as err:
        await vm.setup(_pod([{"name": "cfg", "configMap": {"name": "absent"}}]), pod_ip="", host_ip="")
    assert str(err.value) == 'MountVolume.SetUp failed for volume "cfg" : configmap "absent" not found'


def test_resource_field_refs_round_up_by_divisor_and_default_to_node_allocatable() -> None:
    c = {"resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}
    assert resource_value(c, "limits.cpu", "1m", node_alloc={}) == "500"
    assert resource_value(c, "limits.cpu", None, node_alloc={}) == "1"
    assert resource_value({}, "limits.memory", "1Mi", node_alloc={"memory": "4Gi"}) == "4096"
