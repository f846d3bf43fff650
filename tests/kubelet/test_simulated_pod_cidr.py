"""Simulated nodes without node IPAM still hand out loopback pod IPs only."""

from __future__ import annotations

import ipaddress

from k8py.kubelet.simulated_nodes import _fallback_pod_cidr

LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
CLUSTER_CIDR = ipaddress.ip_network("127.64.0.0/10")
SERVICE_RANGE = ipaddress.ip_network("127.192.0.0/12")


def test_the_fallback_ranges_are_loopback_and_clear_of_pods_and_services() -> None:
    seen = set()
    for index in range(16_384):
        net = ipaddress.ip_network(_fallback_pod_cidr(index))
        assert net.prefixlen == 24 and net.subnet_of(LOOPBACK)
        assert not net.overlaps(CLUSTER_CIDR) and not net.overlaps(SERVICE_RANGE)
        assert ipaddress.ip_address("127.0.0.1") not in net
        seen.add(net)
    assert len(seen) == 16_384  # every node its own range

