"""The scheduler's Prometheus metrics, with upstream's names and labels.

Each :class:`SchedulerMetrics` has its own registry (two schedulers in one
process, as in tests, do not collide); ``/metrics`` serves it.

- ``scheduler_schedule_attempts_total{result,profile}``: result is
  ``scheduled``, ``unschedulable`` or ``error``;
- ``scheduler_scheduling_attempt_duration_seconds{result,profile}``;
- ``scheduler_pod_scheduling_attempts``: attempts until a pod was scheduled;
- ``scheduler_pending_pods{queue}``: ``active``, ``backoff``,
  ``unschedulable``, ``gated`` (sampled from the queue at scrape time);
- ``scheduler_preemption_attempts_total``, ``scheduler_preemption_victims``;
- ``scheduler_cache_size{type}``: ``nodes``, ``pods``;
- ``scheduler_queue_incoming_pods_total{queue,event}``;
- ``scheduler_binding_duration_seconds`` (k8py: the bind call alone).
"""

from __future__ import annotations

from typing import Any, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["SchedulerMetrics"]

_ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))


class SchedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.schedule_attempts = Counter("scheduler_schedule_attempts", "Number of attempts to schedule pods, by the result.",
                                         ["result", "profile"], registry=r)
        self.attempt_duration = Histogram("scheduler_scheduling_attempt_duration_seconds",
                                          "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
                                          ["result", "profile"], buckets=_ATTEMPT_BUCKETS, registry=r)
        self.pod_attempts = Histogram("scheduler_pod_scheduling_attempts", "Number of attempts to successfully schedule a pod.",
                                      buckets=(1, 2, 4, 8, 16), registry=r)
        self.pending_pods = Gauge("scheduler_pending_pods", "Number of pending pods, by the queue type.", ["queue"], registry=r)
        self.preemption_attempts = Counter("scheduler_preemption_attempts", "Total preemption attempts in the cluster till now",
                                           registry=r)
        self.preemption_victims = Histogram("scheduler_preemption_victims", "Number of selected preemption victims",
                                            buckets=(1, 2, 4, 8, 16, 32, 64), registry=r)
        self.cache_size = Gauge("scheduler_cache_size", "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
                                ["type"], registry=r)
        self.incoming_pods = Counter("scheduler_queue_incoming_pods", "Number of pods added to scheduling queues by event and queue type.",
                                     ["queue", "event"], registry=r)
        self.binding_duration = Histogram("scheduler_binding_duration_seconds", "Latency of the bind call",
                                          buckets=_ATTEMPT_BUCKETS, registry=r)

        self._attempts: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._incoming: dict[tuple[str, str], Any] = {}

    # the per-pod updates: ``labels()`` validates and locks on every call, so
    # the children of the few label sets a scheduler uses are looked up once

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        """One scheduling attempt ended: ``schedule_attempts`` and ``attempt_duration``."""
        children = self._attempts.get((result, profile))
        if children is None:
            children = self._attempts[(result, profile)] = (
                self.schedule_attempts.labels(result=result, profile=profile),
                self.attempt_duration.labels(result=result, profile=profile))
        children[0].inc()
        children[1].observe(seconds)

    def incoming(self, queue: str, event: str, pods: int = 1) -> None:
        """``pods`` entered ``queue`` on ``event`` (``scheduler_queue_incoming_pods_total``)."""
        child = self._incoming.get((queue, event))
        if child is None:
            child = self._incoming[(queue, event)] = self.incoming_pods.labels(queue=queue, event=event)
        child.inc(pods)

    def sample_queue(self, counts: Callable[[], dict[str, int]]) -> None:
        for queue in ("active", "backoff", "unschedulable", "gated"):
            self.pending_pods.labels(queue=queue).set_function(lambda q=queue: counts().get(q, 0))

    def sample_cache(self, nodes: Callable[[], int], pods: Callable[[], int]) -> None:
        self.cache_size.labels(type="nodes").set_function(nodes)
        self.cache_size.labels(type="pods").set_function(pods)

    def render(self) -> bytes:
        return generate_latest(self.registry)
