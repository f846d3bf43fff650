"""A pod's ``/etc/resolv.conf`` (upstream kubelet ``network/dns``): what the
pod's ``dnsPolicy`` and ``dnsConfig`` say, with ``--cluster-dns`` and
``--cluster-domain``.

- ``ClusterFirst`` (the default): the cluster DNS servers, the search path
  ``<ns>.svc.<domain> svc.<domain> <domain>`` followed by the host's own
  searches, and ``options ndots:5``. With no ``--cluster-dns`` the kubelet
  has no cluster DNS to offer and the pod gets ``Default`` (upstream logs
  and records an event; :func:`resolv_conf` says so through its second
  value). ``hostNetwork`` pods get ``Default`` too, unless
  ``ClusterFirstWithHostNet``;
- ``Default``: the host's resolv.conf (``--resolv-conf``);
- ``None``: only what ``dnsConfig`` gives.

``dnsConfig`` is merged in every case: its nameservers and searches are
appended (de-duplicated), its options override those of the same name. The
limits are upstream's: at most 3 nameservers, 32 search domains and 2048
characters of search path.

:func:`write_resolv_conf` writes the file into the pod's directory; the
container sees it at ``/etc/resolv.conf`` through a read-only bind mount
(:func:`resolv_conf_mount`).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from k8py.kubelet.runtime.protocols import Mount

__all__ = ["resolv_conf", "write_resolv_conf", "resolv_conf_mount", "read_host_resolv_conf"]

MAX_NAMESERVERS = 3
MAX_SEARCHES = 32
MAX_SEARCH_CHARS = 2048


def read_host_resolv_conf(path: str = "/etc/resolv.conf") -> tuple[list[str], list[str], list[str]]:
    """(nameservers, searches, options) of a resolv.conf file (empty if unreadable)."""
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                parts = line.split("#", 1)[0].split()
                if not parts:
                    continue
                if parts[0] == "nameserver" and len(parts) > 1:
                    servers.append(parts[1])
                elif parts[0] in ("search", "domain"):
                    searches = parts[1:]
                elif parts[0] == "options":
                    options.extend(parts[1:])
    except OSError:
        pass
    return servers, searches, options


def _merge_options(base: list[str], extra: Sequence[Mapping[str, Any]]) -> list[str]:
    merged: dict[str, str] = {}
    for opt in base:
        name, _, value = opt.partition(":")
        merged[name] = opt
    for opt in extra:
        name = opt.get("name")
        if name:
            merged[name] = f"{name}:{opt['value']}" if opt.get("value") not in (None, "") else name
    return list(merged.values())


def _dedupe(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def resolv_conf(pod: Mapping[str, Any], *, cluster_dns: Sequence[str], cluster_domain: str,
                host_resolv_conf: str = "/etc/resolv.conf") -> tuple[str, str | None]:
    """(file text, a warning when the policy could not be honoured, else None)."""
    spec = pod.get("spec") or {}
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    host_servers, host_searches, host_options = read_host_resolv_conf(host_resolv_conf)
    warning = None
    if policy == "ClusterFirst" and spec.get("hostNetwork"):
        policy = "Default"
    if policy in ("ClusterFirst", "ClusterFirstWithHostNet") and not cluster_dns:
        warning = (f'pod "{namespace}/{(pod.get("metadata") or {}).get("name")}" has DNSPolicy "{policy}" but the kubelet '
                   "was not configured with a cluster DNS IP (--cluster-dns); falling back to \"Default\" policy")
        policy = "Default"
    if policy in ("ClusterFirst", "ClusterFirstWithHostNet"):
        domain = cluster_domain.strip(".")
        servers = list(cluster_dns)
        searches = [f"{namespace}.svc.{domain}", f"svc.{domain}", domain, *host_searches]
        options = ["ndots:5"]
    elif policy == "None":
        servers, searches, options = [], [], []
    else:  # Default
        servers, searches, options = host_servers, host_searches, host_options
    config = spec.get("dnsConfig") or {}
    servers = _dedupe([*servers, *(config.get("nameservers") or [])])[:MAX_NAMESERVERS]
    searches = _dedupe([*searches, *(config.get("searches") or [])])[:MAX_SEARCHES]
    while searches and len(" ".join(searches)) > MAX_SEARCH_CHARS:
        searches.pop()
    options = _merge_options(options, config.get("options") or [])
    lines = [f"nameserver {s}" for s in servers]
    if searches:
        lines.append("search " + " ".join(searches))
    if options:
        lines.append("options " + " ".join(options))
    return "\n".join(lines) + "\n", warning


def write_resolv_conf(pod_dir: str, text: str) -> str:
    path = os.path.join(pod_dir, "etc-resolv.conf")
    os.makedirs(pod_dir, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def resolv_conf_mount(host_path: str) -> Mount:
    return Mount("/etc/resolv.conf", host_path, True, "resolv-conf")
