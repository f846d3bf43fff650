"""The binding cycle against a real API server: a failed bind is undone and retried;
Permit can hold a pod until allowed."""

from __future__ import annotations

import pytest

from k8py.client.resources import PODS
from k8py.scheduler.framework.status import Code, Status
from k8py.scheduler.plugins import REGISTRY
from k8py.scheduler.plugins.default_binder import DefaultBinder
from k8py.scheduler.profile import parse_config
from tests.scheduler.conftest import create_nodes, eventually, node, node_of, pod, running_scheduler, wait_bound


class FlakyBinder(DefaultBinder):
    """Fails the first bind of every pod, then binds as DefaultBinder does."""

    name = "FlakyBinder"
    seen: set[str] = set()
    unreserved: list[str] = []

    async def bind(self, state, pod, node_name):
        if pod.key not in self.seen:
            self.seen.add(pod.key)
            return Status(Code.ERROR, ("injected bind failure",))
        return await super().bind(state, pod, node_name)

    def reserve(self, state, pod, node_name):
        return None

    def unreserve(self, state, pod, node_name):
        self.unreserved.append(pod.key)


class HoldingPermit:
    """Holds every pod at Permit until the test allows it."""

    name = "HoldingPermit"

    def __init__(self, args=None, handle=None):
        pass

    def permit(self, state, pod, node_name):
        return Status(Code.WAIT), 60.0


@pytest.fixture
def extra_plugins():
    REGISTRY["FlakyBinder"] = FlakyBinder
    REGISTRY["HoldingPermit"] = HoldingPermit
    FlakyBinder.seen = set()
    FlakyBinder.unreserved = []
    yield
    REGISTRY.pop("FlakyBinder")
    REGISTRY.pop("HoldingPermit")


async def test_a_failed_bind_is_unreserved_forgotten_and_retried(client, extra_plugins):
    config = parse_config({"podInitialBackoffSeconds": 0.1, "podMaxBackoffSeconds": 0.2, "profiles": [{"plugins": {
        "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "FlakyBinder"}]},
        "reserve": {"enabled": [{"name": "FlakyBinder"}]}}}]})
    await create_nodes(client, node("n1"))
    async with running_scheduler(client, config) as scheduler:
        await client.create(PODS, pod("p", cpu="1"))
        assert await wait_bound(client, "p") == "n1"
        assert FlakyBinder.unreserved == ["default/p"]
        assert not scheduler.cache.is_assumed("default/p") or await node_of(client, "p") == "n1"
        # the first (failed) attempt was counted as an error with its message
        text = scheduler.metrics.render().decode()
        assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="error"} 1.0' in text
        assert scheduler.cache.node("n1").requested.milli_cpu == 1000  # counted once, not twice


async def test_permit_wait_holds_the_pod_until_allowed(client, extra_plugins):
    config = parse_config({"profiles": [{"plugins": {"permit": {"enabled": [{"name": "HoldingPermit"}]}}}]})
    await create_nodes(client, node("n1"))
    async with running_scheduler(client, config) as scheduler:
        created = await client.create(PODS, pod("held"))
        waiting = await eventually(lambda: scheduler.waiting_pods.get(created["metadata"]["uid"]))
        assert await node_of(client, "held") == ""
        assert scheduler.cache.is_assumed("default/held")  # its resources are already taken
        waiting.allow("HoldingPermit")
        assert await wait_bound(client, "held") == "n1"
