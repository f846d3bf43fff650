"""Seats of API Priority and Fairness on the event loop: wide requests, fair dispatch by seats, the demand
integral and the allocation that lets a busy level borrow (k8py.apiserver.overload.fair_queuing, .borrowing,
.work_estimate)."""

from __future__ import annotations

import asyncio

from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.authz.request_attributes import request_attributes
from k8py.apiserver.overload.borrowing import SeatDemand, allocate, level_limits
from k8py.apiserver.overload.fair_queuing import QueueSet, deal
from k8py.apiserver.overload.work_estimate import list_seats

ALICE = UserInfo("alice", groups=("system:authenticated",))


def seats_of(path: str, query: dict[str, str], stored: int | None, max_seats: int = 10) -> int:
    a = request_attributes(ALICE, "GET", path, query)
    return list_seats(a, query, lambda _: stored, max_seats=max_seats)


def test_a_list_takes_a_seat_per_hundred_objects_it_goes_through():
    assert seats_of("/api/v1/configmaps", {}, 250) == 3  # from the watch cache: every stored object
    assert seats_of("/api/v1/namespaces/a/configmaps", {}, 5) == 1
    assert seats_of("/api/v1/configmaps", {}, 5000) == 10  # at most 10
    assert seats_of("/api/v1/configmaps", {}, 5000, max_seats=4) == 4  # nor more than the level's seats
    assert seats_of("/api/v1/configmaps", {"limit": "50", "resourceVersion": ""}, 5000) == 1  # a page from storage: 2 x 50
    assert seats_of("/api/v1/configmaps", {"limit": "200"}, 5000) == 4
    assert seats_of("/api/v1/configmaps", {"limit": "200", "labelSelector": "a=b"}, 500) == 7  # stored + page
    assert seats_of("/api/v1/configmaps", {"limit": "50", "resourceVersion": "0"}, 900) == 9  # the cache ignores limit
    assert seats_of("/api/v1/configmaps", {"fieldSelector": "metadata.name=x"}, 5000) == 1  # one object
    assert seats_of("/api/v1/namespaces/a/configmaps/x", {}, 5000) == 1  # a get
    assert seats_of("/apis/wardle.example.com/v1/flunders", {}, None) == 1  # an unknown count: the minimum


async def _until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.001)


async def _hold(qs: QueueSet, flow: int, width: int, log: list, tag: str, release: asyncio.Event) -> None:
    grant, reason = await qs.acquire(flow, width)
    log.append(tag)
    if reason:
        return
    await release.wait()
    qs.release(grant)


async def test_a_flow_of_wide_lists_does_not_starve_a_flow_of_narrow_requests():
    qs = QueueSet("level", seats=7, queues=16, hand_size=2, queue_length_limit=50)
    lists, gets = 101, 202
    assert not set(deal(lists, 16, 2)) & set(deal(gets, 16, 2))
    release = asyncio.Event()
    log: list[str] = []
    running = [asyncio.create_task(_hold(qs, lists, 3, log, f"list{i}", release), name=f"list{i}") for i in range(2)]
    await asyncio.sleep(0)
    assert qs.seats_in_use == 6 and qs.executing == 2  # a list holds three seats
    queued = [asyncio.create_task(_hold(qs, lists, 3, log, f"list{i}", release), name=f"list{i}") for i in range(2, 6)]
    await asyncio.sleep(0)
    assert qs.waiting == 4 and qs.waiting_seats == 12  # they need three seats and one is free
    for _ in range(5):  # one at a time, each given the free seat at once though the lists came first
        grant, reason = await asyncio.wait_for(qs.acquire(gets, 1), 5)
        assert reason == "" and qs.waiting == 4  # no list went ahead, none ran in seats it did not fit
        qs.release(grant)
    release.set()
    await asyncio.gather(*running, *queued)
    assert log == [f"list{i}" for i in range(6)]
    assert qs.executing == 0 and qs.seats_in_use == 0 and qs.waiting_seats == 0


