"""EventRecorder / EventBroadcaster / EventCorrelator.

Against a real API server: written Events, dedup into one Event's ``count``,
aggregation after 10 similar events, the spam filter, ``kubectl describe``.
Pure correlator and queue behaviour with a fake clock. (events.k8s.io/v1
series: ``test_event_series.py``.)
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
