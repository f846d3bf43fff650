"""DelayingQueue: add_after on an injected clock."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from k8py.client.clock import FakeClock, settle
from k8py.client.delaying_queue import DelayingQueue
from k8py.client.metrics import PrometheusMetricsProvider


def make() -> tuple[DelayingQueue[str], FakeClock]:
    clock = FakeClock()
    return DelayingQueue(clock=clock), clock


async def test_item_appears_only_when_its_delay_has_passed() -> None:
    queue, clock = make()
    queue.add_after("a", 1.0)
    await settle()
    assert len(queue) == 0 and queue.waiting() == 1
    clock.advance(0.999)
    await settle()
    assert len(queue) == 0
    clock.advance(0.001)
    await settle()
    assert len(queue) == 1 and queue.waiting() == 0
    assert await queue.get() == "a"


async def test_items_become_ready_in_ready_time_order() -> None:
    queue, clock = make()
    for item, delay in [("late", 3.0), ("early", 1.0), ("mid", 2.0)]:
        queue.add_after(item, delay)
    await settle()
    clock.advance(5)
    await settle()
    assert [await queue.get() for _ in range(3)] == ["early", "mid", "late"]


async def test_earlier_request_wins_and_later_one_never_postpones() -> None:
    queue, clock = make()
    queue.add_after("a", 10.0)
    await settle()
    queue.add_after("a", 1.0)  # earlier: must re-arm the sleeping loop
    queue.add_after("a", 50.0)  # later: ignored
    await settle()
    assert queue.waiting() == 1
    clock.advance(1.0)
    await settle()
    assert len(queue) == 1
    queue.done(await queue.get())
    clock.advance(100)
    await settle()
    assert len(queue) == 0, "the superseded deadlines must not add it again"


async def test_non_positive_delay_adds_at_once() -> None:
    queue, _ = make()
    queue.add_after("now", 0)
    queue.add_after("past", -1)
    assert len(queue) == 2


async def test_delayed_add_of_a_queued_item_is_deduplicated() -> None:
    queue, clock = make()
    queue.add("a")
    queue.add_after("a", 1)
    await settle()
    clock.advance(1)
    await settle()
    assert len(queue) == 1


async def test_shutdown_drops_parked_items_and_ignores_new_ones() -> None:
    queue, clock = make()
    queue.add_after("a", 1)
    await settle()
    queue.shut_down()
    queue.add_after("b", 1)
    clock.advance(5)
    await settle()
    assert len(queue) == 0 and queue.waiting() == 0
    assert clock.sleepers() == 0, "the waiting loop stopped"


async def test_every_add_after_counts_as_a_retry() -> None:
    registry = CollectorRegistry()
    queue: DelayingQueue[str] = DelayingQueue(
        name="d", clock=FakeClock(), metrics_provider=PrometheusMetricsProvider(registry)
    )
    queue.add_after("a", 1)
    queue.add_after("a", 0)
    assert registry.get_sample_value("workqueue_retries_total", {"name": "d"}) == 2
    queue.shut_down()


async def test_waiting_loop_is_a_named_task() -> None:
    queue: DelayingQueue[str] = DelayingQueue(name="pods", clock=FakeClock())
    queue.add_after("a", 1)
    names = {t.get_name() for t in asyncio.all_tasks()}
    assert "delaying-queue:pods" in names
    queue.shut_down()
