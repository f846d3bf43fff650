"""API Priority and Fairness' Prometheus metrics, with upstream's names.

Counted per request: ``apiserver_flowcontrol_rejected_requests_total``
(flow_schema, priority_level, reason), ``..._dispatched_requests_total``
(flow_schema, priority_level), ``..._request_wait_duration_seconds``
(flow_schema, priority_level, execute) and ``..._work_estimated_seats``
(flow_schema, priority_level) and ``..._watch_count_samples`` (priority_level,
flow_schema) histograms; ``apiserver_current_inflight_requests``
(request_kind). Read when scraped, per priority level:
``..._current_executing_requests``, ``..._current_executing_seats``,
``..._current_inqueue_requests``, ``..._current_inqueue_seats``. Set when the
configuration changes or seats are re-shared (:mod:`.borrowing`), per
priority level: ``..._nominal_limit_seats``, ``..._lower_limit_seats``,
``..._upper_limit_seats``, ``..._current_limit_seats``, ``..._target_seats``,
``..._demand_seats_smoothed``; and ``..._seat_fair_frac``.

Where upstream also labels the per-level gauges by flow_schema, k8py keeps one
series per level (they are read from the level's queues, which do not know
the schema of each request). The series counted per request (inflight, dispatched, work,
watch count) are :mod:`~k8py.apiserver.loop_metrics` families: the filter runs on the event
loop only, so they are counted without a lock.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from k8py.apiserver.loop_metrics import LoopCounter, LoopGauge, LoopHistogram
from k8py.apiserver.overload.fair_queuing import QueueSet

__all__ = ["FlowControlMetrics"]

_P = "apiserver_flowcontrol_"
_LEVEL = ["priority_level"]
_FLOW = ["flow_schema", "priority_level"]


class FlowControlMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        r = registry
        self.inflight = LoopGauge("apiserver_current_inflight_requests", "Requests in flight, by kind (readOnly, mutating).",
                              ["request_kind"], registry=r)
        self.rejected = Counter(_P + "rejected_requests_total", "Requests refused with 429 by API Priority and Fairness.",
                                [*_FLOW, "reason"], registry=r)
        self.dispatched = LoopCounter(_P + "dispatched_requests_total", "Requests given seats.", _FLOW, registry=r)
        self.wait = Histogram(_P + "request_wait_duration_seconds", "Seconds requests waited in a queue.",
                              [*_FLOW, "execute"], registry=r,
                              buckets=(0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30))
        self.work = LoopHistogram(_P + "work_estimated_seats", "Seats estimated for each request.", _FLOW, registry=r,
                              buckets=(1, 2, 4, 10))
        self.watch_count = LoopHistogram(_P + "watch_count_samples", "Watchers a mutating request's event reaches.",
                                     ["priority_level", "flow_schema"], registry=r, buckets=(0, 100, 1000))
        self.executing = Gauge(_P + "current_executing_requests", "Requests holding seats.", _LEVEL, registry=r)
        self.executing_seats = Gauge(_P + "current_executing_seats", "Seats held by executing requests.", _LEVEL, registry=r)
        self.inqueue = Gauge(_P + "current_inqueue_requests", "Requests waiting in a queue.", _LEVEL, registry=r)
        self.inqueue_seats = Gauge(_P + "current_inqueue_seats", "Seats of the requests waiting in a queue.", _LEVEL, registry=r)
        self.nominal = Gauge(_P + "nominal_limit_seats", "Nominal seats of each priority level.", _LEVEL, registry=r)
        self.lower = Gauge(_P + "lower_limit_seats", "Seats a priority level never lends.", _LEVEL, registry=r)
        self.upper = Gauge(_P + "upper_limit_seats", "Most seats a priority level may have, borrowing.", _LEVEL, registry=r)
        self.current = Gauge(_P + "current_limit_seats", "Seats of each priority level now, after borrowing and lending.",
                             _LEVEL, registry=r)
        self.target = Gauge(_P + "target_seats", "Seats each priority level asked for at the last adjustment.", _LEVEL,
                            registry=r)
        self.smoothed = Gauge(_P + "demand_seats_smoothed", "Smoothed seat demand of each priority level.", _LEVEL,
                              registry=r)
        self.fair_frac = Gauge(_P + "seat_fair_frac", "The fair proportion of the last seat allocation.", registry=r)

    def watch_level(self, qs: QueueSet) -> None:
        """Gauges read from the level's queues when scraped: nothing to count per request."""
        self.executing.labels(qs.name).set_function(lambda: qs.executing)
        self.executing_seats.labels(qs.name).set_function(lambda: qs.seats_in_use)
        self.inqueue.labels(qs.name).set_function(lambda: qs.waiting)
        self.inqueue_seats.labels(qs.name).set_function(lambda: qs.waiting_seats)
        self.current.labels(qs.name).set_function(lambda: qs.seats)
