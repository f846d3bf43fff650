"""The in-tree plugins, one module each, and the registry of name -> factory.

A factory is ``factory(args: dict | None, handle) -> plugin``; ``args`` come
from the profile's ``pluginConfig``. ``DEFAULT_MULTI_POINT`` is upstream's
default plugin set in its order (the order decides which Filter's reason is
reported for a node), with the default score weights.
"""

from __future__ import annotations

from typing import Any, Callable

from k8py.scheduler.plugins import names
from k8py.scheduler.plugins.balanced_allocation import BalancedAllocation
from k8py.scheduler.plugins.default_binder import DefaultBinder
from k8py.scheduler.plugins.default_preemption import DefaultPreemption
from k8py.scheduler.plugins.image_locality import ImageLocality
from k8py.scheduler.plugins.inter_pod_affinity import InterPodAffinity
from k8py.scheduler.plugins.node_affinity import NodeAffinity
from k8py.scheduler.plugins.node_name import NodeName
from k8py.scheduler.plugins.node_ports import NodePorts
from k8py.scheduler.plugins.node_resources_fit import NodeResourcesFit
from k8py.scheduler.plugins.node_unschedulable import NodeUnschedulable
from k8py.scheduler.plugins.pod_topology_spread import PodTopologySpread
from k8py.scheduler.plugins.priority_sort import PrioritySort
from k8py.scheduler.plugins.scheduling_gates import SchedulingGates
from k8py.scheduler.plugins.taint_toleration import TaintToleration

__all__ = ["REGISTRY", "DEFAULT_MULTI_POINT", "Factory"]

Factory = Callable[[dict[str, Any] | None, Any], Any]

REGISTRY: dict[str, Factory] = {
    names.PRIORITY_SORT: PrioritySort,
    names.SCHEDULING_GATES: SchedulingGates,
    names.NODE_NAME: NodeName,
    names.NODE_UNSCHEDULABLE: NodeUnschedulable,
    names.NODE_RESOURCES_FIT: NodeResourcesFit,
    names.NODE_RESOURCES_BALANCED_ALLOCATION: BalancedAllocation,
    names.TAINT_TOLERATION: TaintToleration,
    names.NODE_AFFINITY: NodeAffinity,
    names.NODE_PORTS: NodePorts,
    names.IMAGE_LOCALITY: ImageLocality,
    names.POD_TOPOLOGY_SPREAD: PodTopologySpread,
    names.INTER_POD_AFFINITY: InterPodAffinity,
    names.DEFAULT_PREEMPTION: DefaultPreemption,
    names.DEFAULT_BINDER: DefaultBinder,
}

#: (name, score weight) in upstream's default order
DEFAULT_MULTI_POINT: list[tuple[str, int]] = [
    (names.SCHEDULING_GATES, 0),
    (names.PRIORITY_SORT, 0),
    (names.NODE_UNSCHEDULABLE, 0),
    (names.NODE_NAME, 0),
    (names.TAINT_TOLERATION, 3),
    (names.NODE_AFFINITY, 2),
    (names.NODE_PORTS, 0),
    (names.NODE_RESOURCES_FIT, 1),
    (names.POD_TOPOLOGY_SPREAD, 2),
    (names.INTER_POD_AFFINITY, 2),
    (names.DEFAULT_PREEMPTION, 0),
    (names.NODE_RESOURCES_BALANCED_ALLOCATION, 1),
    (names.IMAGE_LOCALITY, 1),
    (names.DEFAULT_BINDER, 0),
]
