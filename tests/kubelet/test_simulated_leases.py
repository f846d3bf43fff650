"""Simulated nodes renew their Leases as kubelets do, and less often when there are thousands."""

from __future__ import annotations

from k8py.kubelet.simulated_nodes import MAX_RENEWALS_PER_SECOND, lease_renew_interval


def test_many_simulated_nodes_renew_their_leases_less_often_but_twice_per_lease() -> None:
    assert lease_renew_interval(10.0, 40, 1000) == 10.0  # a kubelet's interval up to 2,500 nodes
    assert lease_renew_interval(10.0, 40, 5000) == 20.0 and 5000 / 20.0 <= MAX_RENEWALS_PER_SECOND
    assert lease_renew_interval(10.0, 40, 50_000) == 20.0  # never less than twice per lease duration
    assert lease_renew_interval(30.0, 40, 5000) == 30.0  # a longer configured interval is kept


def test_an_unchanged_simulated_node_reposts_its_status_every_ten_minutes_as_kwok(tmp_path) -> None:
    import asyncio

    from k8py.client.config import ClientConfig
    from k8py.client.rest import RestClient
    from k8py.kubelet.config import KubeletConfig
    from k8py.kubelet.simulated_nodes import NODE_STATUS_REPORT_SECONDS, SimulatedNodes

    async def build() -> tuple[float, float]:
        async with RestClient(ClientConfig(server="http://127.0.0.1:9")) as client:  # never contacted
            nodes = SimulatedNodes(client, KubeletConfig(node_name="sim", root_dir=str(tmp_path)), count=1)
            await nodes.heartbeat.close()
            await nodes.status_client.close()
            return nodes.nodes[0].config.node_status_report_frequency, nodes.nodes[0].config.node_status_update_frequency

    report, update = asyncio.run(build())
    assert report == NODE_STATUS_REPORT_SECONDS == 600.0  # a kubelet's default is 300
    assert update == 30.0  # changes are still looked for every 30 s


def test_enough_heartbeats_are_in_flight_to_renew_every_lease_through_a_second_of_server_latency() -> None:
    from k8py.kubelet.simulated_nodes import HEARTBEAT_CONCURRENCY

    # renewals a second = requests in flight / latency: at 1 s, all 250 a second still go through
    assert HEARTBEAT_CONCURRENCY / 1.0 >= MAX_RENEWALS_PER_SECOND
    # and at 2 s each of 5,000 nodes still renews inside the node lifecycle controller's 50 s grace
    assert 5000 / (HEARTBEAT_CONCURRENCY / 2.0) < 50


def test_the_pods_status_writes_have_connections_of_their_own(tmp_path) -> None:
    import asyncio

    from k8py.client.config import ClientConfig
    from k8py.client.rest import RestClient
    from k8py.kubelet.config import KubeletConfig
    from k8py.kubelet.simulated_nodes import STATUS_CONCURRENCY, SimulatedNodes

    async def build() -> tuple[bool, int]:
        async with RestClient(ClientConfig(server="http://127.0.0.1:9")) as client:  # never contacted
            nodes = SimulatedNodes(client, KubeletConfig(node_name="sim", root_dir=str(tmp_path)), count=2)
            apart = nodes.status.client is nodes.status_client and nodes.status_client is not client
            await nodes.heartbeat.close()
            await nodes.status_client.close()
            return apart, nodes.status._limit._value

    apart, concurrency = asyncio.run(build())
    assert apart and concurrency == STATUS_CONCURRENCY >= 100  # well above one kubelet's 16
