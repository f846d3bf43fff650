"""``k8py down`` removes a kubelet's cgroup tree where the kubelet made it, not where the cleaner's
own cgroup would put it: the kubelet records its tree's directories in its root dir (a supervisor or
a shell may start each process in a cgroup of its own, and then the two places differ)."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from k8py.kubelet.cgroups.tree import CgroupTree, node_cgroup_name, own_path
from k8py.kubelet.node_cleanup import cleanup_root, write_owner

MEMORY = "/sys/fs/cgroup/memory"


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir(MEMORY), reason="no writable cgroup v1 memory hierarchy on this machine")
def test_the_recorded_tree_goes_even_when_the_cleaner_sits_elsewhere(tmp_path) -> None:
    node, root = f"cleanup-{uuid.uuid4().hex[:6]}", str(tmp_path / "kubelet")
    name = "k8py-" + node_cgroup_name(node, os.path.abspath(root))
    # the kubelet's cgroup as another process saw it: a parent the cleaner is not in
    elsewhere = os.path.join(MEMORY, (own_path("memory") or "/").lstrip("/"), f"k8py-elsewhere-{uuid.uuid4().hex[:6]}")
    base = os.path.join(elsewhere, name)
    pod = os.path.join(base, "kubepods", "besteffort", "pod-x")
    os.makedirs(pod)
    try:
        write_owner(root, node, "host", cgroup_bases={"memory": base, "cpu": "/sys/fs/cgroup/cpu/not-this-nodes-tree"})
        assert asyncio.run(cleanup_root(root)) == node
        assert not os.path.exists(base)
        assert CgroupTree(node_cgroup_name(node, os.path.abspath(root)), enabled=False).bases == {}
    finally:
        for d in (pod, os.path.dirname(pod), os.path.join(base, "kubepods"), base, elsewhere):
            if os.path.isdir(d):
                os.rmdir(d)
