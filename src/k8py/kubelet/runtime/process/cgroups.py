"""The process runtime's resource limits: :class:`~k8py.kubelet.cgroups.tree.CgroupTree`.

The tree (v1 or v2, under the k8py-owned ``k8py-<node>-<tag>`` inside the
kubelet's own cgroup, QoS-class parents as upstream) lives in
:mod:`k8py.kubelet.cgroups`; this module keeps the runtime's name for it
and the argv prefix that makes a container join its cgroups before its
first instruction, so every process it forks is accounted.
"""

from __future__ import annotations

import os
from typing import Sequence

from k8py.kubelet.cgroups.tree import CgroupTree, own_path

__all__ = ["CgroupManager", "_own_path"]

_own_path = own_path  # the name tests/support used


class CgroupManager(CgroupTree):
    @staticmethod
    def join_argv(dirs: Sequence[str], argv: Sequence[str]) -> list[str]:
        if not dirs:
            return list(argv)
        joins = "; ".join(f'echo $$ > "{os.path.join(d, "cgroup.procs")}"' for d in dirs)
        return ["/bin/sh", "-c", f'{joins}; exec "$@"', "k8py-cgroup-join", *argv]

    @staticmethod
    def memory_usage(dirs: Sequence[str]) -> int:
        return CgroupTree.memory_working_set(dirs) or 0
