"""The kubelet's Prometheus metrics (upstream's names, where upstream has one).

- ``kubelet_running_pods`` / ``kubelet_running_containers`` — gauges, read
  at scrape time from the pod workers and the runtime;
- ``kubelet_pod_start_duration_seconds`` — from the kubelet first seeing a
  pod to the pod first reported Running;
- ``kubelet_started_containers_total`` and
  ``kubelet_started_containers_errors_total{code}``;
- ``kubelet_pleg_events_total`` — container events the PLEG turned into wake-ups.
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["KubeletMetrics"]


class KubeletMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.running_pods = Gauge("kubelet_running_pods", "Pods that have a running sandbox", registry=self.registry)
        self.running_containers = Gauge("kubelet_running_containers", "Containers currently running", registry=self.registry)
        self.pod_start = Histogram("kubelet_pod_start_duration_seconds", "From the kubelet seeing a pod to it running",
                                   buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60), registry=self.registry)
        self.started = Counter("kubelet_started_containers_total", "Containers started", registry=self.registry)
        self.start_errors = Counter("kubelet_started_containers_errors_total", "Containers that failed to start", ["code"],
                                    registry=self.registry)
        self.pleg_events = Counter("kubelet_pleg_events_total", "Container events seen by the PLEG", registry=self.registry)

    def bind(self, *, running_pods: Callable[[], float], running_containers: Callable[[], float]) -> None:
        self.running_pods.set_function(running_pods)
        self.running_containers.set_function(running_containers)
