"""Simulated nodes renew their Leases as kubelets do, and less often when there are thousands."""

from __future__ import annotations

from k8py.kubelet.simulated_nodes import MAX_RENEWALS_PER_SECOND, lease_renew_interval


def test_many_simulated_nodes_renew_their_leases_less_often_but_twice_per_lease() -> None:
    assert lease_renew_interval(10.0, 40, 1000) == 10.0  # a kubelet's interval up to 2,500 nodes
    assert lease_renew_interval(10.0, 40, 5000) == 20.0 and 5000 / 20.0 <= MAX_RENEWALS_PER_SECOND
    assert lease_renew_interval(10.0, 40, 50_000) == 20.0  # never less than twice per lease duration
    assert lease_renew_interval(30.0, 40, 5000) == 30.0  # a longer configured interval is kept
