"""SeriesEventBroadcaster / SeriesEventRecorder: events.k8s.io/v1 Events with ``series``.

Against a real API server: a repeat becomes a series, written at the first
repeat, then on refresh and finish. With a stand-in client whose writes wait
until released: the writes' order, concurrency, rate and the one bound on
those waiting.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from k8py.client.clock import FakeClock
from k8py.client.event_series import SeriesEventBroadcaster
from k8py.client.rate_limiters import BucketRateLimiter
from k8py.client.resources import CONFIGMAPS, EVENTS
from tests.client.conftest import configmap


@pytest.fixture
async def cm(client) -> dict:
    return await client.create(CONFIGMAPS, configmap("app-config", a="1"))


async def stop(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.wait({task})


def ref_obj(name: str = "x") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "uid": "u1"}}


async def test_events_v1_repeats_become_a_series_written_at_first_repeat_then_on_refresh_and_finish(client, cm):

    clock = FakeClock()
    broadcaster = SeriesEventBroadcaster(client, clock=clock)
    recorder = broadcaster.new_recorder("mirror-controller", reporting_instance="mirror-1")
    task = asyncio.create_task(broadcaster.run(), name="series-broadcaster")

    async def the_event() -> dict:
        [event] = (await client.list(EVENTS, "default", field_selector="regarding.name=app-config"))["items"]
        return event

    try:
        recorder.eventf(cm, None, "Warning", "SyncFailed", "Sync", "attempt %d", 1, resource=CONFIGMAPS)
        await broadcaster.flush()
        first = await the_event()
        assert "series" not in first or first["series"] is None
        assert (first["reportingController"], first["reportingInstance"], first["action"]) == ("mirror-controller", "mirror-1", "Sync")
        assert first["regarding"]["uid"] == cm["metadata"]["uid"]
        for _ in range(4):
            clock.advance(1)
            recorder.eventf(cm, None, "Warning", "SyncFailed", "Sync", "attempt again", resource=CONFIGMAPS)
        await broadcaster.flush()
        assert broadcaster.writes == 2  # the event, then the first repeat; later repeats stay local
        assert (await the_event())["series"]["count"] == 2
        await clock.step(2 * 6 * 60)  # the second finish pass finds it quiet for > 6 min: written one last time
        for _ in range(200):  # the write itself is real I/O
            final = await the_event()
            if final["series"]["count"] != 2:
                break
            await asyncio.sleep(0.01)
        assert final["series"]["count"] == 5
        assert final["series"]["lastObservedTime"] == "2025-01-01T00:00:04.000000Z"
        assert final["metadata"]["name"] == first["metadata"]["name"]
    finally:
        await stop(task)


async def test_a_full_series_queue_drops_events_with_one_warning_per_thousand(caplog):

    broadcaster = SeriesEventBroadcaster(None, queue_size=1)  # type: ignore[arg-type] - never runs: nothing is written
    recorder = broadcaster.new_recorder("c", reporting_instance="c-1")
    with caplog.at_level(logging.WARNING, logger="k8py.client.event_series"):
        for i in range(2002):
            recorder.eventf(ref_obj(f"x{i}"), None, "Normal", "Scheduled", "Binding", "m")
    assert broadcaster.dropped == 2001
    assert caplog.text.count("dropping event: too many queued events") == 3  # drops 1, 1001 and 2001


async def test_a_series_broadcaster_with_a_limiter_writes_a_burst_then_at_its_rate(client):

    clock = FakeClock()
    broadcaster = SeriesEventBroadcaster(client, clock=clock, limiter=BucketRateLimiter(1.0, 2, clock=clock))
    recorder = broadcaster.new_recorder("c", reporting_instance="c-1")
    task = asyncio.create_task(broadcaster.run(), name="series-broadcaster")

    async def writes_reach(n: int) -> None:
        for _ in range(6000):  # the writes are real I/O (up to a minute on a loaded machine)
            if broadcaster.writes >= n and clock.sleepers() > 2:  # 2 = the refresh and finish timers
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{broadcaster.writes} writes, wanted {n}")

    try:
        for i in range(4):
            recorder.eventf(ref_obj(f"x{i}"), None, "Normal", "Scheduled", "Binding", "m")
        await writes_reach(2)  # the burst, then the third waits for a token
        assert broadcaster.writes == 2
        await clock.step(1)
        await writes_reach(3)
        assert broadcaster.writes == 3
        await clock.step(1)
        await broadcaster.flush()
        assert broadcaster.writes == 4
    finally:
        await stop(task)


class GatedEventsClient:
    """A stand-in for the REST client whose writes wait until released, so a
    test can see how many are in flight at once (a real API server answers
    too fast to catch them in flight)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls: list[tuple[str, str, int]] = []  # (verb, regarding name, series count)
        self.regarding: dict[str, str] = {}  # Event name -> the name of the object it is about
        self.log: list[str] = []

    async def _call(self, verb: str, name: str, count: int) -> dict:
        self.log.append(f"start {verb} {name}")
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.release.wait()
            await asyncio.sleep(0)  # writes started together end interleaved
            self.calls.append((verb, name, count))
            self.log.append(f"end {verb} {name}")
            return {}
        finally:
            self.in_flight -= 1

    async def create(self, resource, event, *, namespace=None) -> dict:
        self.regarding[event["metadata"]["name"]] = event["regarding"]["name"]
        return await self._call("create", event["regarding"]["name"], (event.get("series") or {}).get("count", 1))

    async def patch(self, resource, namespace, name, patch, *, patch_type=None) -> dict:
        return await self._call("patch", self.regarding[name], patch["series"]["count"])


