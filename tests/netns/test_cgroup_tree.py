"""QoS placement and pod resources (pure), and the cgroup v2 layout on a directory tree.

This machine has hybrid cgroups (v1 controllers), so the v2 writes are
checked on a directory laid out as a delegated cgroup2 mount would be (the
kernel's files as plain files): a stand-in, because no v2 hierarchy with
controllers exists here. The v1 layout runs for real in test_cgroups_e2e.py.
"""

from __future__ import annotations

import os

from k8py.kubelet.cgroups import qos
from k8py.kubelet.cgroups.tree import CgroupTree, weight_from_shares
from k8py.kubelet.pod_status import qos_class
from k8py.kubelet.runtime.protocols import Resources


def _pod(*containers: dict, inits: tuple = ()) -> dict:
    return {"spec": {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(containers)],
                     "initContainers": [{"name": f"i{i}", "resources": r} for i, r in enumerate(inits)]}}


def test_cgroup_parents_follow_the_qos_class() -> None:
    assert qos.cgroup_parent("Guaranteed", "u1") == "kubepods/podu1"
    assert qos.cgroup_parent("Burstable", "u1") == "kubepods/burstable/podu1"
    assert qos.cgroup_parent("BestEffort", "u1") == "kubepods/besteffort/podu1"


def test_pod_resources_sum_limits_only_when_every_container_has_one() -> None:
    g = _pod({"limits": {"cpu": "500m", "memory": "64Mi"}, "requests": {"cpu": "500m", "memory": "64Mi"}},
             {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
    r = qos.pod_resources(g, qos_class(g), pids_limit=100)
    assert qos_class(g) == "Guaranteed"
    assert (r.memory_limit, r.cpu_quota, r.cpu_shares, r.pids_limit) == (64 * 2**20 + 2**30, 150_000, 1536, 100)
    b = _pod({"requests": {"cpu": "250m"}, "limits": {"memory": "128Mi"}}, {})
    r = qos.pod_resources(b, qos_class(b))
    assert qos_class(b) == "Burstable" and (r.memory_limit, r.cpu_quota, r.cpu_shares) == (0, 0, 256)
    e = _pod({})
    assert qos.pod_resources(e, qos_class(e)).cpu_shares == 2
    # an init container larger than the sum of the others sets the pod's limit
    i = _pod({"limits": {"memory": "10Mi"}}, inits=({"limits": {"memory": "50Mi"}},))
    assert qos.pod_resources(i, qos_class(i)).memory_limit == 50 * 2**20


def _fake_v2(tmp: str) -> tuple[str, str]:
    root = os.path.join(tmp, "cgroup")
    own = os.path.join(root, "kubelet.slice")
    os.makedirs(own)
    for d in (root, own):
        with open(os.path.join(d, "cgroup.controllers"), "w") as f:
            f.write("cpuset cpu io memory pids\n")
    proc = os.path.join(tmp, "proc-self-cgroup")
    with open(proc, "w") as f:
        f.write("0::/kubelet.slice\n")
    return root, proc


def test_the_v2_layout_writes_unified_files_and_delegates_controllers(tmp_path) -> None:
    root, proc = _fake_v2(str(tmp_path))
    tree = CgroupTree("n1", root=root, proc_cgroup=proc)
    assert tree.version == 2 and tree.enabled
    base = os.path.join(root, "kubelet.slice", "k8py-n1")
    assert open(os.path.join(base, "cgroup.subtree_control")).read() == "+memory +cpu +pids"
    tree.ensure_pod("kubepods/burstable/podu1", Resources(cpu_quota=50_000, cpu_shares=512, memory_limit=2**26, pids_limit=40))
    pod = os.path.join(base, "kubepods", "burstable", "podu1")
    assert open(os.path.join(pod, "memory.max")).read() == str(2**26)
    assert open(os.path.join(pod, "cpu.max")).read() == "50000 100000"
    assert open(os.path.join(pod, "cpu.weight")).read() == str(weight_from_shares(512))
    assert open(os.path.join(pod, "pids.max")).read() == "40"
    assert open(os.path.join(base, "kubepods", "cgroup.subtree_control")).read() == "+memory +cpu +pids"
    dirs = tree.create("kubepods/burstable/podu1", "cid", Resources(memory_limit=2**25))
    assert dirs == [os.path.join(pod, "cid")] and open(os.path.join(pod, "cid", "memory.max")).read() == str(2**25)
    with open(os.path.join(pod, "cid", "memory.events"), "w") as f:
        f.write("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert CgroupTree.oom_killed(dirs)


def test_weight_conversion_matches_upstream() -> None:
    assert weight_from_shares(2) == 1 and weight_from_shares(1024) == 39 and weight_from_shares(262144) == 10000

