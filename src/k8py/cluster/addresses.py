"""Where a ``k8py up`` cluster lives on this machine: its ports, pod range and Service range.

Every port is fixed once, when the cluster starts (a free one where none is
asked for, the previous one when a resumed cluster's is still free), so a
restarted component comes back where the others expect it. The pod range and
the Service range are picked at random among blocks of loopback (or, with
pods in their own network namespaces, of 10.x) so that two clusters on one
machine, such as parallel test sessions, rarely collide (a 10.x block is also
kept off every route already on the machine); the Service range is
taken only where its DNS address (port 53) and ``kubernetes`` Service address
(port 443) are free now. Nothing here starts a process or writes a file.
"""

from __future__ import annotations

import ipaddress
import random
import socket
import struct

from k8py.cluster.spec import ClusterSpec, api_server_name

__all__ = ["DEFAULT_SERVICE_CIDR", "DNS_PORT", "free_port", "all_ports", "pick_cluster_cidr", "pick_service_cidr", "routed_networks",
           "service_cidr_for", "dns_ip", "kubernetes_service_ip"]

#: the API server's own default Service range, and DNS' port
DEFAULT_SERVICE_CIDR, DNS_PORT = "127.192.0.0/12", 53


def free_port(bind: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((bind, 0))
        return int(s.getsockname()[1])


def routed_networks() -> list[ipaddress.IPv4Network]:
    """The destinations of this machine's main routing table (``/proc/net/route``): the
    bridges and Service routes of the other clusters here among them."""
    try:
        with open("/proc/net/route", encoding="ascii") as f:
            rows = [line.split() for line in f.read().splitlines()[1:]]
    except OSError:
        return []
    nets = []
    for row in rows:
        if len(row) >= 8:
            destination, mask = (ipaddress.IPv4Address(struct.pack("<I", int(v, 16))) for v in (row[1], row[7]))
            nets.append(ipaddress.IPv4Network(f"{destination}/{mask}", strict=False))
    return nets


def pick_cluster_cidr(spec: ClusterSpec, rng: random.Random | None = None,
                      routed: list[ipaddress.IPv4Network] | None = None) -> str:
    """The pod range of a new cluster: a random /16 of 127.64.0.0/10 (256
    nodes of /24), so that two clusters on one machine (parallel test
    sessions) rarely hand out the same pod IPs, whose ports would collide;
    the whole /10 when the cluster has more nodes than a /16 holds."""
    if spec.pods_in_netns:
        # pods on bridges need routable addresses: a random 10.x.0.0/17 (the /24 above it is the Service range),
        # x among those no route on this machine touches (another cluster's bridges and Service route)
        taken = [n for n in (routed_networks() if routed is None else routed) if n.prefixlen > 0]
        free = [x for x in range(100, 250) if not any(n.overlaps(ipaddress.ip_network(f"10.{x}.0.0/16")) for n in taken)]
        return f"10.{(rng or random.Random()).choice(free or range(100, 250))}.0.0/17"
    if spec.expected_nodes > 250:
        return "127.64.0.0/10"
    return f"127.{64 + (rng or random.Random()).randrange(64)}.0.0/16"


def service_cidr_for(cluster_cidr: str) -> str:
    """With ``podNetwork: cni``: the Service range beside the pod range ``10.x.0.0/17``: ``10.x.128.0/24``
    (not loopback: pods in their own namespaces cannot reach the host's 127.x)."""
    a = cluster_cidr.split(".")[1]
    return f"10.{a}.128.0/24"


#: the Service ranges k8py up picks from: the /20s of 127.192.0.0/12, the API server's default range
SERVICE_BLOCKS, SERVICE_PREFIX = ipaddress.ip_network("127.192.0.0/12"), 20


def dns_ip(service_cidr: str) -> str:
    """Where k8py dns answers: the kube-dns Service's cluster IP, the range's 10th address
    as kubeadm places it. On a loopback range every pod shares it with the host; with pods
    in their own namespaces (a 10.x range) :mod:`k8py.cluster.dns_address` makes it local
    to the host on a link of the cluster's own, which pods reach through their gateway."""
    return str(ipaddress.ip_network(service_cidr)[10])


def kubernetes_service_ip(service_cidr: str) -> str:
    """The ``kubernetes`` Service's ClusterIP (named in the API server's certificate): the range's first address."""
    return str(ipaddress.ip_network(service_cidr, strict=False)[1])


def pick_service_cidr(spec: ClusterSpec, rng: random.Random | None = None) -> str:
    """The Service range of a new cluster: a random /20 of 127.192.0.0/12 whose
    DNS address (port 53) and ``kubernetes`` Service address (port 443) are free
    now, so that two clusters on one machine do not fight over the same cluster
    IPs (their proxies and DNS servers bind them on this machine's loopback).
    A range given to the API server in the config file wins."""
    given = [str(a) for a in spec.extra_args.get("apiserver", [])]
    for i, arg in enumerate(given):
        if arg == "--service-cluster-ip-range" and i + 1 < len(given):
            return given[i + 1]
        if arg.startswith("--service-cluster-ip-range="):
            return arg.split("=", 1)[1]
    rng = rng or random.Random()
    blocks = list(SERVICE_BLOCKS.subnets(new_prefix=SERVICE_PREFIX))
    choice = blocks[0]
    for choice in rng.sample(blocks, 32):
        if (not spec.dns or _udp_bindable(dns_ip(str(choice)), DNS_PORT)) and _bindable(str(choice[1]), 443):
            break
    return str(choice)


def all_ports(spec: ClusterSpec, previous: dict[str, int] | None = None, *,
              service_cidr: str = DEFAULT_SERVICE_CIDR) -> dict[str, int]:
    """Fixed ports for every component: the API server's from the spec (a free
    one for 0), the others' reused from ``previous`` (a resumed cluster) or free;
    DNS on port 53 of the Service range's DNS address when that is free."""
    previous = previous or {}
    reuse = lambda name, bind="127.0.0.1": previous.get(name) if previous.get(name) and _bindable(bind, previous[name]) else free_port(bind)  # noqa: E731
    ports = {"apiserver": spec.port or reuse("apiserver", spec.bind)}
    names = [*(api_server_name(i) for i in range(1, spec.apiservers)), "controller-manager", "scheduler",
             *(f"kubelet/{n}" for n in spec.node_names()),
             *(f"containerd/{n}" for n in spec.node_names() if spec.runs_containerd)]
    if spec.simulated_nodes:
        names.append("kubelet/simulated")
    if spec.proxy and spec.nodes:
        names.append("proxy")
    if spec.dns:
        names.append("dns")
        ip = dns_ip(service_cidr)
        if spec.pods_in_netns:
            ports["dns/udp"] = DNS_PORT  # on an address of the cluster's own (k8py.cluster.dns_address): always free
        else:
            ports["dns/udp"] = DNS_PORT if _udp_bindable(ip, DNS_PORT) else (previous.get("dns/udp") or _free_udp_port(ip))
    for name in names:
        ports[name] = reuse(name)
    return ports


def _udp_bindable(bind: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((bind, port))
        except OSError:
            return False
    return True


def _free_udp_port(bind: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((bind, 0))
        return int(s.getsockname()[1])


def _bindable(bind: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((bind, port))
        except OSError:
            return False
    return True
