"""Services as nftables rules, in the shape kube-proxy's nftables mode uses.

Everything lives in one table, ``ip k8py-<node>``, owned by this proxy and
nothing else (no rule is ever added to another table, so other users of
netfilter on the machine are untouched). Each sync replaces the table in
one transaction (``add table``; ``delete table``; ``table … { … }``), so a
packet sees either the old rules or the new ones, never half.

Layout (names as kube-proxy's where there is one)::

    map service-ips        ip daddr . l4proto . dport : goto service-…    (cluster IPs;
                           external IPs and load-balancer IPs goto external-…)
    map service-nodeports  l4proto . dport : goto external-…              (node ports)
    set nodeport-ips       the node addresses node ports answer on
    map no-endpoint-services / no-endpoint-nodeports : goto reject-chain
    map firewall-ips       load-balancer IP . l4proto . dport : goto firewall-…
                           (``ip saddr != { loadBalancerSourceRanges } drop``),
                           checked before DNAT (filter prerouting/output, -110)

    nat-prerouting  (nat, prerouting, dstnat)  jump services
    nat-output      (nat, output, -100)        jump services
    nat-postrouting (nat, postrouting, srcnat) mark 0x4000 → masquerade
    filter-forward / filter-output / filter-input (filter, -110):
                    a new connection to a Service port without endpoints is
                    rejected (TCP reset / ICMP port unreachable) at once; one
                    whose endpoints a Local traffic policy leaves elsewhere is
                    dropped, as upstream
    service-<hash>  numgen random mod N vmap { 0 : goto endpoint-<hash>, … }
    external-<hash> mark for masquerade, goto service-<hash> of the
                    external endpoints
    endpoint-<hash> hairpin (a pod reaching itself through its Service) is
                    masqueraded; dnat to ip:port

Load balancing is ``numgen random mod N`` over the endpoints, as upstream.
``sessionAffinity: ClientIP`` as upstream's nftables mode: each endpoint
chain adds the client's address to a timed set (``affinity-<chain>``,
``timeoutSeconds``), and the Service chain sends a client found in one of
those sets back to that endpoint before load balancing. Flushing the UDP/SCTP
conntrack flows of removed endpoints is the backend's (:mod:`.conntrack`).
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Sequence

from k8py.proxy.service_table import Endpoint, ServicePort, ServicePortKey

__all__ = ["MASQUERADE_MARK", "table_name", "render", "delete"]

MASQUERADE_MARK = 0x4000


def table_name(node: str, cluster_tag: str = "") -> str:
    """``k8py-<node>``, or ``k8py-<node>-<tag>`` for a proxy of a ``k8py up``
    cluster (its node names repeat from cluster to cluster on one machine)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in node)
    return (f"k8py-{safe}-{cluster_tag}" if cluster_tag else f"k8py-{safe}")[:64]


def _hash(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:12].upper()


def _chain(kind: str, *parts: object) -> str:
    return f"{kind}-{_hash(*parts)}"


def _proto(sp: ServicePort) -> str:
    return sp.protocol.lower()


def _lb(name: str, endpoints: Sequence[Endpoint], comment: str, lines: list[str], endpoint_chains: Mapping[str, str],
        affinity: bool = False) -> None:
    lines.append(f"  chain {name} {{")
    lines.append(f'    comment "{comment}"')
    targets = [endpoint_chains[f"{ep.ip}:{ep.port}"] for ep in endpoints]
    if affinity:  # a client seen recently goes back to the endpoint it used (ClientIP session affinity)
        lines += [f"    ip saddr @affinity-{t} goto {t}" for t in targets]
    if len(targets) == 1:
        lines.append(f"    goto {targets[0]}")
    else:
        arms = ", ".join(f"{i} : goto {t}" for i, t in enumerate(targets))
        lines.append(f"    numgen random mod {len(targets)} vmap {{ {arms} }}")
    lines.append("  }")


