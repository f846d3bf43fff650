"""Prometheus metrics of one API server, served at ``/metrics``.

Names and labels follow kube-apiserver's where one exists:
``apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,code}``,
``apiserver_request_duration_seconds`` (the same but the code),
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

_REQUEST_LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")
_COMPONENT = "apiserver"
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class APIMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = LoopCounter(
            "apiserver_request_total",
            "Requests served, by verb, dry run, group, version, resource, subresource, scope, component and HTTP code.",
            (*_REQUEST_LABELS, "code"),
            registry=self.registry,
        )
        self.latency = LoopHistogram(
            "apiserver_request_duration_seconds",
            "Request latency, from receipt to the last byte, by verb, dry run, group, version, resource, subresource, "
            "scope and component (watches excluded).",
            _REQUEST_LABELS,
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
        self._children: dict[tuple[tuple[str, ...], int], tuple] = {}
        self.revision = Gauge("k8py_storage_revision", "The store revision the watch cache has reached.", registry=self.registry)

    def observe(self, labels: tuple[str, ...], code: int, seconds: float) -> None:
        """One request: ``labels`` are (verb, dry_run, group, version, resource, subresource, scope)."""
        # labels() costs several microseconds; the children are few, keep them
        key = (labels, code)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.requests.labels(*labels, _COMPONENT, str(code)),
                self.latency.labels(*labels, _COMPONENT) if labels[0] != "WATCH" else None,
            )
        children[0].inc()
        if children[1] is not None:
            children[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
