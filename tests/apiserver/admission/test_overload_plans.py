"""APF's per-request fast path: requests of one kind share one plan (a status patch names a new pod
each time), and after a burst every seat, and every queue's count of executing requests, is given
back — the accounting stays exact whichever path a request took."""

from __future__ import annotations

import concurrent.futures

import httpx
import pytest

from tests.support.servers import ServerThread, sqlite_storage

KUBELET = {"User-Agent": "k8py-kubelet/0.1 (n1)"}


@pytest.fixture
def server(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as s:
        yield s


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_status_patches_of_many_pods_share_a_plan_and_give_every_seat_back(server):
    pods = [f"p-{i}" for i in range(40)]
    base = "/api/v1/namespaces/default/pods"
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for name in pods:
            assert http.post(base, json=_pod(name), headers=KUBELET).status_code == 201
        flow_control = server.server.overload
        shapes_before = len(flow_control.config().shapes)

        def patch(name: str) -> int:
            r = http.patch(f"{base}/{name}/status", headers={**KUBELET, "Content-Type": "application/merge-patch+json"},
                           content=b'{"status": {"phase": "Running"}}')
            return r.status_code

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert set(pool.map(patch, pods)) == {200}
        config = flow_control.config()
        # forty pods, one kind of request: one new plan, forty (path-keyed) entries pointing at it
        assert len(config.shapes) == shapes_before + 1
        plans = {id(plan) for (plan, _a) in (config.plans[k] for k in config.plans if "/status" in k[4])}
        assert len(plans) == 1
        names = {a.name for k, (_p, a) in config.plans.items() if "/status" in k[4]}
        assert names == set(pods)  # each request kept its own attributes (its pod's name)
        assert http.get("/version", headers=KUBELET).status_code == 200
    for name, level in config.limited.items():
        qs = level.queues
        assert qs.seats_in_use == 0 and qs.executing == 0, name
        assert not any(qs._executing_by_queue), name
