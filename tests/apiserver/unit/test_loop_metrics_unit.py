"""The lock-free per-request metric families print exactly what prometheus_client's own print
for the same observations (names, labels, buckets, sums, counts)."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from k8py.apiserver.loop_metrics import LoopCounter, LoopGauge, LoopHistogram

BUCKETS = (0.001, 0.01, 0.1, 1.0)
OBSERVED = [0.0, 0.0005, 0.001, 0.0010001, 0.01, 0.05, 0.1, 0.99, 1.0, 1.5, 100.0, -1.0, math.nan]


def _render(counter_cls, gauge_cls, histogram_cls) -> bytes:
    registry = CollectorRegistry()
    c = counter_cls("t_requests_total", "requests", ["verb"], registry=registry)
    g = gauge_cls("t_inflight", "inflight", ["kind"], registry=registry)
    h = histogram_cls("t_seconds", "latency", ["verb"], buckets=BUCKETS, registry=registry)
    for i, value in enumerate(OBSERVED):
        verb = ("GET", "POST")[i % 2]
        c.labels(verb).inc()
        c.labels(verb).inc(2.5)
        g.labels(verb).inc()
        if i % 3 == 0:
            g.labels(verb).dec(2)
        h.labels(verb).observe(value)
    return b"\n".join(line for line in generate_latest(registry).splitlines() if b"_created" not in line)


def test_the_exposition_is_prometheus_clients_own():
    ours = _render(LoopCounter, LoopGauge, LoopHistogram)
    theirs = _render(Counter, Gauge, Histogram)
    assert ours == theirs
    assert b't_seconds_bucket{le="0.001",verb="GET"}' in ours


def test_misuse_still_raises_as_prometheus_client_does():
    registry = CollectorRegistry()
    c = LoopCounter("t_total", "t", ["verb"], registry=registry)
    with pytest.raises(ValueError):
        c.labels("GET").inc(-1)  # counters only go up
    with pytest.raises(ValueError):
        c.inc()  # the labelled parent is not observable
    h = LoopHistogram("t_h", "t", ["verb"], registry=registry)
    with pytest.raises(ValueError):
        h.observe(1.0)
