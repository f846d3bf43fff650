"""Cluster DNS reachable from pods in their own network namespaces.

With the loopback pod network, ``k8py dns`` answers on a 127.x address that
every pod shares with the host. Pods in their own namespaces (``--pod-network
cni``, ``--runtime containerd``) cannot reach the host's loopback: a packet
for 127.x never leaves a namespace. So there the DNS server answers on the
kube-dns Service's cluster IP in the (routable) Service range, the range's
10th address as kubeadm places it, and that address is made local to the
host by putting it on a link of its own, as NodeLocal DNSCache does with its
``nodelocaldns`` interface. A pod's packet to it follows the pod's default
route to its node's bridge gateway and is delivered to the server locally;
the host's own resolvers reach it too.

The link is an empty bridge (these kernels have no ``dummy`` module),
``k8pydns-<tag>``, the tag a hash of the data directory: one per cluster,
made by the supervisor before the DNS server starts and removed on stop and
by ``k8py down``. Nothing else is touched: no address is added to an
existing interface.
"""

from __future__ import annotations

import hashlib
import os
import subprocess

__all__ = ["link_name", "ensure", "remove"]


def link_name(data_dir: str) -> str:
    return "k8pydns-" + hashlib.sha1(os.path.realpath(data_dir).encode()).hexdigest()[:6]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


def ensure(data_dir: str, address: str) -> str:
    """The cluster's DNS link with ``address`` on it (idempotent); returns the link's name."""
    name = link_name(data_dir)
    if _ip("link", "show", "dev", name).returncode != 0:
        made = _ip("link", "add", "name", name, "type", "bridge")
        if made.returncode != 0:
            raise RuntimeError(f"cannot create the DNS link {name}: {made.stderr.strip()}")
    _ip("link", "set", "dev", name, "alias", f"k8py cluster DNS of {os.path.realpath(data_dir)}"[:120])
    added = _ip("address", "replace", f"{address}/32", "dev", name)
    if added.returncode != 0:
        raise RuntimeError(f"cannot put the DNS address {address} on {name}: {added.stderr.strip()}")
    up = _ip("link", "set", "dev", name, "up")
    if up.returncode != 0:
        raise RuntimeError(f"cannot bring the DNS link {name} up: {up.stderr.strip()}")
    return name


def remove(data_dir: str) -> bool:
    """Delete the cluster's DNS link; True if it existed."""
    name = link_name(data_dir)
    if _ip("link", "show", "dev", name).returncode != 0:
        return False
    _ip("link", "delete", "dev", name)
    return True
