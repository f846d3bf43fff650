"""ResourceQuota (admission + the resource-quota controller) and LimitRange
(LimitRanger) against a real API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from k8py.api.errors import StatusError
from k8py.client.resources import CONFIGMAPS, LIMIT_RANGES, PODS, RESOURCE_QUOTAS
from tests.controllers.conftest import eventually
from tests.support.kube import Kubectl


def _pod(name: str, cpu: str | None = "300m", limit: str | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if cpu:
        resources["requests"] = {"cpu": cpu}
    if limit:
        resources["limits"] = {"cpu": limit}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}}


async def _used(client: Any, name: str, **want: str) -> Any:
    status = (await client.get(RESOURCE_QUOTAS, "default", name)).get("status") or {}
    used = status.get("used") or {}
    return status if status.get("hard") and all(used.get(k.replace("_", ".")) == v for k, v in want.items()) else None


async def test_quota_usage_is_kept_and_a_create_over_quota_is_forbidden(client, start_manager):
    await start_manager("resourcequota")
    await client.create(RESOURCE_QUOTAS, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": "default"},
                                          "spec": {"hard": {"pods": "2", "requests.cpu": "1", "count/configmaps": "1"}}})
    await eventually(lambda: _used(client, "compute", pods="0", requests_cpu="0"))

    with pytest.raises(StatusError) as err:
        await client.create(PODS, _pod("bare", cpu=None))
    assert err.value.code == 403
    assert err.value.message == 'pods "bare" is forbidden: failed quota: compute: must specify requests.cpu'

    await client.create(PODS, _pod("a"))
    await client.create(PODS, _pod("b"))
    with pytest.raises(StatusError) as err:
        await client.create(PODS, _pod("c"))
    assert err.value.code == 403 and err.value.to_dict()["reason"] == "Forbidden"
    assert err.value.message == ('pods "c" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=2, limited: pods=2')
    await eventually(lambda: _used(client, "compute", pods="2", requests_cpu="600m"))

    await client.delete(PODS, "default", "a", grace_period_seconds=0)
    await eventually(lambda: _used(client, "compute", pods="1", requests_cpu="300m"))
    with pytest.raises(StatusError) as err:
        await client.create(PODS, _pod("big", cpu="800m"))
    assert err.value.message == ('pods "big" is forbidden: exceeded quota: compute, requested: requests.cpu=800m, '
                                 'used: requests.cpu=300m, limited: requests.cpu=1')
    await client.create(PODS, _pod("c"))

    await client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one", "namespace": "default"}})
    with pytest.raises(StatusError) as err:
        await client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "two", "namespace": "default"}})
    assert "exceeded quota: compute, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1" in err.value.message
    await eventually(lambda: _used(client, "compute", **{"count/configmaps": "1"}))
    await client.delete(CONFIGMAPS, "default", "one")
    await eventually(lambda: _used(client, "compute", **{"count/configmaps": "0"}))
    await client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "two", "namespace": "default"}})


async def test_kubectl_create_quota_and_get_it(client, server, start_manager, tmp_path):
    await start_manager("resourcequota")
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    out = (await asyncio.to_thread(kubectl.run, "create", "quota", "small", "--hard=pods=3,limits.cpu=2")).stdout
    assert "resourcequota/small created" in out
    await eventually(lambda: _used(client, "small", pods="0"))
    table = (await asyncio.to_thread(kubectl.run, "get", "quota")).stdout.splitlines()
    assert table[0].split() == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert "pods: 0/3" in table[1] and "limits.cpu: 0/2" in table[1]


async def test_limit_range_defaults_and_bounds(client):
    lr = await client.create(LIMIT_RANGES, {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "cpu", "namespace": "default"},
                                            "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "defaultRequest": {"cpu": "200m"}}]}})
    assert lr["spec"]["limits"][0]["default"] == {"cpu": "1"}  # defaulted from max, as upstream
    pod = await client.create(PODS, _pod("plain", cpu=None))
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "200m"}}
    with pytest.raises(StatusError) as err:
        await client.create(PODS, _pod("greedy", cpu="500m", limit="2"))
    assert err.value.code == 403
    assert err.value.message == 'pods "greedy" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
