"""The cluster spec: config files, component command lines, kubeconfig merging."""

from __future__ import annotations

import ipaddress
import os
import random
import subprocess

import pytest
import yaml

from k8py.cluster.kubeconfig import merge_into_user_kubeconfig, write_kubeconfig
from k8py.cluster.addresses import all_ports, pick_cluster_cidr, pick_service_cidr, routed_networks
from k8py.cluster.commands import component_specs
from k8py.cluster.spec import ClusterSpec, SpecError, load_config_file


def test_a_config_file_with_an_unknown_field_is_refused_with_the_known_ones(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("kind: Cluster\nnode: 3\n")
    with pytest.raises(SpecError, match=r"unknown fields \['node'\].*known:.*'nodes'"):
        load_config_file(str(path))


def test_component_arguments_must_be_lists(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("components: {kubelet: '--max-pods 5'}\n")
    with pytest.raises(SpecError, match="components.kubelet"):
        load_config_file(str(path))


def test_each_node_gets_its_own_kubelet_root_and_port_and_simulated_nodes_one_process(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0, nodes=2, simulated_nodes=50, extra_args={"kubelet": ["--max-pods", "7"]})
    ports = all_ports(spec)
    comps = {c.name: c for c in component_specs(spec, ports)}
    assert list(comps) == ["apiserver", "controller-manager", "scheduler", "proxy", "kubelet/k8py-node-0", "kubelet/k8py-node-1",
                           "kubelet/simulated", "dns"]
    tcp = {k: v for k, v in ports.items() if k != "dns/udp"}
    assert len(set(tcp.values())) == len(tcp) and ports["apiserver"] != 0
    assert comps["proxy"].argv[comps["proxy"].argv.index("--node-name") + 1] == "k8py-node-0"  # one proxy: one loopback
    k0, k1, sim = comps["kubelet/k8py-node-0"].argv, comps["kubelet/k8py-node-1"].argv, comps["kubelet/simulated"].argv
    assert k0[k0.index("--root-dir") + 1] != k1[k1.index("--root-dir") + 1]
    assert k0[-2:] == ["--max-pods", "7"] and sim[sim.index("--nodes") + 1] == "50" and "--simulated" in sim
    assert "--rotate-certificates" in k0 and "--rotate-certificates" in k1  # client certificates renewed by CSR, as kubeadm
    assert comps["apiserver"].health == f"https://127.0.0.1:{ports['apiserver']}/readyz"


def test_without_proxy_and_dns_there_are_none(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0, proxy=False, dns=False)
    assert [c.name for c in component_specs(spec, all_ports(spec))] == ["apiserver", "controller-manager", "scheduler", "kubelet/k8py-node-0"]


def test_a_cluster_gets_its_own_pod_range_unless_one_is_given(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0)
    cidrs = {pick_cluster_cidr(spec, random.Random(seed)) for seed in range(20)}
    assert len(cidrs) > 10 and all(c.startswith("127.") and c.endswith(".0.0/16") for c in cidrs)
    assert pick_cluster_cidr(ClusterSpec(data_dir=str(tmp_path), simulated_nodes=1000)) == "127.64.0.0/10"
    cm = component_specs(spec, all_ports(spec), cluster_cidr="127.70.0.0/16")[1].argv
    assert cm[cm.index("--cluster-cidr") + 1] == "127.70.0.0/16"
    spec.extra_args = {"controller-manager": ["--cluster-cidr", "10.0.0.0/8"]}
    cm = component_specs(spec, all_ports(spec), cluster_cidr="127.70.0.0/16")[1].argv
    assert cm.count("--cluster-cidr") == 1 and cm[-1] == "10.0.0.0/8"


def test_pods_in_their_own_namespaces_get_a_10_x_block_that_no_route_here_touches(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0, pod_network="cni")
    # every block but 10.177 carries a route (another cluster's bridge or Service route, a /8 of someone's)
    routed = [ipaddress.ip_network(f"10.{x}.{random.choice((0, 5, 128))}.0/24") for x in range(100, 177)]
    routed += [ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("10.178.0.0/15"), ipaddress.ip_network("10.180.0.0/14"),
               *(ipaddress.ip_network(f"10.{x}.0.0/16") for x in range(184, 250))]
    assert {pick_cluster_cidr(spec, random.Random(seed), routed) for seed in range(10)} == {"10.177.0.0/17"}
    # this machine's own routes are read from /proc/net/route: the main table, as ip shows it (read between
    # two readings, since other tests' clusters may add or remove a bridge meanwhile)
    before = set(routed_networks())
    shown = subprocess.run(["ip", "-4", "route", "show", "table", "main"], capture_output=True, text=True, check=True).stdout
    after = set(routed_networks())
    dests = {ipaddress.ip_network("0.0.0.0/0" if line.split()[0] == "default" else line.split()[0], strict=False)
             for line in shown.splitlines() if line.split()}
    assert before & after <= dests <= before | after and dests


def test_a_resumed_cluster_keeps_its_ports_when_they_are_free(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0)
    first = all_ports(spec)
    assert all_ports(spec, first) == first


def test_merging_adds_a_k8py_context_and_keeps_the_users_others(tmp_path):
    ours = write_kubeconfig(str(tmp_path / "data" / "kubeconfig"), "http://127.0.0.1:1234")
    target = tmp_path / "kube" / "config"
    os.makedirs(target.parent)
    target.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "prod",
                                      "clusters": [{"name": "prod", "cluster": {"server": "https://prod"}}],
                                      "users": [{"name": "prod", "user": {"token": "t"}}],
                                      "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "prod"}}]}))
    assert merge_into_user_kubeconfig(ours, target=str(target)) == str(target)
    merge_into_user_kubeconfig(ours, target=str(target))  # twice: replaced, not duplicated
    doc = yaml.safe_load(target.read_text())
    assert doc["current-context"] == "k8py"
    assert [c["name"] for c in doc["clusters"]] == ["prod", "k8py"]
    assert next(c for c in doc["clusters"] if c["name"] == "k8py")["cluster"]["server"] == "http://127.0.0.1:1234"
    assert [c["name"] for c in doc["contexts"]] == ["prod", "k8py"]


def test_on_etcd_the_api_server_gets_the_servers_and_prefix(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0, etcd_servers=["http://127.0.0.1:2379", "http://127.0.0.1:22379"],
                       etcd_prefix="/k8py", trace=True)
    api = component_specs(spec, all_ports(spec))[0].argv
    assert api[api.index("--etcd-servers") + 1] == "http://127.0.0.1:2379,http://127.0.0.1:22379"
    assert api[api.index("--etcd-prefix") + 1] == "/k8py" and "--trace" in api


def test_flags_win_over_the_config_file(tmp_path):
    from k8py.cli.main import build_parser
    from k8py.cli.up import _spec

    path = tmp_path / "c.yaml"
    path.write_text("kind: Cluster\nnodes: 3\nsimulatedNodes: 5\nport: 7000\ndns: false\nzygote: false\ncomponents: {scheduler: ['--no-events']}\n")
    args = build_parser().parse_args(["up", "--config", str(path), "--data-dir", str(tmp_path / "d"), "--nodes", "2"])
    spec = _spec(args)
    assert (spec.nodes, spec.simulated_nodes, spec.port, spec.dns, spec.proxy, spec.zygote) == (2, 5, 7000, False, True, False)
    assert spec.extra_args == {"scheduler": ["--no-events"]}


def test_more_api_servers_share_etcd_each_on_its_port_and_none_writes_a_kubeconfig(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0, etcd_servers=["http://127.0.0.1:2379"], apiservers=3)
    ports = all_ports(spec)
    apis = [c for c in component_specs(spec, ports) if c.name.startswith("apiserver")]
    assert [c.name for c in apis] == ["apiserver", "apiserver-1", "apiserver-2"]
    assert len({ports[c.name] for c in apis}) == 3
    # k8py up writes every kubeconfig (with its certificates) itself
    assert all("--no-kubeconfig" in c.argv and "--kubeconfig" not in c.argv for c in apis)
    assert all(c.argv[c.argv.index("--client-ca-file") + 1].endswith("/pki/ca.crt") for c in apis)


def test_more_api_servers_without_etcd_are_refused_with_what_to_do(tmp_path):
    from k8py.cli.main import build_parser
    from k8py.cli.up import _spec

    with pytest.raises(SpecError, match="needs --etcd-servers"):
        _spec(build_parser().parse_args(["up", "--data-dir", str(tmp_path), "--apiservers", "2"]))


def test_with_pods_in_their_own_namespaces_the_proxy_is_told_nftables_unless_the_config_says_otherwise(tmp_path):
    def proxy_argv(**kw: object) -> list[str]:
        spec = ClusterSpec(data_dir=str(tmp_path), port=0, **kw)
        return {c.name: c.argv for c in component_specs(spec, all_ports(spec))}["proxy"]

    # not "auto", which waits a while for the Node's label and then settles on userspace for good
    argv = proxy_argv(pod_network="cni")
    assert argv[argv.index("--proxy-mode") + 1] == "nftables"
    assert "--proxy-mode" not in proxy_argv()  # loopback pods: auto, which picks userspace
    given = proxy_argv(pod_network="cni", extra_args={"proxy": ["--proxy-mode=userspace"]})
    assert "--proxy-mode=userspace" in given and "nftables" not in given


def test_kubelets_point_pods_at_k8py_dns_only_when_it_has_port_53(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0, nodes=1)
    ports = all_ports(spec)
    on_53 = {c.name: c.argv for c in component_specs(spec, {**ports, "dns/udp": 53})}["kubelet/k8py-node-0"]
    assert on_53[on_53.index("--cluster-dns") + 1] == "127.192.0.10"  # the default range's
    picked = {c.name: c.argv for c in component_specs(spec, {**ports, "dns/udp": 53}, service_cidr="127.193.16.0/20")}
    assert picked["kubelet/k8py-node-0"][picked["kubelet/k8py-node-0"].index("--cluster-dns") + 1] == "127.193.16.10"
    assert picked["dns"][picked["dns"].index("--bind") + 1] == "127.193.16.10"
    assert picked["apiserver"][picked["apiserver"].index("--service-cluster-ip-range") + 1] == "127.193.16.0/20"
    elsewhere = {c.name: c.argv for c in component_specs(spec, {**ports, "dns/udp": 10053})}["kubelet/k8py-node-0"]
    assert "--cluster-dns" not in elsewhere  # resolv.conf cannot name another port
    no_dns = ClusterSpec(data_dir=str(tmp_path), port=0, nodes=1, dns=False)
    argv = {c.name: c.argv for c in component_specs(no_dns, all_ports(no_dns))}["kubelet/k8py-node-0"]
    assert "--cluster-dns" not in argv


def test_each_new_cluster_picks_its_own_service_range_with_room_and_a_given_one_wins(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0)
    picked = {pick_service_cidr(spec, random.Random(seed)) for seed in range(20)}
    assert len(picked) > 10  # two clusters on one machine rarely share cluster IPs
    for cidr in picked:
        network = ipaddress.ip_network(cidr)
        assert network.prefixlen == 20 and network.subnet_of(ipaddress.ip_network("127.192.0.0/12"))
    given = ClusterSpec(data_dir=str(tmp_path), extra_args={"apiserver": ["--service-cluster-ip-range", "127.200.0.0/16"]})
    assert pick_service_cidr(given) == "127.200.0.0/16"
    api = component_specs(given, all_ports(given), service_cidr="127.200.0.0/16")[0].argv
    assert api.count("--service-cluster-ip-range") == 1


def test_the_api_server_gets_the_front_proxy_pair_unless_the_config_gives_one(tmp_path):
    spec = ClusterSpec(data_dir=str(tmp_path), port=0)
    api = component_specs(spec, all_ports(spec))[0].argv
    assert api[api.index("--proxy-client-cert-file") + 1] == os.path.join(str(tmp_path), "pki", "front-proxy-client.crt")
    assert api[api.index("--requestheader-client-ca-file") + 1] == os.path.join(str(tmp_path), "pki", "front-proxy-ca.crt")
    own = ClusterSpec(data_dir=str(tmp_path), port=0, extra_args={"apiserver": ["--proxy-client-cert-file=/x.crt"]})
    assert "--requestheader-client-ca-file" not in component_specs(own, all_ports(own))[0].argv