def _no_endpoint_verdict(sp: ServicePort) -> str:
    """REJECT when the Service has no usable endpoint anywhere; DROP when it has some, but a
    ``Local`` traffic policy leaves none on this node (upstream: "has no local endpoints")."""
    return "drop" if sp.endpoints_elsewhere else "goto reject-chain"


def render(table: str, services: Mapping[ServicePortKey, ServicePort], node_addresses: Sequence[str]) -> str:
    """The ``nft -f`` text that makes ``table`` forward as ``services`` says."""
    lines = [f"add table ip {table}", f"delete table ip {table}", f"table ip {table} {{",
             '  comment "k8py proxy: Service forwarding for this node (rebuilt whole on every sync)"']
    chains: list[str] = []
    service_ips: list[str] = []
    nodeports: list[str] = []
    no_ep: list[str] = []
    no_ep_nodeports: list[str] = []
    firewall_ips: list[str] = []
    endpoint_lines: list[str] = []
    affinity_sets: list[str] = []
    used: set[str] = set()
    for key in sorted(services):
        sp = services[key]
        proto = _proto(sp)
        if proto not in ("tcp", "udp", "sctp"):
            continue
        # one chain per (Service port, endpoint): each carries its own affinity set
        endpoint_chains: dict[str, str] = {}
        for ep in sp.all_endpoints + sp.cluster_endpoints + sp.external_endpoints:
            k = f"{ep.ip}:{ep.port}"
            if k not in endpoint_chains:
                endpoint_chains[k] = _chain("endpoint", sp.namespace, sp.name, sp.port_name, proto, k)
        if sp.cluster_endpoints:
            svc_chain = _chain("service", sp.namespace, sp.name, sp.port_name, proto)
            _lb(svc_chain, sp.cluster_endpoints, f"{sp}/{proto}", chains, endpoint_chains, sp.session_affinity)
            for ip in sp.cluster_ips:
                service_ips.append(f"{ip} . {proto} . {sp.port} : goto {svc_chain}")
        else:
            for ip in sp.cluster_ips:
                no_ep.append(f"{ip} . {proto} . {sp.port} : {_no_endpoint_verdict(sp)}")
        if sp.node_port or sp.external_ips or sp.load_balancer_ips:
            if sp.external_endpoints:
                ext_lb = _chain("service-external", sp.namespace, sp.name, sp.port_name, proto)
                _lb(ext_lb, sp.external_endpoints, f"{sp}/{proto} external", chains, endpoint_chains, sp.session_affinity)
                ext = _chain("external", sp.namespace, sp.name, sp.port_name, proto)
                chains += [f"  chain {ext} {{", f'    comment "{sp}/{proto} external (node port {sp.node_port or "none"})"',
                           f"    meta mark set meta mark | {MASQUERADE_MARK:#x}", f"    goto {ext_lb}", "  }"]
                if sp.node_port:
                    nodeports.append(f"{proto} . {sp.node_port} : goto {ext}")
                service_ips += [f"{ip} . {proto} . {sp.port} : goto {ext}" for ip in sp.external_ips + sp.load_balancer_ips]
            else:
                verdict = _no_endpoint_verdict(sp)
                if sp.node_port:
                    no_ep_nodeports.append(f"{proto} . {sp.node_port} : {verdict}")
                no_ep += [f"{ip} . {proto} . {sp.port} : {verdict}" for ip in sp.external_ips + sp.load_balancer_ips]
        if sp.load_balancer_ips and sp.source_ranges:
            fw = _chain("firewall", sp.namespace, sp.name, sp.port_name, proto)
            chains += [f"  chain {fw} {{", f'    comment "{sp}/{proto} loadBalancerSourceRanges"',
                       f"    ip saddr != {{ {', '.join(sp.source_ranges)} }} drop", "  }"]
            firewall_ips += [f"{ip} . {proto} . {sp.port} : goto {fw}" for ip in sp.load_balancer_ips]
        referenced = {c.rstrip(",") for line in chains for c in line.split() if c.startswith("endpoint-")}
        for k, name in sorted(endpoint_chains.items(), key=lambda kv: kv[1]):
            if name not in referenced or name in used:
                continue
            used.add(name)
            ip, port = k.rsplit(":", 1)
            body = [f"  chain {name} {{", f'    comment "{sp}/{proto} -> {k}"',
                    f"    ip saddr {ip} meta mark set meta mark | {MASQUERADE_MARK:#x}"]
            if sp.session_affinity:
                affinity_sets += [f"  set affinity-{name} {{", "    type ipv4_addr", "    flags dynamic,timeout",
                                  f"    timeout {int(sp.affinity_timeout)}s", "  }"]
                body.append(f"    update @affinity-{name} {{ ip saddr }}")
            endpoint_lines += body + [f"    meta l4proto {{ tcp, udp, sctp }} dnat to {ip}:{port}", "  }"]

    def vmap(name: str, key_type: str, elements: list[str]) -> None:
        lines.append(f"  map {name} {{")
        lines.append(f"    type {key_type} : verdict")
        if elements:
            lines.append("    elements = { " + ", ".join(elements) + " }")
        lines.append("  }")

    vmap("service-ips", "ipv4_addr . inet_proto . inet_service", service_ips)
    vmap("service-nodeports", "inet_proto . inet_service", nodeports)
    vmap("no-endpoint-services", "ipv4_addr . inet_proto . inet_service", no_ep)
    vmap("no-endpoint-nodeports", "inet_proto . inet_service", no_ep_nodeports)
    vmap("firewall-ips", "ipv4_addr . inet_proto . inet_service", firewall_ips)
    addrs = sorted({a for a in node_addresses if a and ":" not in a})
    lines.append("  set nodeport-ips {")
    lines.append("    type ipv4_addr")
    if addrs:
        lines.append("    elements = { " + ", ".join(addrs) + " }")
    lines.append("  }")
    lines += [
        "  chain reject-chain {", '    comment "a Service port without endpoints"', "    reject", "  }",
        "  chain services {",
        "    ip daddr . meta l4proto . th dport vmap @service-ips",
        "    ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports",
        "  }",
        "  chain endpoints-check {",
        "    ip daddr . meta l4proto . th dport vmap @no-endpoint-services",
        "    ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports",
        "  }",
        "  chain firewall-check {",
        "    ip daddr . meta l4proto . th dport vmap @firewall-ips",
        "  }",
        "  chain masquerading {",
        f"    meta mark & {MASQUERADE_MARK:#x} == 0 return",
        f"    meta mark set meta mark ^ {MASQUERADE_MARK:#x}",
        "    masquerade fully-random",
        "  }",
        "  chain nat-prerouting {", "    type nat hook prerouting priority dstnat; policy accept;", "    jump services", "  }",
        "  chain nat-output {", "    type nat hook output priority -100; policy accept;", "    jump services", "  }",
        "  chain nat-postrouting {", "    type nat hook postrouting priority srcnat; policy accept;", "    jump masquerading", "  }",
        "  chain filter-forward {", "    type filter hook forward priority -110; policy accept;", "    ct state new jump endpoints-check", "  }",
        "  chain filter-prerouting {", "    type filter hook prerouting priority -110; policy accept;", "    jump firewall-check", "  }",
        "  chain filter-output {", "    type filter hook output priority -110; policy accept;", "    ct state new jump endpoints-check",
        "    jump firewall-check", "  }",
        "  chain filter-input {", "    type filter hook input priority -110; policy accept;", "    ct state new jump endpoints-check", "  }",
    ]
    lines += affinity_sets + endpoint_lines + chains  # a vmap may only name chains (and sets) already declared
    lines.append("}")
    return "\n".join(lines) + "\n"


def delete(table: str) -> str:
    return f"add table ip {table}\ndelete table ip {table}\n"
