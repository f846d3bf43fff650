"""``pods/NAME/ephemeralcontainers`` over HTTP with the official client: only
additions, upstream's field allow-list, unique names, an existing target, and
the main resource cannot change them."""

from __future__ import annotations

import json
import uuid
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

NS = "default"


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


def _pod(core: kubernetes.client.CoreV1Api) -> str:
    name = f"eph-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(NS, {"metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}})
    return name


def _patch(core: kubernetes.client.CoreV1Api, name: str, containers: list[dict[str, Any]]) -> Any:
    return core.patch_namespaced_pod_ephemeralcontainers(name, NS, {"spec": {"ephemeralContainers": containers}})


def _refused(core: kubernetes.client.CoreV1Api, name: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    with pytest.raises(ApiException) as err:
        _patch(core, name, containers)
    assert err.value.status == 422, err.value.body
    return json.loads(err.value.body)


def test_an_ephemeral_container_is_added_defaulted_and_read_back(core) -> None:
    name = _pod(core)
    out = _patch(core, name, [{"name": "debugger", "image": "busybox", "targetContainerName": "c",
                               "command": ["sh", "-c", "echo hi"]}])
    ec = out.spec.ephemeral_containers
    assert [e.name for e in ec] == ["debugger"] and ec[0].target_container_name == "c"
    assert ec[0].termination_message_path == "/dev/termination-log"  # defaulted as any container
    got = core.read_namespaced_pod_ephemeralcontainers(name, NS)
    assert [e.name for e in got.spec.ephemeral_containers] == ["debugger"]
    # a second one is another addition
    _patch(core, name, [{"name": "debugger", "image": "busybox", "targetContainerName": "c",
                         "command": ["sh", "-c", "echo hi"]}, {"name": "two", "image": "busybox"}])
    assert [e.name for e in core.read_namespaced_pod(name, NS).spec.ephemeral_containers] == ["debugger", "two"]
    # the write changed nothing else: the container list is the stored one
    assert [c.name for c in core.read_namespaced_pod(name, NS).spec.containers] == ["c"]


def test_existing_ephemeral_containers_may_be_neither_changed_nor_removed(core) -> None:
    name = _pod(core)
    _patch(core, name, [{"name": "dbg", "image": "busybox"}])
    pod = core.read_namespaced_pod_ephemeralcontainers(name, NS)
    pod.spec.ephemeral_containers[0].image = "alpine"
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_pod_ephemeralcontainers(name, NS, pod)
    assert err.value.status == 422 and 'existing ephemeral containers \\"dbg\\" may not be changed' in err.value.body
    pod = core.read_namespaced_pod_ephemeralcontainers(name, NS)
    pod.spec.ephemeral_containers = []
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_pod_ephemeralcontainers(name, NS, pod)
    assert err.value.status == 422 and "may not be removed" in err.value.body


def test_fields_names_and_targets_are_validated_as_upstream(core) -> None:
    name = _pod(core)
    body = _refused(core, name, [{"name": "dbg", "image": "busybox", "ports": [{"containerPort": 80}],
                                  "readinessProbe": {"exec": {"command": ["true"]}},
                                  "resources": {"limits": {"cpu": "1"}}}])
    fields = {c["field"]: c["message"] for c in body["details"]["causes"]}
    for f in ("ports", "readinessProbe", "resources"):
        assert fields[f"spec.ephemeralContainers[0].{f}"] == "Forbidden: cannot be set for an Ephemeral Container"
    body = _refused(core, name, [{"name": "c", "image": "busybox"}])
    assert any(c["field"] == "spec.ephemeralContainers[0].name" and c["reason"] == "FieldValueDuplicate"
               for c in body["details"]["causes"])
    body = _refused(core, name, [{"name": "dbg", "image": "busybox", "targetContainerName": "nope"}])
    assert body["details"]["causes"][0]["field"] == "spec.ephemeralContainers[0].targetContainerName"
    assert body["details"]["causes"][0]["message"] == 'Not found: "nope"'
    assert core.read_namespaced_pod(name, NS).spec.ephemeral_containers is None


def test_the_main_resource_cannot_add_ephemeral_containers(core) -> None:
    name = _pod(core)
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod(name, NS, {"spec": {"ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}})
    assert err.value.status == 422 and "pod updates may not change fields" in err.value.body


def test_discovery_lists_the_subresource(core) -> None:
    resources = {r.name: r for r in core.get_api_resources().resources}
    assert set(resources["pods/ephemeralcontainers"].verbs) == {"get", "patch", "update"}
