"""Work queue metrics behind a small provider interface (client-go's
``workqueue.MetricsProvider``).

The queues never import a metrics library. They ask a :class:`MetricsProvider`
for seven instruments per named queue and feed them:

=================================  ==========================================
depth                              items waiting to be handed out
adds                               every accepted ``add``
latency (queue duration)           seconds from ``add`` to ``get``
work duration                      seconds from ``get`` to ``done``
unfinished work seconds            summed age of everything being processed
longest running processor seconds  age of the oldest item being processed
retries                            every ``add_after`` (rate-limited requeues)
=================================  ==========================================

The two "unfinished" gauges are sampled, not event-driven: whoever runs the
workers calls :meth:`QueueMetrics.update_unfinished_work` periodically (the
controller loop does, every 500 ms as client-go).

:class:`NoopMetricsProvider` is the default; :class:`PrometheusMetricsProvider`
registers the upstream metric names (``workqueue_depth``, ``workqueue_adds_total``,
...) with a ``name`` label. A queue with an empty name records nothing.
"""

from __future__ import annotations

from typing import Any, Hashable, Protocol

from k8py.client.clock import Clock

__all__ = [
    "GaugeMetric",
    "SettableGaugeMetric",
    "CounterMetric",
    "HistogramMetric",
    "MetricsProvider",
    "NoopMetricsProvider",
    "PrometheusMetricsProvider",
    "set_default_metrics_provider",
    "default_metrics_provider",
    "QueueMetrics",
]


class GaugeMetric(Protocol):
    def inc(self) -> None: ...

    def dec(self) -> None: ...


class SettableGaugeMetric(Protocol):
    def set(self, value: float) -> None: ...


class CounterMetric(Protocol):
    def inc(self) -> None: ...


class HistogramMetric(Protocol):
    def observe(self, value: float) -> None: ...


class MetricsProvider(Protocol):
    """Makes the instruments of one named queue."""

    def new_depth_metric(self, name: str) -> GaugeMetric: ...

    def new_adds_metric(self, name: str) -> CounterMetric: ...

    def new_latency_metric(self, name: str) -> HistogramMetric: ...

    def new_work_duration_metric(self, name: str) -> HistogramMetric: ...

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_retries_metric(self, name: str) -> CounterMetric: ...


class _Noop:
    __slots__ = ()

    def inc(self) -> None:
        pass

    def dec(self) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass


_NOOP = _Noop()


class NoopMetricsProvider:
    """Records nothing."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return _NOOP

    def new_adds_metric(self, name: str) -> CounterMetric:
        return _NOOP

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return _NOOP

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return _NOOP

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP

    def new_retries_metric(self, name: str) -> CounterMetric:
        return _NOOP


# Upstream buckets: ExponentialBuckets(10e-9, 10, 10), i.e. 10 ns .. 10 s.
_DURATION_BUCKETS = tuple(1e-8 * 10**i for i in range(10))


class PrometheusMetricsProvider:
    """Registers the upstream ``workqueue_*`` families once, in ``registry``.

    Create one per registry (registering the same names twice fails); every
    queue built with it becomes one ``name`` label value.
    """

    def __init__(self, registry: Any = None) -> None:
        import prometheus_client as prom

        kw: dict[str, Any] = {"labelnames": ["name"], "subsystem": "workqueue"}
        if registry is not None:
            kw["registry"] = registry
        self._depth = prom.Gauge("depth", "Current depth of workqueue", **kw)
        self._adds = prom.Counter("adds", "Total number of adds handled by workqueue", **kw)
        self._latency = prom.Histogram(
            "queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            buckets=_DURATION_BUCKETS,
            **kw,
        )
        self._work = prom.Histogram(
            "work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            buckets=_DURATION_BUCKETS,
            **kw,
        )
        self._unfinished = prom.Gauge(
            "unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads.",
            **kw,
        )
        self._longest = prom.Gauge(
            "longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            **kw,
        )
        self._retries = prom.Counter("retries", "Total number of retries handled by workqueue", **kw)

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return self._depth.labels(name=name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self._adds.labels(name=name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self._latency.labels(name=name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self._work.labels(name=name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._unfinished.labels(name=name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._longest.labels(name=name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self._retries.labels(name=name)


_default_provider: MetricsProvider = NoopMetricsProvider()


def set_default_metrics_provider(provider: MetricsProvider) -> None:
    """Set the provider used by queues built without one (client-go's ``SetProvider``).

    Call it once at process start-up, before building queues.
    """
    global _default_provider
    _default_provider = provider


def default_metrics_provider() -> MetricsProvider:
    return _default_provider


class QueueMetrics:
    """The bookkeeping that turns queue events into the seven instruments.

    Owned by one queue and called from its event loop only.
    """

    def __init__(self, name: str, provider: MetricsProvider, clock: Clock) -> None:
        self.enabled = bool(name) and not isinstance(provider, NoopMetricsProvider)
        self._clock = clock
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work = provider.new_work_duration_metric(name)
        self._unfinished = provider.new_unfinished_work_seconds_metric(name)
        self._longest = provider.new_longest_running_processor_seconds_metric(name)
        self._retries = provider.new_retries_metric(name)
        self._added_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        if not self.enabled:
            return
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(item, self._clock.monotonic())

    def get(self, item: Hashable) -> None:
        if not self.enabled:
            return
        now = self._clock.monotonic()
        self._depth.dec()
        self._started_at[item] = now
        added = self._added_at.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)

    def done(self, item: Hashable) -> None:
        if not self.enabled:
            return
        started = self._started_at.pop(item, None)
        if started is not None:
            self._work.observe(self._clock.monotonic() - started)

    def retry(self) -> None:
        if self.enabled:
            self._retries.inc()

    def update_unfinished_work(self) -> None:
        if not self.enabled:
            return
        now = self._clock.monotonic()
        ages = [now - t for t in self._started_at.values()]
        self._unfinished.set(sum(ages))
        self._longest.set(max(ages, default=0.0))