async def test_series_events_are_written_concurrently_and_a_repeat_waits_for_its_create():

    client = GatedEventsClient()
    broadcaster = SeriesEventBroadcaster(client, max_in_flight=4)  # type: ignore[arg-type]
    recorder = broadcaster.new_recorder("c", reporting_instance="c-1")
    task = asyncio.create_task(broadcaster.run(), name="series-broadcaster")
    try:
        recorder.eventf(ref_obj("x0"), None, "Normal", "Scheduled", "Binding", "m")
        recorder.eventf(ref_obj("x0"), None, "Normal", "Scheduled", "Binding", "m")  # x0's first repeat: a PATCH
        for i in range(1, 6):
            recorder.eventf(ref_obj(f"x{i}"), None, "Normal", "Scheduled", "Binding", "m")
        for _ in range(500):
            if client.in_flight == 3:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        # four slots: x0's create, x1 and x2 in flight; x0's patch holds the fourth, waiting for the create
        assert client.in_flight == 3 and client.calls == []
        client.release.set()
        await asyncio.wait_for(broadcaster.flush(), 10)
        assert client.most_in_flight <= 4 and broadcaster.writes == 7
        assert [c for c in client.calls if c[1] == "x0"] == [("create", "x0", 1), ("patch", "x0", 2)]
        assert client.log.index("start patch x0") > client.log.index("end create x0")  # not sent before it
    finally:
        await stop(task)


async def test_series_writes_are_not_capped_so_a_slow_server_drops_nothing():
    """As upstream's goroutine per event: with every write waiting on a slow API server, the
    queue keeps draining into writes, so a flood far larger than the queue loses no event."""

    client = GatedEventsClient()
    broadcaster = SeriesEventBroadcaster(client, queue_size=50)  # type: ignore[arg-type]
    recorder = broadcaster.new_recorder("c", reporting_instance="c-1")
    task = asyncio.create_task(broadcaster.run(), name="series-broadcaster")
    try:
        for i in range(500):
            recorder.eventf(ref_obj(f"x{i}"), None, "Normal", "Scheduled", "Binding", "m")
            if i % 25 == 24:
                await asyncio.sleep(0)  # the recorder's caller yields now and then, as a scheduler does
        for _ in range(500):
            if client.in_flight == 500:
                break
            await asyncio.sleep(0.01)
        assert client.in_flight == 500 and broadcaster.dropped == 0
        client.release.set()
        await asyncio.wait_for(broadcaster.flush(), 10)
        assert broadcaster.writes == 500 and len({c[1] for c in client.calls}) == 500
    finally:
        await stop(task)


async def test_series_writes_waiting_past_max_pending_are_dropped():
    """The one bound on waiting writes: past ``max_pending`` an event is dropped (and counted)."""

    client = GatedEventsClient()
    broadcaster = SeriesEventBroadcaster(client, max_in_flight=2, max_pending=10)  # type: ignore[arg-type]
    recorder = broadcaster.new_recorder("c", reporting_instance="c-1")
    task = asyncio.create_task(broadcaster.run(), name="series-broadcaster")
    try:
        for i in range(30):
            recorder.eventf(ref_obj(f"x{i}"), None, "Normal", "Scheduled", "Binding", "m")
            await asyncio.sleep(0)
        for _ in range(500):
            if broadcaster.dropped + 13 == 30:
                break
            await asyncio.sleep(0.01)
        # 2 in flight, the dispatcher holding the next for a slot, 10 waiting: the rest dropped
        assert (client.in_flight, broadcaster.dropped) == (2, 17)
        client.release.set()
        await asyncio.wait_for(broadcaster.flush(), 10)
        assert broadcaster.writes == 13
    finally:
        await stop(task)
