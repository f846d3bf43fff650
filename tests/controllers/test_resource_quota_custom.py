"""Quota ``count/<plural>.<group>`` covers custom resources: admission charges
them and the resource-quota controller recounts them (through discovery)."""

from __future__ import annotations

from typing import Any

import pytest

from k8py.api.errors import StatusError
from k8py.client.resource import Resource
from k8py.client.resources import RESOURCE_QUOTAS
from k8py.controllers.context import ControllerOptions
from tests.controllers.conftest import eventually

GROUP = "quota.example.com"
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", False)
WIDGETS = Resource(GROUP, "v1", "widgets", True)
NAME = f"count/widgets.{GROUP}"


def widget(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "default"}}


async def _served(client: Any) -> bool:
    try:
        await client.list(WIDGETS, "default")
    except StatusError:
        return False
    return True


async def _used(client: Any, value: str) -> bool:
    status = (await client.get(RESOURCE_QUOTAS, "default", "widgets")).get("status") or {}
    return (status.get("used") or {}).get(NAME) == value


async def test_a_quota_counts_custom_resources(client, start_manager) -> None:
    await client.create(CRDS, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    await eventually(lambda: _served(client))
    await start_manager("resourcequota", options=ControllerOptions(extra={"resource_quota_sync_period": 0.2}))
    await client.create(RESOURCE_QUOTAS, {"apiVersion": "v1", "kind": "ResourceQuota",
                                          "metadata": {"name": "widgets", "namespace": "default"},
                                          "spec": {"hard": {NAME: "1"}}})
    await eventually(lambda: _used(client, "0"))
    await client.create(WIDGETS, widget("one"))
    with pytest.raises(StatusError) as err:
        await client.create(WIDGETS, widget("two"))
    assert err.value.code == 403
    assert err.value.message == (f'widgets.{GROUP} "two" is forbidden: exceeded quota: widgets, requested: '
                                 f"{NAME}=1, used: {NAME}=1, limited: {NAME}=1")
    await client.delete(WIDGETS, "default", "one")
    # the controller's recount of the custom resources gives the quota back
    await eventually(lambda: _used(client, "0"))
    await client.create(WIDGETS, widget("two"))
    await eventually(lambda: _used(client, "1"))