async def test_seats_are_shared_by_queue_a_flow_spread_over_its_hand_has_no_more_than_its_share():
    qs = QueueSet("level", seats=4, queues=16, hand_size=2, queue_length_limit=50)
    lists, gets = 101, 202
    held = qs.try_acquire(3, lists)  # charged to one queue of the lists' hand
    waiting = [asyncio.create_task(qs.acquire(lists, 3), name=f"list{i}") for i in range(2)]
    await asyncio.sleep(0)
    for _ in range(2):  # the narrow flow's share of the free seat, ahead of the lists
        grant, _ = await asyncio.wait_for(qs.acquire(gets, 1), 5)
        qs.release(grant)
    third = asyncio.create_task(qs.acquire(gets, 1), name="get2")
    await asyncio.sleep(0.01)
    assert not third.done()  # a list's queue is as far along now: its head goes first
    qs.release(held)
    grants = [(await asyncio.wait_for(t, 5))[0] for t in (waiting[0], third)]
    assert qs.seats_in_use == 4  # the list and the third get share the seats
    for grant in grants:
        qs.release(grant)
    qs.release((await asyncio.wait_for(waiting[1], 5))[0])
    assert qs.seats_in_use == 0


async def test_the_fairest_wide_request_waits_for_seats_rather_than_be_overtaken_by_narrow_ones():
    qs = QueueSet("level", seats=4, queues=16, hand_size=1, queue_length_limit=50)
    wide, narrow = 7, 8
    assert deal(wide, 16, 1) != deal(narrow, 16, 1)
    held = [qs.try_acquire(1, 99) for _ in range(3)]
    release = asyncio.Event()
    log: list[str] = []
    big = asyncio.create_task(_hold(qs, wide, 4, log, "wide", release), name="wide")
    await asyncio.sleep(0)
    assert qs.waiting == 1
    for grant in held[:2]:
        qs.release(grant)
        await asyncio.sleep(0.01)
        assert log == [] and qs.seats_in_use < 4  # the wide one waits for all four, alone at the head
        assert qs.try_acquire(1, narrow) is None  # and a narrow newcomer does not overtake it
    qs.release(held[2])
    await asyncio.wait_for(_until(lambda: log == ["wide"]), 5)
    assert qs.seats_in_use == 4
    release.set()
    await big


def test_the_demand_integral_is_a_time_weighted_average_with_its_spread_and_peak():
    now = [0.0]
    demand = SeatDemand(lambda: now[0])
    demand.observe(4)
    now[0] = 1.0
    demand.observe(0)
    now[0] = 2.0
    average, deviation, high = demand.reset()
    assert (average, deviation, high) == (2.0, 2.0, 4)
    now[0] = 3.0
    assert demand.reset() == (0.0, 0.0, 0)
    demand.observe(6)
    now[0] = 4.0
    assert demand.update_smoothed() == 6.0  # quick to rise
    demand.observe(0)
    now[0] = 5.0
    assert 5.8 < demand.update_smoothed() < 6.0  # slow to fall


def test_limits_follow_shares_lendable_and_borrowing_percent():
    limits = level_limits(100, 30, 100, 33, None)
    assert (limits.nominal, limits.lendable, limits.lower, limits.upper(100)) == (30, 10, 20, 100)
    limits = level_limits(100, 10, 100, 0, 50)
    assert (limits.nominal, limits.lower, limits.upper(100)) == (10, 10, 15)
    assert level_limits(10, 1, 4, 50, 0).lendable == 2  # 2.5 rounds up, as Go's math.Round


def test_a_busy_level_borrows_what_idle_levels_can_lend_up_to_its_limit():
    # (lower, upper, target): a busy level of nominal 10 (may double), two idle ones that lend half of 20
    busy, idle = (10.0, 20.0, 30.0), (10.0, 40.0, 10.0)
    limits, fair = allocate(50, [busy, idle, idle])
    assert sum(limits) == 50
    assert limits[0] == 20  # all it may borrow
    assert limits[1] == limits[2] == 15  # the idle ones keep at least their unlendable seats
    limits, _ = allocate(50, [(10.0, 20.0, 14.0), idle, idle])
    assert limits[0] >= 14 and sum(limits) == 50
    assert allocate(50, [(10.0, 10.0, 30.0), idle, idle])[0][0] == 10  # borrowingLimitPercent 0: never more
    idle_only, _ = allocate(50, [(0.0, 50.0, 0.0), (10.0, 50.0, 10.0), (5.0, 50.0, 5.0)])
    assert sum(idle_only) == 50  # nobody busy: the seats still add up
