"""The proxy's pure parts: the service table's endpoint choice and the balancer."""

from __future__ import annotations

from k8py.proxy.balancer import Balancer
from k8py.proxy.service_table import Endpoint, build_table


def _svc(**spec):
    return {"metadata": {"namespace": "d", "name": "s"},
            "spec": {"clusterIP": "127.192.0.5", "clusterIPs": ["127.192.0.5"], "ports": [{"name": "web", "port": 80}], **spec}}


def _slice(*endpoints, port=8080):
    return {"metadata": {"namespace": "d", "name": "s-1", "labels": {"kubernetes.io/service-name": "s"}},
            "addressType": "IPv4", "ports": [{"name": "web", "port": port, "protocol": "TCP"}], "endpoints": list(endpoints)}


def _ep(ip, *, ready=True, serving=True, terminating=False, node="n1"):
    return {"addresses": [ip], "nodeName": node, "conditions": {"ready": ready, "serving": serving, "terminating": terminating}}


def test_ready_endpoints_win_and_terminating_ones_are_the_fallback():
    table = build_table([_svc()], [_slice(_ep("127.64.0.2"), _ep("127.64.0.3", ready=False, terminating=True))], "n1")
    assert [e.ip for e in table[("d", "s", "web")].cluster_endpoints] == ["127.64.0.2"]
    table = build_table([_svc()], [_slice(_ep("127.64.0.3", ready=False, terminating=True),
                                          _ep("127.64.0.4", ready=False, serving=False))], "n1")
    assert [e.ip for e in table[("d", "s", "web")].cluster_endpoints] == ["127.64.0.3"]


def test_local_traffic_policies_and_skipped_services():
    slices = [_slice(_ep("127.64.0.2", node="n1"), _ep("127.64.0.3", node="n2"))]
    entry = build_table([_svc(internalTrafficPolicy="Local", type="NodePort", externalTrafficPolicy="Cluster")], slices, "n1")[("d", "s", "web")]
    assert [e.ip for e in entry.cluster_endpoints] == ["127.64.0.2"]
    assert [e.ip for e in entry.external_endpoints] == ["127.64.0.2", "127.64.0.3"]
    assert build_table([_svc(clusterIP="None", clusterIPs=["None"])], slices, "n1") == {}
    assert build_table([_svc(type="ExternalName", externalName="x.example")], slices, "n1") == {}


def test_round_robin_and_client_ip_affinity_with_its_timeout():
    now = [0.0]
    eps = [Endpoint("127.64.0.2", 80), Endpoint("127.64.0.3", 80)]
    rr = Balancer()
    assert [rr.pick("c", eps).ip for _ in range(4)] == ["127.64.0.2", "127.64.0.3", "127.64.0.2", "127.64.0.3"]
    sticky = Balancer(affinity=True, affinity_timeout=10, monotonic=lambda: now[0])
    first = sticky.pick("10.0.0.1", eps)
    assert all(sticky.pick("10.0.0.1", eps) == first for _ in range(5))
    assert sticky.pick("10.0.0.1", [e for e in eps if e != first]) != first  # its endpoint went away
    now[0] = 100.0
    sticky.prune()
    assert sticky._sessions == {}
    assert sticky.pick("c", eps, exclude={eps[0].address, eps[1].address}) is None
