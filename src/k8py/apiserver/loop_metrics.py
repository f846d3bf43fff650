"""Prometheus metric families counted without a lock: the API server's per-request series.

``prometheus_client``'s counters, gauges and histograms take a ``threading.Lock`` on
every ``inc``/``observe`` (its ``MutexValue``), and a histogram walks its buckets one
by one. A request touches half a dozen such series (``apiserver_request_total``, its
duration, the flow-control dispatch, work and inflight series), all from the event
loop's thread, so the locks buy nothing and cost several microseconds a request.

:class:`LoopCounter`, :class:`LoopGauge` and :class:`LoopHistogram` are the same
families (same names, help, labels, buckets, the same ``/metrics`` text: collection
is ``prometheus_client``'s own and reads the same value objects) whose *children*
add to the value without the lock and find a histogram's bucket by bisection.

Invariant: every ``inc``/``dec``/``observe`` on these children runs on one thread,
the server's event loop (the scrape, ``generate_latest``, runs there too). A series
updated from another thread must stay a plain ``prometheus_client`` metric.
"""

from __future__ import annotations

from bisect import bisect_left

from prometheus_client import Counter, Gauge, Histogram

__all__ = ["LoopCounter", "LoopGauge", "LoopHistogram"]


class LoopCounter(Counter):
    def inc(self, amount: float = 1, exemplar: object = None) -> None:
        if exemplar is not None or amount < 0:
            super().inc(amount, exemplar)  # type: ignore[arg-type]  # validation and exemplars as upstream
            return
        try:
            self._value._value += amount
        except AttributeError:  # the parent of labelled children: prometheus_client's own error
            super().inc(amount)


class LoopGauge(Gauge):
    def inc(self, amount: float = 1) -> None:
        try:
            self._value._value += amount
        except AttributeError:
            super().inc(amount)

    def dec(self, amount: float = 1) -> None:
        try:
            self._value._value -= amount
        except AttributeError:
            super().dec(amount)


class LoopHistogram(Histogram):
    def observe(self, amount: float, exemplar: object = None) -> None:
        if exemplar is not None:
            super().observe(amount, exemplar)  # type: ignore[arg-type]
            return
        try:
            buckets = self._buckets
        except AttributeError:
            super().observe(amount)
            return
        self._sum._value += amount
        if amount != amount:  # NaN: in no bucket, as the scan finds none
            return
        # the first bound >= amount (the last bound is +Inf), as Histogram.observe's scan finds it
        buckets[bisect_left(self._upper_bounds, amount)]._value += 1
