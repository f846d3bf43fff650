"""The pod resolv.conf the kubelet writes (upstream's DNS configurer rules)."""

from __future__ import annotations

from k8py.kubelet.dns_config import resolv_conf


def _pod(**spec):
    return {"metadata": {"name": "p", "namespace": "shop"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_cluster_first_uses_the_cluster_dns_search_path_and_ndots(tmp_path):
    host = tmp_path / "resolv.conf"
    host.write_text("nameserver 192.0.2.1\nsearch corp.example\noptions timeout:2\n")
    text, warning = resolv_conf(_pod(), cluster_dns=["127.192.0.10"], cluster_domain="cluster.local", host_resolv_conf=str(host))
    assert warning is None
    assert text == ("nameserver 127.192.0.10\n"
                    "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example\n"
                    "options ndots:5\n")


def test_default_policy_and_host_network_get_the_hosts_file(tmp_path):
    host = tmp_path / "resolv.conf"
    host.write_text("nameserver 192.0.2.1\nsearch corp.example\noptions timeout:2\n")
    expected = "nameserver 192.0.2.1\nsearch corp.example\noptions timeout:2\n"
    for pod in (_pod(dnsPolicy="Default"), _pod(hostNetwork=True)):
        assert resolv_conf(pod, cluster_dns=["127.192.0.10"], cluster_domain="cluster.local", host_resolv_conf=str(host))[0] == expected
    with_host_net = resolv_conf(_pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"), cluster_dns=["127.192.0.10"],
                                cluster_domain="cluster.local", host_resolv_conf=str(host))[0]
    assert with_host_net.startswith("nameserver 127.192.0.10\n")


def test_no_cluster_dns_falls_back_to_default_with_a_warning(tmp_path):
    host = tmp_path / "resolv.conf"
    host.write_text("nameserver 192.0.2.1\n")
    text, warning = resolv_conf(_pod(), cluster_dns=[], cluster_domain="cluster.local", host_resolv_conf=str(host))
    assert text == "nameserver 192.0.2.1\n"
    assert 'falling back to "Default" policy' in warning


def test_none_policy_takes_only_dns_config_and_options_override(tmp_path):
    config = {"nameservers": ["192.0.2.9", "192.0.2.9", "192.0.2.8", "192.0.2.7", "192.0.2.6"],
              "searches": ["a.example"], "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}
    text, _ = resolv_conf(_pod(dnsPolicy="None", dnsConfig=config), cluster_dns=["127.192.0.10"], cluster_domain="cluster.local",
                          host_resolv_conf=str(tmp_path / "missing"))
    assert text == "nameserver 192.0.2.9\nnameserver 192.0.2.8\nnameserver 192.0.2.7\nsearch a.example\noptions ndots:2 edns0\n"
    merged, _ = resolv_conf(_pod(dnsConfig={"options": [{"name": "ndots", "value": "1"}], "searches": ["x.example"]}),
                            cluster_dns=["127.192.0.10"], cluster_domain="k8s.test", host_resolv_conf=str(tmp_path / "missing"))
    assert merged == "nameserver 127.192.0.10\nsearch shop.svc.k8s.test svc.k8s.test k8s.test x.example\noptions ndots:1\n"
