"""WorkQueue guarantees: de-duplication, one worker per item, shutdown and drain, metrics."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from k8py.client.clock import FakeClock, settle
from k8py.client.metrics import PrometheusMetricsProvider
from k8py.client.work_queue import QueueShutDown, WorkQueue


async def drain(queue: WorkQueue[str]) -> list[str]:
    got: list[str] = []
    while len(queue):
        item = await queue.get()
        got.append(item)
        queue.done(item)
    return got


# (operations, items handed out in order by draining afterwards)
DEDUP_CASES = [
    pytest.param(["a", "b", "a", "c", "b"], ["a", "b", "c"], id="duplicates-collapse-keep-first-position"),
    pytest.param(["x"] * 5, ["x"], id="same-item-many-times"),
    pytest.param([], [], id="empty"),
]


@pytest.mark.parametrize(("adds", "expected"), DEDUP_CASES)
async def test_an_item_is_queued_at_most_once(adds: list[str], expected: list[str]) -> None:
    queue: WorkQueue[str] = WorkQueue()
    for item in adds:
        queue.add(item)
    assert len(queue) == len(expected)
    assert await drain(queue) == expected


async def test_item_added_while_processing_is_requeued_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    item = await queue.get()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0, "not handed out twice concurrently"
    assert queue.is_dirty("a") and queue.is_processing("a")

    second = asyncio.create_task(queue.get())
    await settle()
    assert not second.done(), "a second worker must not get an item still in process"
    queue.done(item)
    assert await asyncio.wait_for(second, 1) == "a"
    queue.done("a")
    assert len(queue) == 0 and not queue.is_dirty("a")


async def test_done_without_readd_does_not_requeue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.done(await queue.get())
    assert len(queue) == 0


async def test_waiting_workers_each_get_a_distinct_item() -> None:
    queue: WorkQueue[int] = WorkQueue()
    workers = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    for i in range(3):
        queue.add(i)
    assert sorted(await asyncio.wait_for(asyncio.gather(*workers), 1)) == [0, 1, 2]


async def test_shutdown_ignores_adds_hands_out_the_rest_then_signals() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.shut_down()
    queue.add("b")
    assert queue.shutting_down
    assert await queue.get() == "a"
    with pytest.raises(QueueShutDown):
        await queue.get()


async def test_shutdown_wakes_blocked_getters() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(2)]
    await settle()
    queue.shut_down()
    for getter in getters:
        with pytest.raises(QueueShutDown):
            await asyncio.wait_for(getter, 1)


async def test_shutdown_with_drain_waits_for_in_flight_items() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for item in ("a", "b"):
        queue.add(item)
    a, b = await queue.get(), await queue.get()
    drainer = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    assert not drainer.done()
    queue.done(a)
    await settle()
    assert not drainer.done(), "b is still in flight"
    queue.done(b)
    await asyncio.wait_for(drainer, 1)


async def test_shutdown_with_drain_returns_at_once_when_idle() -> None:
    queue: WorkQueue[str] = WorkQueue()
    await asyncio.wait_for(queue.shut_down_with_drain(), 1)
    with pytest.raises(QueueShutDown):
        await queue.get()


async def test_shutdown_releases_a_pending_drain() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    await queue.get()  # never done
    drainer = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    assert not drainer.done()
    queue.shut_down()
    await asyncio.wait_for(drainer, 1)


async def test_drain_follows_a_requeued_item_to_its_end() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    item = await queue.get()
    queue.add("a")  # dirty while processing
    drainer = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    queue.done(item)  # re-queued: a worker takes it again
    again = await queue.get()
    await settle()
    assert not drainer.done()
    queue.done(again)
    await asyncio.wait_for(drainer, 1)


def sample(registry: CollectorRegistry, metric: str, name: str = "q") -> float:
    value = registry.get_sample_value(metric, {"name": name})
    return 0.0 if value is None else value


async def test_prometheus_metrics_track_depth_latency_and_work() -> None:
    registry = CollectorRegistry()
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(name="q", clock=clock, metrics_provider=PrometheusMetricsProvider(registry))
    assert queue.records_metrics
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert sample(registry, "workqueue_depth") == 2
    assert sample(registry, "workqueue_adds_total") == 2

    clock.advance(3)
    a = await queue.get()
    assert sample(registry, "workqueue_depth") == 1
    assert sample(registry, "workqueue_queue_duration_seconds_sum") == 3

    clock.advance(2)
    queue.update_unfinished_work_metrics()
    assert sample(registry, "workqueue_unfinished_work_seconds") == 2
    assert sample(registry, "workqueue_longest_running_processor_seconds") == 2
    queue.done(a)
    assert sample(registry, "workqueue_work_duration_seconds_sum") == 2
    assert sample(registry, "workqueue_work_duration_seconds_count") == 1


def test_unnamed_queue_records_nothing() -> None:
    registry = CollectorRegistry()
    queue: WorkQueue[str] = WorkQueue(metrics_provider=PrometheusMetricsProvider(registry))
    queue.add("a")
    assert not queue.records_metrics
    assert sample(registry, "workqueue_adds_total", name="") == 0
