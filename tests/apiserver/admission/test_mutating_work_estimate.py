"""APF's mutating work estimator: a write pays extra seats for the watchers its event will reach
(upstream: ceil(watchers / 10) seats, kept 5 ms x that count over the seats kept, after the answer)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from k8py.apiserver.authn.user import UNSECURED
from k8py.apiserver.authz.attributes import Attributes
from k8py.apiserver.overload import work_estimate
from k8py.apiserver.overload.work_estimate import WorkEstimate, exempt_from_watch_events, mutating_estimate
from tests.support.servers import ServerThread, sqlite_storage


def _attrs(verb: str, resource: str = "configmaps", subresource: str = "") -> Attributes:
    return Attributes(user=UNSECURED, verb=verb, resource_request=True, api_version="v1", resource=resource,
                      subresource=subresource, namespace="default")


def test_a_write_with_few_watchers_takes_one_seat_and_many_take_more_for_a_while() -> None:
    assert mutating_estimate(0) == mutating_estimate(9) == WorkEstimate(1, 0, 0.0)
    assert mutating_estimate(25) == WorkEstimate(1, 3, pytest.approx(0.005))
    # 25 seats' worth of events reshaped into the 10-seat maximum (or the level's, if smaller): longer, narrower
    assert mutating_estimate(250) == WorkEstimate(1, 10, pytest.approx(0.0125))
    assert mutating_estimate(250, max_seats=4) == WorkEstimate(1, 4, pytest.approx(0.03125))
    assert mutating_estimate(250).max_seats == 10


def test_reads_and_token_requests_pay_nothing_for_watchers() -> None:
    assert exempt_from_watch_events(_attrs("get")) and exempt_from_watch_events(_attrs("list"))
    assert exempt_from_watch_events(_attrs("create", "serviceaccounts", "token"))
    assert not exempt_from_watch_events(_attrs("create")) and not exempt_from_watch_events(_attrs("delete"))


@pytest.fixture
def server(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), max_requests_inflight=20, max_mutating_requests_inflight=10) as s:
        yield s


def _sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_a_create_seen_by_many_watchers_is_estimated_wider_and_keeps_its_seats_after_answering(server, monkeypatch) -> None:
    user = {"User-Agent": "someone/1.0"}  # an ordinary user: global-default
    seats = "apiserver_flowcontrol_work_estimated_seats_sum"
    labels = {"flow_schema": "global-default", "priority_level": "global-default"}
    async with aiohttp.ClientSession(server.url, headers=user, timeout=aiohttp.ClientTimeout(total=120)) as http:
        async def create(name: str) -> float:
            """The seats estimated for one create of a ConfigMap."""
            before = _sample(await (await http.get("/metrics")).text(), seats, **labels)
            r = await http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": name}})
            assert r.status == 201, await r.text()
            # (the scrape that reads it counts itself too: one seat, a read)
            return _sample(await (await http.get("/metrics")).text(), seats, **labels) - before - 1

        assert await create("alone") == 1
        watches = []
        try:
            for i in range(12):  # 8 on the namespace, 4 on everything: 12 watchers -> 2 seats
                path = "/api/v1/namespaces/default/configmaps" if i < 8 else "/api/v1/configmaps"
                response = await http.get(path, params={"watch": "1", "resourceVersion": "0"})
                assert response.status == 200
                watches.append(response)
            # the watchers are counted once the server registered them: the next create says so
            for attempt in range(200):
                if await create(f"watched-{attempt}") == 2:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("a create with 12 watchers was never estimated at 2 seats")
            # the seats outlive the answer by the events' estimated time (5 ms here stretched to 15 s to see it)
            monkeypatch.setattr(work_estimate, "EVENT_ADDITIONAL_DURATION", 15.0)
            assert server.server is not None
            level = server.server.overload.config().limited["global-default"].queues
            r = await http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "held"}})
            assert r.status == 201
            assert level.seats_in_use >= 2, "the write gave its seats back as it answered"
            deadline = time.monotonic() + 90
            while level.seats_in_use and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert level.seats_in_use == 0, "the write's seats were never given back"
            monkeypatch.undo()
            text = await (await http.get("/metrics")).text()
            assert _sample(text, "apiserver_flowcontrol_watch_count_samples_count",
                           priority_level="global-default", flow_schema="global-default") >= 2
            # a namespace nobody watches in: only the 4 watching everything, under 10: one seat
            r = await http.post("/api/v1/namespaces", json={"metadata": {"name": "quiet"}})
            assert r.status == 201
            before = _sample(await (await http.get("/metrics")).text(), seats, **labels)
            r = await http.post("/api/v1/namespaces/quiet/configmaps", json={"metadata": {"name": "q"}})
            assert r.status == 201
            assert _sample(await (await http.get("/metrics")).text(), seats, **labels) - before - 1 == 1
        finally:
            for response in watches:
                response.close()
