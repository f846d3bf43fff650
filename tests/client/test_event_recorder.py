"""EventRecorder / EventBroadcaster / EventCorrelator.

Against a real API server: written Events, dedup into one Event's ``count``,
aggregation after 10 similar events, the spam filter, ``kubectl describe``.
Pure correlator and queue behaviour with a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest

from k8py.api.errors import Invalid
from k8py.client.clock import FakeClock
from k8py.client.event_correlator import COMBINED_PREFIX, CorrelatorOptions, EventCorrelator
from k8py.client.event_recorder import EventBroadcaster, object_reference
from k8py.client.resources import CONFIGMAPS, CORE_EVENTS
from k8py.client.transport import TransportError
from tests.client.conftest import configmap


@pytest.fixture
async def cm(client) -> dict:
    return await client.create(CONFIGMAPS, configmap("app-config", a="1"))


async def running(broadcaster: EventBroadcaster) -> asyncio.Task:
    return asyncio.create_task(broadcaster.run(), name="event-broadcaster")


async def stop(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.wait({task})


async def events_of(client, name: str) -> list[dict[str, Any]]:
    listed = await client.list(CORE_EVENTS, "default", field_selector=f"involvedObject.name={name}")
    return sorted(listed["items"], key=lambda e: e["metadata"]["name"])


# -- against a real API server ---------------------------------------------------------------------


async def test_an_event_carries_the_objects_reference_source_and_timestamps(client, cm):
    broadcaster = EventBroadcaster(client)
    recorder = broadcaster.new_recorder("mirror-controller", host="node-1")
    task = await running(broadcaster)
    try:
        recorder.eventf(cm, "Normal", "Mirrored", "mirrored to %s/%s", "default", "app-config-mirror", resource=CONFIGMAPS)
        await broadcaster.flush()
    finally:
        await stop(task)
    [event] = await events_of(client, "app-config")
    assert re.fullmatch(r"app-config\.[0-9a-f]{16,}", event["metadata"]["name"])
    assert event["involvedObject"] == {
        "kind": "ConfigMap", "apiVersion": "v1", "namespace": "default", "name": "app-config",
        "uid": cm["metadata"]["uid"], "resourceVersion": cm["metadata"]["resourceVersion"],
    }
    assert event["source"] == {"component": "mirror-controller", "host": "node-1"}
    assert (event["type"], event["reason"], event["message"]) == ("Normal", "Mirrored", "mirrored to default/app-config-mirror")
    assert event["count"] == 1 and event["firstTimestamp"] == event["lastTimestamp"]


async def test_an_identical_event_increments_count_on_the_same_event(client, cm):
    clock = FakeClock()
    broadcaster = EventBroadcaster(client, clock=clock)
    recorder = broadcaster.new_recorder("mirror-controller")
    task = await running(broadcaster)
    try:
        for _ in range(3):
            recorder.event(cm, "Warning", "SyncFailed", "target exists", resource=CONFIGMAPS)
            await broadcaster.flush()
            clock.advance(7)
    finally:
        await stop(task)
    [event] = await events_of(client, "app-config")
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2025-01-01T00:00:00Z"
    assert event["lastTimestamp"] == "2025-01-01T00:00:14Z"
    assert broadcaster.written == 3


async def test_ten_similar_events_are_combined_into_one(client, cm):
    broadcaster = EventBroadcaster(client)
    recorder = broadcaster.new_recorder("mirror-controller")
    task = await running(broadcaster)
    try:
        for i in range(12):
            recorder.event(cm, "Warning", "SyncFailed", f"attempt {i} failed", resource=CONFIGMAPS)
        await broadcaster.flush()
    finally:
        await stop(task)
    events = await events_of(client, "app-config")
    plain = sorted(e["message"] for e in events if not e["message"].startswith(COMBINED_PREFIX))
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert plain == sorted(f"attempt {i} failed" for i in range(9))
    assert len(combined) == 1
    assert combined[0]["count"] == 3  # the 10th, 11th and 12th
    assert combined[0]["message"] == COMBINED_PREFIX + "attempt 11 failed"


async def test_the_spam_filter_allows_a_burst_of_25_then_one_per_five_minutes(client, cm):
    clock = FakeClock()
    broadcaster = EventBroadcaster(client, clock=clock)
    recorder = broadcaster.new_recorder("chatty")
    task = await running(broadcaster)
    try:
        for i in range(30):  # distinct reasons: neither aggregated nor deduplicated
            recorder.event(cm, "Normal", f"Reason{i}", "hello", resource=CONFIGMAPS)
            clock.advance(0.000_001)  # Event names carry the time: keep them distinct
        await broadcaster.flush()
        assert len(await events_of(client, "app-config")) == 25
        clock.advance(299)
        recorder.event(cm, "Normal", "Late", "hello", resource=CONFIGMAPS)
        await broadcaster.flush()
        assert len(await events_of(client, "app-config")) == 25
        clock.advance(1)
        recorder.event(cm, "Normal", "Later", "hello", resource=CONFIGMAPS)
        await broadcaster.flush()
    finally:
        await stop(task)
    reasons = {e["reason"] for e in await events_of(client, "app-config")}
    assert len(reasons) == 26 and "Later" in reasons and "Late" not in reasons


async def test_events_show_up_in_kubectl_describe(client, cm, kubectl):
    broadcaster = EventBroadcaster(client)
    recorder = broadcaster.new_recorder("mirror-controller")
    task = await running(broadcaster)
    try:
        recorder.event(cm, "Warning", "MirrorConflict", "app-config-mirror exists and is not ours", resource=CONFIGMAPS)
        recorder.event(cm, "Warning", "MirrorConflict", "app-config-mirror exists and is not ours", resource=CONFIGMAPS)
        await broadcaster.flush()
    finally:
        await stop(task)
    out = (await asyncio.to_thread(kubectl.run, "describe", "configmap", "app-config")).stdout
    events_section = out.split("Events:", 1)[1]
    assert re.search(r"Warning\s+MirrorConflict\s+.*\(x2 over .*\)\s+mirror-controller\s+app-config-mirror exists and is not ours", events_section), out


async def test_a_patch_of_a_deleted_event_falls_back_to_create(client, cm):
    broadcaster = EventBroadcaster(client)
    recorder = broadcaster.new_recorder("mirror-controller")
    task = await running(broadcaster)
    try:
        recorder.event(cm, "Normal", "Mirrored", "done", resource=CONFIGMAPS)
        await broadcaster.flush()
        [first] = await events_of(client, "app-config")
        await client.delete(CORE_EVENTS, "default", first["metadata"]["name"])
        recorder.event(cm, "Normal", "Mirrored", "done", resource=CONFIGMAPS)
        await broadcaster.flush()
    finally:
        await stop(task)
    [again] = await events_of(client, "app-config")
    assert again["metadata"]["name"] == first["metadata"]["name"] and again["count"] == 2


# -- queue, sink failures, references -----------------------------------------------------------------


class FlakySink:
    """An in-memory sink whose first ``failures`` writes fail below HTTP."""

    def __init__(self, failures: int = 0, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or TransportError("connection refused", request_sent=False)
        self.attempts = 0
        self.created: list[dict] = []

    async def create(self, event):
        self.attempts += 1
        if self.attempts <= self.failures:
            raise self.error
        written = {**event, "metadata": {**event["metadata"], "resourceVersion": str(self.attempts)}}
        self.created.append(written)
        return written

    async def patch(self, event, patch):  # pragma: no cover - not reached here
        raise AssertionError("no repeats in these tests")


def ref_obj(name: str = "x") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "uid": "u1"}}


async def test_recording_never_blocks_and_drops_with_a_warning_when_the_queue_is_full(caplog):
    broadcaster = EventBroadcaster(sink=FlakySink(), queue_size=2)
    recorder = broadcaster.new_recorder("c")
    with caplog.at_level(logging.WARNING, logger="k8py.client.event_recorder"):
        for i in range(3):
            recorder.event(ref_obj(), "Normal", f"R{i}", "m")
    assert broadcaster.pending() == 2 and broadcaster.dropped == 1
    assert "dropping event: too many queued events" in caplog.text


async def test_transport_failures_are_retried_with_a_randomized_first_sleep():
    clock, sink = FakeClock(), FlakySink(failures=2)
    broadcaster = EventBroadcaster(sink=sink, clock=clock, rng=lambda: 0.5)
    task = await running(broadcaster)
    try:
        broadcaster.new_recorder("c").event(ref_obj(), "Normal", "R", "m")
        await clock.step(0)
        assert sink.attempts == 1 and clock.next_deadline() == clock.monotonic() + 5.0  # 10 s * rand
        await clock.step(5)
        assert sink.attempts == 2 and clock.next_deadline() == clock.monotonic() + 10.0
        await clock.step(10)
        assert sink.attempts == 3 and len(sink.created) == 1
    finally:
        await stop(task)


async def test_a_rejected_event_is_not_retried():
    sink = FlakySink(failures=1, error=Invalid("Event is invalid"))
    broadcaster = EventBroadcaster(sink=sink)
    task = await running(broadcaster)
    try:
        broadcaster.new_recorder("c").event(ref_obj(), "Normal", "R", "m")
        await asyncio.wait_for(broadcaster.flush(), 2)
    finally:
        await stop(task)
    assert sink.attempts == 1 and sink.created == []


def test_unsupported_event_types_and_unreferencable_objects_are_dropped():
    broadcaster = EventBroadcaster(sink=FlakySink())
    recorder = broadcaster.new_recorder("c")
    recorder.event(ref_obj(), "Info", "R", "m")
    recorder.event({"metadata": {"name": "no-kind"}}, "Normal", "R", "m")
    assert broadcaster.pending() == 0


def test_a_cluster_scoped_objects_events_go_to_the_default_namespace():
    broadcaster = EventBroadcaster(sink=FlakySink())
    broadcaster.new_recorder("c").event({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}, "Normal", "R", "m")
    event = broadcaster._queue.get_nowait()
    assert event["metadata"]["namespace"] == "default" and event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}


def test_object_reference_fills_kind_from_the_resource():
    obj = {"metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7"}}
    assert object_reference(obj, resource=CONFIGMAPS) == {
        "kind": "ConfigMap", "apiVersion": "v1", "namespace": "ns", "name": "a", "uid": "u", "resourceVersion": "7",
    }


# -- the correlator, pure -----------------------------------------------------------------------------


def raw_event(message: str, reason: str = "Failed", name: str = "x") -> dict:
    return {
        "metadata": {"name": f"{name}.1", "namespace": "default"}, "involvedObject": {"kind": "Pod", "name": name, "namespace": "default"},
        "type": "Warning", "reason": reason, "message": message, "source": {"component": "c"}, "count": 1,
        "firstTimestamp": "t0", "lastTimestamp": "t1",
    }


def test_similar_events_are_counted_within_a_sliding_ten_minute_window():
    clock = FakeClock()
    correlator = EventCorrelator(CorrelatorOptions(burst_size=1000), clock=clock)
    for i in range(9):
        assert not correlator.correlate(raw_event(f"m{i}")).event["message"].startswith(COMBINED_PREFIX)
        clock.advance(599)  # each within 10 min of the previous one: the window slides
    assert correlator.correlate(raw_event("m9")).event["message"] == COMBINED_PREFIX + "m9"
    clock.advance(601)  # a quiet gap longer than 10 min starts over
    assert correlator.correlate(raw_event("m10")).event["message"] == "m10"


def test_a_repeat_becomes_a_patch_of_count_last_timestamp_and_message():
    correlator = EventCorrelator(clock=FakeClock())
    first = correlator.correlate(raw_event("boom"))
    assert first.patch is None
    correlator.update_state({**first.event, "metadata": {**first.event["metadata"], "resourceVersion": "42"}}, first.key)
    again = raw_event("boom")
    again["metadata"]["name"], again["firstTimestamp"], again["lastTimestamp"] = "x.2", "t5", "t6"
    second = correlator.correlate(again)
    assert second.patch == {"count": 2, "lastTimestamp": "t6", "message": "boom"}
    assert second.event["metadata"] == {"name": "x.1", "namespace": "default", "resourceVersion": "42"}
    assert second.event["firstTimestamp"] == "t0"


def test_the_spam_filter_is_per_source_and_object_not_per_reason():
    clock = FakeClock()
    correlator = EventCorrelator(CorrelatorOptions(burst_size=2, qps=1.0), clock=clock)
    results = [correlator.correlate(raw_event("m", reason=f"R{i}")).skip for i in range(3)]
    assert results == [False, False, True]
    assert not correlator.correlate(raw_event("m", name="other")).skip
    clock.advance(1)
    assert not correlator.correlate(raw_event("m", reason="R9")).skip


@pytest.mark.parametrize("qps", [1 / 60, 1 / 3600])
def test_a_flood_skipped_cheaply_ends_as_the_three_stages_would_leave_it(qps):
    """The shortcut for a saturated, spam-filtered repeat (no combined event
    built) must decide and count exactly as aggregate, observe and filter do:
    the same skips and keys, the same writes and patches, and the later patch's
    count includes every skipped repeat, as upstream's. At one token an hour,
    only the shortcut sees the flood for longer than the aggregation's sliding
    10-minute window: it must keep the window open as the stages would."""
    def run(flood_shortcut: bool) -> list:
        clock = FakeClock()
        correlator = EventCorrelator(CorrelatorOptions(burst_size=5, qps=qps), clock=clock, flood_shortcut=flood_shortcut)
        seen = []
        for i in range(400):
            event = raw_event(f"Created pod: p{i}", reason="SuccessfulCreate", name="rs" if i % 7 else "other")
            result = correlator.correlate(event)
            if result.event is not None:
                correlator.update_state({**result.event, "metadata": {**result.event["metadata"], "resourceVersion": str(i)}},
                                        result.key)
            seen.append((result.skip, result.key, result.patch, result.event and result.event["message"],
                         result.event and result.event["count"]))
            clock.advance(3 if i % 250 else 700)  # refills some tokens; runs longer than the window, and a gap past it
        return seen

    shortcut = run(True)
    stages = run(False)
    assert shortcut == stages
    skipped = sum(1 for s in shortcut if s[0])
    assert skipped > 200  # the flood was mostly skipped
    if qps == 1 / 60:  # (at one an hour no token comes back for a patch)
        counts = [s[4] for s in shortcut if s[2] is not None]
        assert counts and max(counts) > 20  # a later patch counted the skipped repeats too


# -- events.k8s.io/v1 with series -----------------------------------------------------------------------


async def test_events_v1_repeats_become_a_series_written_at_first_repeat_then_on_refresh_and_finish(client, cm):
    from k8py.client.event_series import SeriesEventBroadcaster
    from k8py.client.resources import EVENTS

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
    from k8py.client.event_series import SeriesEventBroadcaster

    broadcaster = SeriesEventBroadcaster(None, queue_size=1)  # type: ignore[arg-type] - never runs: nothing is written
    recorder = broadcaster.new_recorder("c", reporting_instance="c-1")
    with caplog.at_level(logging.WARNING, logger="k8py.client.event_series"):
        for i in range(2002):
            recorder.eventf(ref_obj(f"x{i}"), None, "Normal", "Scheduled", "Binding", "m")
    assert broadcaster.dropped == 2001
    assert caplog.text.count("dropping event: too many queued events") == 3  # drops 1, 1001 and 2001


async def test_a_series_broadcaster_with_a_limiter_writes_a_burst_then_at_its_rate(client):
    from k8py.client.event_series import SeriesEventBroadcaster
    from k8py.client.rate_limiters import BucketRateLimiter

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
    from k8py.client.event_series import SeriesEventBroadcaster

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
    from k8py.client.event_series import SeriesEventBroadcaster

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
