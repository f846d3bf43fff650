"""One priority level's seats and queues (k8py.apiserver.overload.fair_queuing), on the event loop."""

from __future__ import annotations

import asyncio

import pytest

from k8py.apiserver.overload.classify import classify, ordered
from k8py.apiserver.overload.bootstrap import FLOW_SCHEMAS
from k8py.apiserver.overload.fair_queuing import QueueSet, deal, flow_hash
from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.authz.request_attributes import request_attributes


def test_a_deal_is_a_hand_of_distinct_queues_the_same_for_the_same_flow():
    for h in (0, 1, 12345, flow_hash("global-default", "alice"), 2**64 - 1):
        hand = deal(h, 128, 6)
        assert len(set(hand)) == 6 and all(0 <= c < 128 for c in hand)
        assert deal(h, 128, 6) == hand
    hands = {tuple(sorted(deal(flow_hash("s", f"user{i}"), 128, 6))) for i in range(200)}
    assert len(hands) == 200  # flows rarely share a whole hand


async def _spawn(qs: QueueSet, flow: int, results: list, tag: str) -> asyncio.Task:
    async def run() -> None:
        index, reason = await qs.acquire(flow)
        results.append((tag, reason))
        if not reason:
            await asyncio.sleep(0)  # hold the seat a turn
            qs.release(index)
    task = asyncio.create_task(run(), name=f"acquire-{tag}")
    await asyncio.sleep(0)
    return task


async def test_waiting_flows_are_served_in_turn_not_in_arrival_order():
    qs = QueueSet("level", seats=1, queues=8, hand_size=1, queue_length_limit=10)
    first, _ = await qs.acquire(1)  # the seat is taken
    a, b = 11, 12
    assert deal(a, 8, 1) != deal(b, 8, 1)
    order: list = []
    tasks = [await _spawn(qs, a, order, f"a{i}") for i in range(4)] + [await _spawn(qs, b, order, "b0")]
    assert qs.waiting == 5
    qs.release(first)
    await asyncio.gather(*tasks)
    tags = [t for t, _ in order]
    assert tags.index("b0") <= 1, tags  # the lone flow does not wait behind the flood's four
    assert qs.executing == 0 and qs.waiting == 0


async def test_a_full_queue_and_a_reject_level_refuse_at_once():
    qs = QueueSet("level", seats=1, queues=1, hand_size=1, queue_length_limit=1)
    held, _ = await qs.acquire(1)
    results: list = []
    waiting = await _spawn(qs, 2, results, "queued")
    assert await qs.acquire(3) == (None, "queue-full")
    reject = QueueSet("catch-all", seats=1)
    await reject.acquire(1)
    assert await reject.acquire(1) == (None, "concurrency-limit")
    qs.release(held)
    await waiting
    assert results == [("queued", "")]


async def test_a_request_waiting_past_the_limit_is_timed_out_and_leaves_its_queue():
    qs = QueueSet("level", seats=1, queues=1, hand_size=1, queue_length_limit=5, wait_limit=0.05)
    await qs.acquire(1)  # never released: nothing else could run
    assert await qs.acquire(2) == (None, "time-out")
    assert qs.waiting == 0


async def test_a_client_gone_while_queued_frees_its_place_and_a_seat_granted_as_it_left_is_passed_on():
    qs = QueueSet("level", seats=1, queues=2, hand_size=2, queue_length_limit=5)
    held, _ = await qs.acquire(1)
    gone = asyncio.create_task(qs.acquire(2), name="gone")
    await asyncio.sleep(0)
    assert qs.waiting == 1
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert qs.waiting == 0
    qs.release(held)
    assert qs.executing == 0


def test_classification_follows_precedence_and_subjects():
    schemas = ordered(FLOW_SCHEMAS)

    def name(user: UserInfo, method: str, path: str) -> str:
        fs = classify(schemas, request_attributes(user, method, path, {}))
        assert fs is not None
        return fs["metadata"]["name"]

    assert name(UserInfo("admin", groups=("system:masters", "system:authenticated")), "DELETE", "/api/v1/namespaces/x") == "exempt"
    assert name(UserInfo("system:anonymous", groups=("system:unauthenticated",)), "GET", "/healthz") == "probes"
    node = UserInfo("system:node:n1", groups=("system:nodes", "system:authenticated"))
    assert name(node, "PATCH", "/api/v1/nodes/n1/status") == "system-node-high"
    assert name(node, "GET", "/api/v1/namespaces/default/pods") == "system-nodes"
    kcm = UserInfo("system:kube-controller-manager", groups=("system:authenticated",))
    assert name(kcm, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager") == "system-leader-election"
    assert name(kcm, "GET", "/apis/apps/v1/deployments") == "kube-controller-manager"
    sa = UserInfo("system:serviceaccount:default:app", groups=("system:serviceaccounts", "system:authenticated"))
    assert name(sa, "GET", "/api/v1/namespaces/default/pods") == "service-accounts"
    assert name(UserInfo("alice", groups=("system:authenticated",)), "GET", "/api/v1/pods") == "global-default"


async def test_a_queue_is_its_own_only_once_a_request_waited_in_it():
    """(An empty deque takes 760 bytes; the default levels have some 540 queues, most never used.)"""
    qs = QueueSet("level", seats=1, queues=64, hand_size=1, queue_length_limit=10)
    assert len({id(q) for q in qs._queues}) == 1  # the one shared, never-used queue
    held, _ = await qs.acquire(1)
    results: list = []
    waiting = await _spawn(qs, 2, results, "queued")
    own = deal(2, 64, 1)[0]
    assert len({id(q) for q in qs._queues}) == 2 and len(qs._queues[own]) == 1
    qs.release(held)
    await waiting
    assert results == [("queued", "")] and qs.waiting == 0
    qs.reconfigure(seats=1, queues=32, hand_size=1, queue_length_limit=10)
    assert len({id(q) for q in qs._queues}) == 1
