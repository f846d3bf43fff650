"""Remove everything a kubelet made on the host: pod network namespaces, its bridge, its cgroups.

A kubelet that stops leaves its containers running (a new kubelet adopts
them), and with them their network namespaces and cgroups. When a whole
cluster goes (``k8py down``, after its processes are swept) those go too:
:func:`write_owner` records, in the kubelet's root dir, which node the
kubelet ran (the names of everything it makes derive from that and the
root dir: :class:`~k8py.kubelet.network.names.NetworkNames`, ``k8py-<node>``
cgroups); :func:`cleanup_root` reads it back and removes exactly those,
nothing another kubelet or program made. A cluster that only stopped (``k8py up``
ended, its container processes swept) keeps its pods' network namespaces for the
next ``k8py up`` on the same data directory, but its cgroup trees are empty and
named after nothing that survives a removed data directory:
:func:`remove_empty_cgroups_under` removes them then (every test cluster of the
pytest plugin left one per node at the machine's cgroup roots).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import Any

__all__ = ["write_owner", "cleanup_root", "cleanup_under", "remove_empty_cgroups_under"]

logger = logging.getLogger(__name__)

OWNER = "owner.json"


def write_owner(root_dir: str, node: str, pod_network: str, cgroup_bases: dict[str, str] | None = None) -> None:
    """``cgroup_bases``: where the kubelet's cgroup tree is, per controller. The tree lies below
    the kubelet's own cgroup, which need not be the cleaner's (a supervisor or a shell may put
    each process in a cgroup of its own), so the cleaner must not work it out again."""
    os.makedirs(root_dir, exist_ok=True)
    owner = {"node": node, "rootDir": os.path.abspath(root_dir), "podNetwork": pod_network}
    if cgroup_bases:
        owner["cgroupBases"] = dict(cgroup_bases)
    with open(os.path.join(root_dir, OWNER), "w", encoding="utf-8") as f:
        json.dump(owner, f)


def _owner(root_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(root_dir, OWNER), encoding="utf-8") as f:
            return dict(json.load(f))
    except (OSError, ValueError):
        return None


def _tree(owner: dict[str, Any]) -> Any:
    """The recorded node's cgroup tree (a CgroupTree that creates nothing)."""
    from k8py.kubelet.cgroups.tree import CgroupTree, node_cgroup_name

    name = node_cgroup_name(str(owner["node"]), str(owner["rootDir"]))
    tree = CgroupTree(name, enabled=False)
    recorded = owner.get("cgroupBases") or {}
    # only directories that are this node's tree (named so), wherever the kubelet's cgroup was
    tree.bases = {c: b for c, b in recorded.items() if os.path.basename(b) == tree.name} if recorded else CgroupTree(name).bases
    return tree


async def cleanup_root(root_dir: str) -> str | None:
    """Clean the node recorded in ``root_dir``; returns its name (None if none recorded)."""
    from k8py.kubelet.network.names import NetworkNames
    from k8py.kubelet.network.pod_network import CNIPodNetwork

    owner = _owner(root_dir)
    if owner is None:
        return None
    node = str(owner["node"])
    _tree(owner).cleanup()
    if owner.get("podNetwork") == "cni" and os.geteuid() == 0:
        await CNIPodNetwork(NetworkNames(node, str(owner["rootDir"])), os.path.join(root_dir, "runtime")).cleanup()
    return node


def _roots_under(directory: str, depth: int) -> list[str]:
    found = []
    base = directory.rstrip("/").count("/")
    for root, dirs, files in os.walk(directory):
        if OWNER in files:
            found.append(root)
            dirs[:] = []
        elif root.count("/") - base >= depth:
            dirs[:] = []
    return found


def remove_empty_cgroups_under(directory: str, depth: int = 3, *, settle: float = 5.0) -> list[str]:
    """The cgroup trees of the kubelets recorded under ``directory``, removed where empty (no
    process is signalled: a directory something still runs in stays). A container just killed
    keeps its directory busy for a moment (the rest of its pid namespace is still being reaped),
    so this retries for up to ``settle`` seconds. Returns the nodes whose tree is gone."""
    trees = {str(o["node"]): _tree(o) for o in map(_owner, _roots_under(directory, depth)) if o is not None}
    deadline = time.monotonic() + settle
    while True:
        for tree in trees.values():
            tree.close()
        left = [node for node, tree in trees.items() if any(os.path.isdir(b) for b in tree.bases.values())]
        if not left or time.monotonic() > deadline:
            return [node for node in trees if node not in left]
        time.sleep(0.05)


def cleanup_under(directory: str, depth: int = 3) -> list[str]:
    """:func:`cleanup_root` for every kubelet root dir found under ``directory``."""
    found = _roots_under(directory, depth)

    async def run() -> list[str]:
        names = []
        for root in found:
            try:
                name = await cleanup_root(root)
            except Exception as err:  # one broken node must not keep the others' leftovers
                logger.warning("cleanup of a kubelet's host state failed", extra={"root": root, "error": str(err)})
                continue
            if name:
                names.append(name)
        return names

    return asyncio.run(run())
