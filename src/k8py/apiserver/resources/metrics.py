"""metrics.k8s.io/v1beta1: NodeMetrics and PodMetrics (read-only, never stored).

Upstream these come from metrics-server behind the aggregation layer; k8py
serves them itself (:mod:`k8py.apiserver.streaming.resource_metrics`), and
lists them here so discovery shows the group — ``kubectl top`` looks for it
there before asking. The definitions get their own storage prefix so their
(always empty) watch caches never meet the real nodes and pods.
"""

from __future__ import annotations

from k8py.apiserver.registry import ResourceDefinition

GROUP = "metrics.k8s.io"

DEFINITIONS = [
    ResourceDefinition(
        group=GROUP,
        version="v1beta1",
        kind="NodeMetrics",
        plural="nodes",
        singular="",
        namespaced=False,
        verbs=("get", "list"),
        storage_resource=f"{GROUP}/nodes",
    ),
    ResourceDefinition(
        group=GROUP,
        version="v1beta1",
        kind="PodMetrics",
        plural="pods",
        singular="",
        namespaced=True,
        verbs=("get", "list"),
        storage_resource=f"{GROUP}/pods",
    ),
]
