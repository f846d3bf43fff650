"""Prometheus metrics of one API server, served at ``/metrics``.

Names follow kube-apiserver's where one exists:
``apiserver_request_total{verb,resource,code}``,
``apiserver_request_duration_seconds{verb,resource}``,
``apiserver_registered_watchers{resource}``,
``apiserver_watch_events_total{resource}``,
``apiserver_terminated_watchers_total{resource}`` (watch clients closed for
falling too far behind), ``apiserver_storage_decode_errors_total{resource}``
(stored values the watch cache could not decode and skipped); plus ``k8py_storage_revision``.
The two counted per request are :mod:`~k8py.apiserver.loop_metrics` families (no lock per
count: they are counted on the event loop only).
Each server has its own registry, so several servers can live in one process
(tests do that).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from k8py.apiserver.loop_metrics import LoopCounter, LoopHistogram

__all__ = ["APIMetrics", "CONTENT_TYPE_LATEST"]

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class APIMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = LoopCounter(
            "apiserver_request_total",
            "Requests served, by verb, resource and HTTP code.",
            ("verb", "resource", "code"),
            registry=self.registry,
        )
        self.latency = LoopHistogram(
            "apiserver_request_duration_seconds",
            "Request latency, from receipt to the last byte, by verb and resource (watches excluded).",
            ("verb", "resource"),
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.watchers = Gauge(
            "apiserver_registered_watchers",
            "Open watch connections, by resource.",
            ("resource",),
            registry=self.registry,
        )
        self.watch_events = Counter(
            "apiserver_watch_events_total",
            "Events applied to the watch cache, by resource.",
            ("resource",),
            registry=self.registry,
        )
        self.terminated_watchers = Counter(
            "apiserver_terminated_watchers",
            "Watchers closed because their client fell too far behind, by resource.",
            ("resource",),
            registry=self.registry,
        )
        self.decode_errors = Counter(
            "apiserver_storage_decode_errors",
            "Stored objects the watch cache could not decode (skipped), by resource.",
            ("resource",),
            registry=self.registry,
        )
        self._children: dict[tuple[str, str, int], tuple] = {}
        self.revision = Gauge("k8py_storage_revision", "The store revision the watch cache has reached.", registry=self.registry)

    def observe(self, verb: str, resource: str, code: int, seconds: float) -> None:
        # labels() costs several microseconds; the children are few, keep them
        key = (verb, resource, code)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.requests.labels(verb, resource, str(code)),
                self.latency.labels(verb, resource) if verb != "WATCH" else None,
            )
        children[0].inc()
        if children[1] is not None:
            children[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
