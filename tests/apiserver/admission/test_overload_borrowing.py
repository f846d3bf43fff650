"""API Priority and Fairness over HTTP, beyond one seat a request: a LIST over many objects takes several
seats and a flood of them in one flow does not starve another flow of the same level; a busy level borrows
the seats idle levels lend; a FlowSchema naming a missing level is marked Dangling (kubectl's MISSINGPL)."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import httpx
import pytest

from k8py.apiserver.overload.fair_queuing import flow_hash
from tests.support.servers import ServerThread, sqlite_storage

FC = "/apis/flowcontrol.apiserver.k8s.io/v1"
SLOW_LIST = "/api/v1/configmaps?resourceVersion=99999999"  # waits 3 s for a revision that never comes, then 504


def wait_for(condition, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def as_user(name: str) -> dict[str, str]:
    return {"Impersonate-User": name, "User-Agent": "test/1.0"}


def level_and_schema(http: httpx.Client, name: str, users: list[str], limited: dict) -> str:
    r = http.post(f"{FC}/prioritylevelconfigurations", json={
        "metadata": {"name": name}, "spec": {"type": "Limited", "limited": {
            **limited, "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 2, "queueLengthLimit": 50}}}}})
    assert r.status_code == 201, r.text
    r = http.post(f"{FC}/flowschemas", json={
        "metadata": {"name": name},
        "spec": {"matchingPrecedence": 50, "priorityLevelConfiguration": {"name": name}, "distinguisherMethod": {"type": "ByUser"},
                 "rules": [{"subjects": [{"kind": "User", "user": {"name": u}} for u in users],
                            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True,
                                               "namespaces": ["*"]}]}]}})
    assert r.status_code == 201, r.text
    uid = r.json()["metadata"]["uid"]
    wait_for(lambda: http.get("/api/v1/namespaces", headers=as_user(users[0])).headers.get("X-Kubernetes-PF-FlowSchema-UID") == uid,
             what=f"the FlowSchema {name} to classify {users[0]}")
    return uid


def start_slow_lists(server, user: str, n: int) -> list[threading.Thread]:
    threads = [threading.Thread(target=httpx.get, args=(f"{server.url}{SLOW_LIST}",),
                                kwargs={"headers": as_user(user), "timeout": 120}, name=f"slow-list-{user}-{i}") for i in range(n)]
    for t in threads:
        t.start()
    return threads


def on_server_loop(server, fn):
    """``fn()`` run on the server's event loop (the queues are the loop's), its result."""
    async def call():
        return fn()
    return asyncio.run_coroutine_threadsafe(call(), server.loop).result(30)


def test_a_flood_of_wide_lists_in_one_flow_does_not_starve_another_flow(tmp_path):
    # 50 seats in all; the "lists" level's 35 shares of 280 make 7 seats, neither lent nor borrowed
    with ServerThread(sqlite_storage(str(tmp_path / "data")), max_requests_inflight=30, max_mutating_requests_inflight=20,
                      flow_control_wait_limit=90.0) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        for i in range(201):  # a list of every ConfigMap goes through 200-odd objects: 3 seats
            assert http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": f"c{i}"}}).status_code == 201
        level_and_schema(http, "lists", ["lister", "getter"],
                         {"nominalConcurrencyShares": 35, "lendablePercent": 0, "borrowingLimitPercent": 0})
        level = server.server.overload.queue_set("lists")
        assert level is not None and level.seats == 7
        lister = flow_hash("lists", "lister")
        # the lister's first two lists hold three seats each for as long as the test says (on the server's
        # loop: in-process, as long-running lists would), one seat stays free
        held = [on_server_loop(server, lambda: level.try_acquire(3, lister)) for _ in range(2)]
        assert all(held) and level.seats_in_use == 6
        flood = start_slow_lists(server, "lister", 4)
        try:
            wait_for(lambda: level.waiting == 4, what="four more lists queued")
            assert level.waiting_seats == 12  # each needs three seats: none fits in the free one
            # the other flow's requests take the seat left, one after the other, ahead of the queued lists
            for _ in range(5):
                r = http.get("/api/v1/namespaces/default/configmaps/c1", headers=as_user("getter"))
                assert r.status_code == 200, r.text
            assert level.waiting == 4 and level.seats_in_use == 6  # no list overtook or squeezed in
        finally:
            for grant in held:
                on_server_loop(server, lambda grant=grant: level.release(grant))
            for t in flood:
                t.join(120)
        wait_for(lambda: level.executing == 0 and level.waiting == 0 and level.seats_in_use == 0, what="the level to drain")
        metrics = http.get("/metrics").text
        estimated = re.search(r'apiserver_flowcontrol_work_estimated_seats_sum\{flow_schema="lists",priority_level="lists"\} (\S+)', metrics)
        bucket = re.search(r'apiserver_flowcontrol_work_estimated_seats_bucket\{flow_schema="lists",le="2.0",priority_level="lists"\} (\S+)',
                           metrics)
        count = re.search(r'apiserver_flowcontrol_work_estimated_seats_count\{flow_schema="lists",priority_level="lists"\} (\S+)', metrics)
        assert estimated and bucket and count
        assert float(count.group(1)) - float(bucket.group(1)) == 4  # the four lists took more than two seats
        assert float(estimated.group(1)) - float(bucket.group(1)) == 4 * 3  # three each; the rest took one
        assert 'apiserver_flowcontrol_current_executing_seats{priority_level="lists"} 0.0' in metrics
        assert 'apiserver_flowcontrol_nominal_limit_seats{priority_level="lists"} 7.0' in metrics


def test_a_busy_level_borrows_the_seats_idle_levels_lend(tmp_path):
    # 5 seats in all: "busy" (1 share) has 1 nominal seat, may borrow 200% of it; the idle
    # bootstrap levels lend theirs (workload-low lends 90%); seats are re-shared every 0.2 s
    with ServerThread(sqlite_storage(str(tmp_path / "data")), max_requests_inflight=3, max_mutating_requests_inflight=2,
                      flow_control_wait_limit=90.0, flow_control_borrowing_period=0.2) as server, \
            httpx.Client(base_url=server.url, timeout=60) as http:
        level_and_schema(http, "busy", ["busy-user"], {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                                                       "borrowingLimitPercent": 200})
        flow_control = server.server.overload
        level = flow_control.queue_set("busy")
        lender = flow_control.queue_set("workload-low")
        assert level is not None and lender is not None
        nominal = {name: lv.limits.nominal for name, lv in flow_control.config().limited.items()}
        assert nominal["busy"] == 1 and nominal["workload-low"] == 3
        flood = start_slow_lists(server, "busy-user", 12)
        try:
            wait_for(lambda: level.seats == 3 and level.executing == 3, what="the busy level to run three at once")
            assert lender.seats < 3  # it lent
            metrics = http.get("/metrics").text
            assert 'apiserver_flowcontrol_upper_limit_seats{priority_level="busy"} 3.0' in metrics
            assert 'apiserver_flowcontrol_lower_limit_seats{priority_level="busy"} 1.0' in metrics
            assert 'apiserver_flowcontrol_lower_limit_seats{priority_level="workload-low"} 0.0' in metrics
            assert 'apiserver_flowcontrol_target_seats{priority_level="busy"}' in metrics
            assert level.executing <= 3  # never past its borrowing limit
        finally:
            for t in flood:
                t.join(120)
        wait_for(lambda: level.executing == 0 and level.waiting == 0, what="the busy level to drain")


@pytest.mark.kubectl
def test_a_flowschema_naming_a_missing_level_is_dangling(tmp_path):
    from tests.support.kube import Kubectl

    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        def dangling(name: str) -> dict | None:
            fs = http.get(f"{FC}/flowschemas/{name}").json()
            return next((c for c in (fs.get("status") or {}).get("conditions") or [] if c["type"] == "Dangling"), None)

        wait_for(lambda: dangling("catch-all") is not None, what="the bootstrap schemas' conditions")
        found = dangling("catch-all")
        assert (found["status"], found["reason"]) == ("False", "Found")
        assert found["message"] == 'This FlowSchema references the PriorityLevelConfiguration object named "catch-all" and it exists'
        r = http.post(f"{FC}/flowschemas", json={
            "metadata": {"name": "orphan"},
            "spec": {"matchingPrecedence": 40, "priorityLevelConfiguration": {"name": "nowhere"},
                     "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
                                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})
        assert r.status_code == 201, r.text
        wait_for(lambda: dangling("orphan") is not None, what="the orphan's condition")
        cond = dangling("orphan")
        assert (cond["status"], cond["reason"]) == ("True", "NotFound")
        assert cond["message"] == ('This FlowSchema references the PriorityLevelConfiguration object named "nowhere" '
                                   'but there is no such object')
        # the dangling schema is skipped: a request it would match goes on to the next one
        uids = {fs["metadata"]["name"]: fs["metadata"]["uid"] for fs in http.get(f"{FC}/flowschemas").json()["items"]}
        assert http.get("/version", headers={"User-Agent": "test/1.0"}).headers["X-Kubernetes-PF-FlowSchema-UID"] != uids["orphan"]
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        rows = {line.split()[0]: line.split() for line in kubectl.run("get", "flowschemas").stdout.splitlines()[1:]}
        assert rows["orphan"][-1] == "True" and rows["catch-all"][-1] == "False"
        r = http.post(f"{FC}/prioritylevelconfigurations", json={
            "metadata": {"name": "nowhere"}, "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1, "limitResponse": {"type": "Reject"}}}})
        assert r.status_code == 201, r.text
        wait_for(lambda: (dangling("orphan") or {}).get("status") == "False", what="the orphan to find its level")
        assert dangling("orphan")["reason"] == "Found"
