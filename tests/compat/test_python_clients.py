"""The popular Python clients work unchanged against k8py: lightkube, kr8s and
kubernetes_asyncio (each with its own HTTP stack, parameter spelling and watch
parsing; see shared/reference/client-behaviours.md)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.support.kube import Kubectl


@pytest.fixture
def kubeconfig(kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("KUBECONFIG", kubectl.kubeconfig)
    return kubectl.kubeconfig


def test_lightkube_creates_patches_lists_and_watches(kubeconfig: str) -> None:
    from lightkube import Client
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import ConfigMap

    client = Client()
    client.create(ConfigMap(metadata=ObjectMeta(name="lk"), data={"a": "b"}))
    client.patch(ConfigMap, "lk", {"data": {"c": "d"}})  # strategic merge, lightkube's default
    assert client.get(ConfigMap, "lk").data == {"a": "b", "c": "d"}
    assert [cm.metadata.name for cm in client.list(ConfigMap, namespace="default")] == ["lk"]

    seen: list[tuple[str, str]] = []
    start = client.get(ConfigMap, "lk").metadata.resourceVersion

    def watch() -> None:
        for op, obj in client.watch(ConfigMap, namespace="default", resource_version=start):
            seen.append((op, obj.metadata.name))
            return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    client.create(ConfigMap(metadata=ObjectMeta(name="lk2")))
    thread.join(10)
    assert seen == [("ADDED", "lk2")]


def test_kr8s_reads_version_creates_patches_and_deletes(kubeconfig: str) -> None:
    import kr8s

    api = kr8s.api(kubeconfig=kubeconfig)
    assert api.version()["gitVersion"].startswith("v1.32.")
    cm = kr8s.objects.ConfigMap(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kr", "namespace": "default"}, "data": {"x": "1"}},
        api=api,
    )
    cm.create()
    cm.patch({"data": {"y": "2"}})  # merge patch, kr8s's default
    cm.refresh()
    assert cm.raw["data"] == {"x": "1", "y": "2"}
    assert "kr" in [o.name for o in kr8s.get("configmaps", namespace="default", api=api)]
    cm.delete()
    assert "kr" not in [o.name for o in kr8s.get("configmaps", namespace="default", api=api)]


def test_kubernetes_asyncio_watch_streams_changes(kubeconfig: str) -> None:
    async def run() -> list[tuple[str, str]]:
        from kubernetes_asyncio import client, config, watch

        await config.load_kube_config(config_file=kubeconfig)
        async with client.ApiClient() as api:
            v1 = client.CoreV1Api(api)
            listed = await v1.list_namespaced_config_map("default")
            events: list[tuple[str, str]] = []

            async def writer() -> None:
                await asyncio.sleep(0.3)
                await v1.create_namespaced_config_map("default", {"metadata": {"name": "ka"}})
                await v1.delete_namespaced_config_map("ka", "default")

            task = asyncio.create_task(writer())
            stream = watch.Watch().stream(
                v1.list_namespaced_config_map,
                "default",
                resource_version=listed.metadata.resource_version,
                timeout_seconds=2,
            )
            async for event in stream:
                events.append((event["type"], event["object"].metadata.name))
            await task
            return events

    assert asyncio.run(run()) == [("ADDED", "ka"), ("DELETED", "ka")]
