"""Discovery over its narrow ``JSONGetter`` seam, against a real API server.

The getter here is the real REST client with a counter in front, so the
tests see how many discovery requests reach the server; the clock is a
:class:`FakeClock`, so the cache's lifetime is exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from k8py.api.errors import NotFound
from k8py.client.clock import FakeClock
from k8py.client.discovery import Discovery, JSONGetter
from k8py.client.resources import PODS
from k8py.client.rest import RestClient


class CountingGetter:
    def __init__(self, client: RestClient) -> None:
        self.client = client
        self.paths: list[str] = []

    async def request_json(self, method: str, path: str) -> Any:
        self.paths.append(path)
        return await self.client.request_json(method, path)


def _discovery(client: RestClient, clock: FakeClock, ttl: float = 600.0) -> tuple[Discovery, CountingGetter]:
    getter = CountingGetter(client)
    seam: JSONGetter = getter  # the protocol is all discovery needs
    return Discovery(seam, ttl=ttl, clock=clock), getter


async def test_the_walk_covers_every_group_version_and_is_cached_for_the_ttl(client):
    clock = FakeClock()
    discovery, getter = _discovery(client, clock, ttl=60.0)
    infos = await discovery.server_resources()
    assert getter.paths[:2] == ["/api", "/apis"]
    assert "/api/v1" in getter.paths and "/apis/apps/v1" in getter.paths
    walked = len(getter.paths)
    pods = next(i for i in infos if i.resource == PODS)
    assert "po" in pods.short_names and "status" in pods.subresources and "binding" in pods.subresources
    assert not any("/" in i.resource.plural for i in infos)  # subresources are not resources

    clock.advance(59.0)
    assert await discovery.server_resources() is infos
    assert len(getter.paths) == walked
    clock.advance(2.0)
    await discovery.server_resources()
    assert len(getter.paths) == 2 * walked


async def test_a_lookup_miss_refreshes_once_then_is_not_found(client):
    clock = FakeClock()
    discovery, getter = _discovery(client, clock)
    assert await discovery.resource_for("pod") == PODS
    walked = len(getter.paths)
    assert await discovery.resource_for("Pod") == PODS  # from the cache
    assert len(getter.paths) == walked
    with pytest.raises(NotFound) as info:
        await discovery.resource_for("widgets")
    assert info.value.message == 'the server doesn\'t have a resource type "widgets"'
    assert len(getter.paths) == 2 * walked  # exactly one refresh


async def test_group_qualified_names_pick_the_group(client):
    discovery, _ = _discovery(client, FakeClock())
    deployments = await discovery.resource_for("deployments.apps")
    assert (deployments.group, deployments.kind) == ("apps", "Deployment")
    assert (await discovery.resource_for("deploy", group="apps")) == deployments
    with pytest.raises(NotFound):
        await discovery.resource_for("deployments", group="batch")
