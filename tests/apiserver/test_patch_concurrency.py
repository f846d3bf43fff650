"""Concurrent writers that pin no resourceVersion never see a 409.

Upstream's patch handler (and GuaranteedUpdate under it) re-reads the object
and re-applies the patch when a concurrent write wins the race; only a
resourceVersion the client pinned (in the patch body, or in a PUT body) turns
the race into a Conflict. Controllers depend on it: a ``kubectl scale`` or a
merge patch of ``spec.replicas`` racing the controller's status writes must
land.
"""

from __future__ import annotations

import concurrent.futures

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

NS = "default"
WRITERS = 8
PATCHES_EACH = 15


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


def test_concurrent_merge_patches_without_a_resource_version_all_land(core) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "race"}, "data": {}})

    def writer(w: int) -> list[int]:
        statuses = []
        for i in range(PATCHES_EACH):
            try:
                core.patch_namespaced_config_map("race", NS, {"data": {f"w{w}-{i}": "x"}})
                statuses.append(200)
            except ApiException as err:
                statuses.append(err.status)
        return statuses

    with concurrent.futures.ThreadPoolExecutor(WRITERS) as pool:
        results = [s for statuses in pool.map(writer, range(WRITERS)) for s in statuses]
    assert results == [200] * (WRITERS * PATCHES_EACH)
    data = core.read_namespaced_config_map("race", NS).data
    assert len(data) == WRITERS * PATCHES_EACH  # no write lost


def test_a_patch_that_pins_a_stale_resource_version_is_a_conflict(core) -> None:
    created = core.create_namespaced_config_map(NS, {"metadata": {"name": "pinned"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("pinned", NS, {"data": {"a": "2"}})
    stale = created.metadata.resource_version
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("pinned", NS, {"metadata": {"resourceVersion": stale}, "data": {"a": "3"}})
    assert err.value.status == 409
    assert core.read_namespaced_config_map("pinned", NS).data == {"a": "2"}


def test_a_put_that_pins_a_stale_resource_version_is_a_conflict(core) -> None:
    created = core.create_namespaced_config_map(NS, {"metadata": {"name": "put"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("put", NS, {"data": {"a": "2"}})
    body = {"metadata": {"name": "put", "resourceVersion": created.metadata.resource_version}, "data": {"a": "3"}}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("put", NS, body)
    assert err.value.status == 409
