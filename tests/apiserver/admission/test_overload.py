"""Overload protection over HTTP: a client that fills its priority level's
seats is answered 429 with Retry-After and upstream's message, while a
component (its own level) keeps making progress and watches stay exempt."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from k8py.apiserver.authn.user import UNSECURED, UserInfo
from k8py.apiserver.overload import priority_level
from tests.support.servers import ServerThread, sqlite_storage

CONTROLLER = {"User-Agent": "k8py-controller-manager/0.1"}
FLOODER = {"User-Agent": "flooder/1.0"}


@pytest.fixture
def server(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), max_requests_inflight=3, max_mutating_requests_inflight=2) as s:
        yield s


def wait_for(condition, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_a_flood_is_answered_429_while_a_controller_still_progresses(server):
    limiter = server.server.overload
    # hold the flooder's three read seats: lists at a future resourceVersion wait (3 s) for it
    holders = [threading.Thread(target=httpx.get, args=(f"{server.url}/api/v1/pods?resourceVersion=99999999",),
                                kwargs={"headers": FLOODER, "timeout": 30}) for _ in range(3)]
    for t in holders:
        t.start()
    try:
        wait_for(lambda: limiter.inflight("workload", "readOnly") == 3, what="three reads in flight")
        with httpx.Client(base_url=server.url, timeout=30) as http:
            refused = http.get("/api/v1/namespaces/default/configmaps", headers=FLOODER)
            assert refused.status_code == 429
            assert refused.headers["Retry-After"] == "1"
            assert refused.text == "Too many requests, please try again later.\n"
            # the controller's level has its own seats: it reads and writes on
            for i in range(5):
                assert http.get("/api/v1/namespaces/default/configmaps", headers=CONTROLLER).status_code == 200
                r = http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": f"c{i}"}}, headers=CONTROLLER)
                assert r.status_code == 201, r.text
            # the flooder's writes have seats of their own too (reads and writes are limited apart)
            assert http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "f"}}, headers=FLOODER).status_code == 201
            # a watch takes no seat
            with http.stream("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1", headers=FLOODER) as w:
                assert w.status_code == 200
            metrics = http.get("/metrics", headers=CONTROLLER).text
            assert 'apiserver_flowcontrol_rejected_requests_total{priority_level="workload",reason="concurrency-limit"} 1.0' in metrics
            assert 'apiserver_current_inflight_requests{request_kind="readOnly"}' in metrics
    finally:
        for t in holders:
            t.join(30)
    assert limiter.inflight("workload", "readOnly") == 0


def test_every_write_of_a_burst_lands_through_retries_and_seats_are_given_back(server):
    results: list[int] = []
    lock = threading.Lock()

    def write(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for attempt in range(200):
                r = http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": f"b{i}"}, "data": {"x": "y" * 2000}},
                              headers=FLOODER)
                with lock:
                    results.append(r.status_code)
                if r.status_code != 429:
                    return
                time.sleep(0.01 * (attempt + 1))  # a client's back-off, not synchronisation

    threads = [threading.Thread(target=write, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results.count(201) == 30
    assert set(results) <= {201, 429}


def test_priority_levels():
    assert priority_level(UNSECURED, "kubectl/v1.32.0") == "workload"
    assert priority_level(UNSECURED, "k8py-kubelet/0.1 (node-1)") == "system"
    assert priority_level(UserInfo("admin", groups=("system:masters",)), "kubectl") == "exempt"
    assert priority_level(UserInfo("system:node:n1", groups=("system:nodes",)), "") == "system"
    assert priority_level(UserInfo("system:kube-scheduler"), "") == "system"
    assert priority_level(UserInfo("system:serviceaccount:default:app"), "") == "workload"


def test_request_headers_and_bodies_are_bounded(server):
    with httpx.Client(base_url=server.url, timeout=30) as http:
        r = http.post("/api/v1/namespaces/default/configmaps", content=b"{" + b" " * (3 * 1024 * 1024 + 10) + b"}",
                      headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        assert r.json()["reason"] == "RequestEntityTooLarge"
        r = http.get("/api/v1/namespaces", headers={"X-Big": "x" * 20_000})
        assert r.status_code in (400, 431)
        assert http.get("/api/v1/namespaces").status_code == 200  # the server is fine afterwards
