"""API Priority and Fairness over HTTP: upstream's bootstrap FlowSchemas and priority levels are
served, every response names the schema and level it was classified into, and a user who
floods fills only its own flow's queues (429 when they are full) while a controller, in its own
level, keeps reading and writing."""

from __future__ import annotations

import threading
import time

import httpx
import kubernetes
import pytest

from k8py.apiserver.authn.user import UNSECURED, UserInfo
from k8py.apiserver.overload import flow_control_user
from tests.support.servers import ServerThread, sqlite_storage

CONTROLLER = {"User-Agent": "k8py-controller-manager/0.1"}
FLOODER = {"User-Agent": "flooder/1.0"}
FC = "/apis/flowcontrol.apiserver.k8s.io/v1"


@pytest.fixture
def server(tmp_path):
    # 5 seats in all, shared out by nominalConcurrencyShares; queued requests may wait a minute
    with ServerThread(sqlite_storage(str(tmp_path / "data")), max_requests_inflight=3, max_mutating_requests_inflight=2,
                      flow_control_wait_limit=60.0) as s:
        yield s


def wait_for(condition, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_upstreams_bootstrap_configuration_is_served(server):
    api = kubernetes.client.FlowcontrolApiserverV1Api(kubernetes.client.ApiClient(kubernetes.client.Configuration(host=server.url)))
    levels = {pl.metadata.name: pl for pl in api.list_priority_level_configuration().items}
    assert set(levels) == {"exempt", "catch-all", "system", "node-high", "leader-election", "workload-high", "workload-low", "global-default"}
    assert levels["exempt"].spec.type == "Exempt"
    workload_low = levels["workload-low"].spec.limited
    assert (workload_low.nominal_concurrency_shares, workload_low.lendable_percent) == (100, 90)
    queuing = workload_low.limit_response.queuing
    assert (queuing.queues, queuing.hand_size, queuing.queue_length_limit) == (128, 6, 50)
    assert levels["catch-all"].spec.limited.limit_response.type == "Reject"
    schemas = {fs.metadata.name: fs for fs in api.list_flow_schema().items}
    assert {"exempt", "probes", "system-leader-election", "system-nodes", "system-node-high", "kube-controller-manager",
            "kube-scheduler", "service-accounts", "global-default", "catch-all"} <= set(schemas)
    assert schemas["exempt"].spec.matching_precedence == 1
    assert schemas["catch-all"].spec.matching_precedence == 10000
    assert schemas["system-nodes"].spec.priority_level_configuration.name == "system"


def test_every_response_names_its_flow_schema_and_priority_level(server):
    with httpx.Client(base_url=server.url, timeout=30) as http:
        uid = {fs["metadata"]["name"]: fs["metadata"]["uid"] for fs in http.get(f"{FC}/flowschemas").json()["items"]}
        levels = {pl["metadata"]["name"]: pl["metadata"]["uid"] for pl in http.get(f"{FC}/prioritylevelconfigurations").json()["items"]}
        r = http.get("/api/v1/namespaces", headers={"User-Agent": "kubectl/v1.32.0"})
        assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == uid["global-default"]
        assert r.headers["X-Kubernetes-PF-PriorityLevel-UID"] == levels["global-default"]
        r = http.get("/api/v1/namespaces/default/pods", headers={"User-Agent": "k8py-kubelet/0.1 (n1)"})
        assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == uid["system-nodes"]
        assert r.headers["X-Kubernetes-PF-PriorityLevel-UID"] == levels["system"]
        r = http.get("/api/v1/nodes", headers={"User-Agent": "k8py-kubelet/0.1 (n1)"})  # its own Node: node-high
        assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == uid["system-node-high"]
        assert r.headers["X-Kubernetes-PF-PriorityLevel-UID"] == levels["node-high"]
        r = http.get("/api/v1/namespaces/default/configmaps", headers=CONTROLLER)
        assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == uid["kube-controller-manager"]


def _flood_level(http: httpx.Client) -> str:
    """A level for the flooder: one seat, one queue of two (the server reads it from its watch cache)."""
    r = http.post(f"{FC}/prioritylevelconfigurations", json={
        "metadata": {"name": "flood"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "borrowingLimitPercent": 0, "limitResponse": {
            "type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 2}}}}})
    assert r.status_code == 201, r.text
    r = http.post(f"{FC}/flowschemas", json={
        "metadata": {"name": "flood"},
        "spec": {"matchingPrecedence": 50, "priorityLevelConfiguration": {"name": "flood"}, "distinguisherMethod": {"type": "ByUser"},
                 "rules": [{"subjects": [{"kind": "User", "user": {"name": "system:unsecured"}}],
                            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True,
                                               "namespaces": ["*"]}]}]}})
    assert r.status_code == 201, r.text
    return r.json()["metadata"]["uid"]


def test_a_flooding_user_fills_only_its_queue_while_a_controller_progresses(server):
    flow_control = server.server.overload
    with httpx.Client(base_url=server.url, timeout=60) as http:
        flood_uid = _flood_level(http)
        wait_for(lambda: http.get("/api/v1/namespaces", headers=FLOODER).headers.get("X-Kubernetes-PF-FlowSchema-UID") == flood_uid,
                 what="the new FlowSchema to classify the flooder")
        # one seat held and the queue full: lists at a future resourceVersion wait (3 s) for it
        slow = [threading.Thread(target=httpx.get, args=(f"{server.url}/api/v1/pods?resourceVersion=99999999",),
                                 kwargs={"headers": FLOODER, "timeout": 60}) for _ in range(3)]
        for t in slow:
            t.start()
        try:
            level = flow_control.queue_set("flood")
            assert level is not None and level.seats == 1
            wait_for(lambda: level.executing == 1 and level.waiting == 2, what="one flooder running, two queued")
            refused = http.get("/api/v1/namespaces/default/configmaps", headers=FLOODER)
            assert refused.status_code == 429
            assert refused.headers["Retry-After"] == "1"
            assert refused.text == "Too many requests, please try again later.\n"
            assert refused.headers["X-Kubernetes-PF-FlowSchema-UID"] == flood_uid
            # the controller's level has its own seats: it reads and writes on, at once
            for i in range(5):
                assert http.get("/api/v1/namespaces/default/configmaps", headers=CONTROLLER).status_code == 200
                r = http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": f"c{i}"}}, headers=CONTROLLER)
                assert r.status_code == 201, r.text
            assert level.executing == 1 and level.waiting == 2  # the flood still waits behind its one seat
            # a watch takes no seat
            with http.stream("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1", headers=FLOODER) as w:
                assert w.status_code == 200
            metrics = http.get("/metrics", headers=CONTROLLER).text
            assert 'apiserver_flowcontrol_rejected_requests_total{flow_schema="flood",priority_level="flood",reason="queue-full"} 1.0' in metrics
            assert 'apiserver_flowcontrol_nominal_limit_seats{priority_level="flood"} 1.0' in metrics
        finally:
            for t in slow:
                t.join(60)
        # the queued requests got the seat in turn and gave it back
        wait_for(lambda: level.executing == 0 and level.waiting == 0, what="the flood level to drain")


def test_every_write_of_a_burst_lands_through_retries_and_seats_are_given_back(server):
    results: list[int] = []
    lock = threading.Lock()

    def write(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as http:
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
    level = server.server.overload.queue_set("global-default")
    assert level is not None and level.executing == 0 and level.waiting == 0


def test_the_insecure_ports_clients_are_classified_as_their_components_would_be():
    assert flow_control_user(UNSECURED, "kubectl/v1.32.0").groups == ("system:authenticated",)  # not system:masters
    assert "system:nodes" in flow_control_user(UNSECURED, "k8py-kubelet/0.1 (node-1)").groups
    assert flow_control_user(UNSECURED, "k8py-scheduler/0.1").name == "system:kube-scheduler"
    admin = UserInfo("admin", groups=("system:masters",))
    assert flow_control_user(admin, "kubectl") is admin  # over TLS the real identity counts


def test_request_headers_and_bodies_are_bounded(server):
    with httpx.Client(base_url=server.url, timeout=30) as http:
        r = http.post("/api/v1/namespaces/default/configmaps", content=b"{" + b" " * (3 * 1024 * 1024 + 10) + b"}",
                      headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        assert r.json()["reason"] == "RequestEntityTooLarge"
        r = http.get("/api/v1/namespaces", headers={"X-Big": "x" * 20_000})
        assert r.status_code in (400, 431)
        assert http.get("/api/v1/namespaces").status_code == 200  # the server is fine afterwards


@pytest.mark.kubectl
def test_kubectl_get_prints_upstreams_columns(server, tmp_path):
    from tests.support.kube import Kubectl

    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    levels = kubectl.run("get", "prioritylevelconfigurations").stdout.splitlines()
    assert levels[0].split() == ["NAME", "TYPE", "NOMINALCONCURRENCYSHARES", "QUEUES", "HANDSIZE", "QUEUELENGTHLIMIT", "AGE"]
    rows = {line.split()[0]: line.split()[1:-1] for line in levels[1:]}
    assert rows["exempt"] == ["Exempt", "<none>", "<none>", "<none>", "<none>"]
    assert rows["catch-all"] == ["Limited", "5", "<none>", "<none>", "<none>"]
    assert rows["workload-low"] == ["Limited", "100", "128", "6", "50"]
    schemas = kubectl.run("get", "flowschemas").stdout.splitlines()
    assert schemas[0].split() == ["NAME", "PRIORITYLEVEL", "MATCHINGPRECEDENCE", "DISTINGUISHERMETHOD", "AGE", "MISSINGPL"]
    rows = {line.split()[0]: line.split()[1:4] for line in schemas[1:]}
    assert rows["exempt"] == ["exempt", "1", "*"]
    assert rows["kube-scheduler"] == ["workload-high", "800", "ByNamespace"]


def test_over_tls_system_masters_is_exempt_and_others_are_classified_by_their_identity(tmp_path):
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,admin,1,"system:masters"\nbob-token,bob,2,"dev"\n')
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None, token_auth_file=str(tokens),
                      max_requests_inflight=3, max_mutating_requests_inflight=2) as server:
        with httpx.Client(base_url=server.url, verify=False, timeout=30) as http:
            admin = {"Authorization": "Bearer admin-token"}
            uid = {fs["metadata"]["name"]: fs["metadata"]["uid"] for fs in http.get(f"{FC}/flowschemas", headers=admin).json()["items"]}
            r = http.get("/api/v1/namespaces", headers=admin)
            assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == uid["exempt"]
            r = http.get("/api/v1/namespaces", headers={"Authorization": "Bearer bob-token"})
            assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == uid["global-default"]
            r = http.get("/healthz")  # anonymous probes are exempt too
            assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == uid["probes"]
