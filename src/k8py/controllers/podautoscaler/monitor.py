"""The HPA controller's own metrics (upstream ``podautoscaler/monitor``), on
the controller manager's ``/metrics``:

- ``horizontal_pod_autoscaler_controller_reconciliations_total`` and
  ``…_reconciliation_duration_seconds`` by ``action`` (``scale_up``,
  ``scale_down``, ``none``) and ``error`` (``spec``: the HPA asks for
  something that cannot be, such as a kind that does not exist or a metric
  source without a target; ``internal``: reading the scale or a metric
  failed; ``none``);
- ``…_metric_computation_total`` and ``…_metric_computation_duration_seconds``,
  the same per metric with its ``metric_type`` (``spec.metrics[*].type``).

Histogram buckets as upstream: 1 ms doubling 15 times. With no registry
(a controller built outside a manager) nothing is recorded.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Monitor", "action_label"]

_SUBSYSTEM = "horizontal_pod_autoscaler_controller"
_BUCKETS = tuple(0.001 * 2**i for i in range(15))


def action_label(current: int, desired: int) -> str:
    return "scale_up" if desired > current else "scale_down" if desired < current else "none"


class Monitor:
    def __init__(self, registry: Any = None) -> None:
        self._on = registry is not None
        if not self._on:
            return
        from prometheus_client import Counter, Histogram

        kw: dict[str, Any] = {"subsystem": _SUBSYSTEM, "registry": registry}
        self._reconciliations = Counter("reconciliations_total", "Number of reconciliations of HPA controller.",
                                        ["action", "error"], **kw)
        self._reconciliation_seconds = Histogram("reconciliation_duration_seconds",
                                                 "The time(seconds) that the HPA controller takes to reconcile once.",
                                                 ["action", "error"], buckets=_BUCKETS, **kw)
        self._computations = Counter("metric_computation_total", "Number of metric computations.",
                                     ["action", "error", "metric_type"], **kw)
        self._computation_seconds = Histogram("metric_computation_duration_seconds",
                                              "The time(seconds) that the HPA controller takes to calculate one metric.",
                                              ["action", "error", "metric_type"], buckets=_BUCKETS, **kw)

    def reconciliation(self, action: str, error: str, seconds: float) -> None:
        if self._on:
            self._reconciliations.labels(action, error).inc()
            self._reconciliation_seconds.labels(action, error).observe(seconds)

    def metric_computation(self, action: str, error: str, metric_type: str, seconds: float) -> None:
        if self._on:
            self._computations.labels(action, error, metric_type).inc()
            self._computation_seconds.labels(action, error, metric_type).observe(seconds)
