"""The nftables backend's ruleset text (pure; runs anywhere, no nft needed)."""

from __future__ import annotations


def test_the_nftables_ruleset_is_one_transaction_with_numgen_and_affinity_sets() -> None:
    from k8py.proxy.nftables import ruleset
    from k8py.proxy.service_table import Endpoint, ServicePort

    eps = (Endpoint("10.1.1.2", 8080), Endpoint("10.1.1.3", 8080))
    table = {("d", "web", ""): ServicePort("d", "web", "", "TCP", 80, ("10.2.0.10",), node_port=30080, session_affinity=True,
                                           affinity_timeout=60, cluster_endpoints=eps, external_endpoints=eps, all_endpoints=eps),
             ("d", "none", ""): ServicePort("d", "none", "", "TCP", 81, ("10.2.0.11",))}
    text = ruleset.render("k8py-n", table, ["127.0.0.1"])
    assert text.startswith("add table ip k8py-n\ndelete table ip k8py-n\ntable ip k8py-n {")
    assert "numgen random mod 2 vmap" in text and "10.2.0.10 . tcp . 80 : goto service-" in text
    assert "10.2.0.11 . tcp . 81 : goto reject-chain" in text and "tcp . 30080 : goto external-" in text
    assert text.count("timeout 60s") == 2 and text.count("update @affinity-") == 2
    # every chain a rule jumps to is declared before it is named
    import re

    declared: list[str] = []
    for line in text.splitlines():
        m = re.match(r"\s*chain (\S+) \{", line)
        if m:
            declared.append(m.group(1))
            continue
        for target in re.findall(r"goto ([\w-]+)", line):
            if "elements" not in line:
                assert target in declared, (target, line)


def test_external_and_load_balancer_ips_go_through_the_external_chain_or_are_rejected() -> None:
    from k8py.proxy.nftables import ruleset
    from k8py.proxy.service_table import Endpoint, ServicePort

    eps = (Endpoint("10.1.1.2", 8080),)
    table = {("d", "lb", ""): ServicePort("d", "lb", "", "TCP", 80, ("10.2.0.10",), external_ips=("192.0.2.7",),
                                          cluster_endpoints=eps, external_endpoints=eps, all_endpoints=eps),
             ("d", "gone", ""): ServicePort("d", "gone", "", "UDP", 53, ("10.2.0.11",), external_ips=("192.0.2.8",))}
    text = ruleset.render("k8py-n", table, ["127.0.0.1"])
    assert "192.0.2.7 . tcp . 80 : goto external-" in text  # no node port needed
    assert "192.0.2.8 . udp . 53 : goto reject-chain" in text


def test_load_balancer_source_ranges_drop_other_clients_before_dnat() -> None:
    from k8py.proxy.nftables import ruleset
    from k8py.proxy.service_table import Endpoint, ServicePort

    eps = (Endpoint("10.1.1.2", 8080),)
    table = {("d", "lb", ""): ServicePort("d", "lb", "", "TCP", 80, ("10.2.0.10",), load_balancer_ips=("192.0.2.9",),
                                          source_ranges=("198.51.100.0/24",), cluster_endpoints=eps, external_endpoints=eps,
                                          all_endpoints=eps)}
    text = ruleset.render("k8py-n", table, ["127.0.0.1"])
    assert "192.0.2.9 . tcp . 80 : goto external-" in text and "192.0.2.9 . tcp . 80 : goto firewall-" in text
    assert "ip saddr != { 198.51.100.0/24 } drop" in text
    assert "type filter hook prerouting priority -110; policy accept;" in text


def test_a_local_policy_with_endpoints_only_elsewhere_drops_and_no_endpoints_at_all_rejects() -> None:
    from k8py.proxy.nftables import ruleset
    from k8py.proxy.service_table import Endpoint, ServicePort

    remote = (Endpoint("10.1.1.2", 8080, node_name="other"),)
    table = {("d", "local", ""): ServicePort("d", "local", "", "TCP", 80, ("10.2.0.10",), node_port=30080, all_endpoints=remote),
             ("d", "none", ""): ServicePort("d", "none", "", "TCP", 81, ("10.2.0.11",), node_port=30081)}
    text = ruleset.render("k8py-n", table, ["127.0.0.1"])
    assert "10.2.0.10 . tcp . 80 : drop" in text and "tcp . 30080 : drop" in text
    assert "10.2.0.11 . tcp . 81 : goto reject-chain" in text and "tcp . 30081 : goto reject-chain" in text
