"""Overload protection: API Priority and Fairness (``flowcontrol.apiserver.k8s.io/v1``).

Upstream's APF, with the server's total seats from ``--max-requests-inflight``
plus ``--max-mutating-requests-inflight``:

- :mod:`.bootstrap` — the FlowSchemas and PriorityLevelConfigurations every
  server has (``exempt``, ``system``, ``node-high``, ``leader-election``,
  ``workload-high``, ``workload-low``, ``global-default``, ``catch-all``),
  created at start when missing;
- :mod:`.classify` — which FlowSchema a request matches and its flow;
- :mod:`.fair_queuing` — one level's seats and queues (shuffle sharding,
  ``queueLengthLimit``, round-robin dispatch);
- :mod:`.filter` — the middleware: classify, the ``X-Kubernetes-PF-*``
  response headers, a seat or a queue or 429 with ``Retry-After``.

So a client that floods fills its own flow's queues in its own level, and
system components (nodes, the scheduler, the controller manager, leader
election) keep theirs. Exported metrics: ``apiserver_current_inflight_requests``
(request_kind), ``apiserver_flowcontrol_rejected_requests_total``
(flow_schema, priority_level, reason), ``..._dispatched_requests_total``,
``..._current_executing_requests``, ``..._current_inqueue_requests`` and
``..._nominal_limit_seats`` (priority_level).

Request headers and bodies are bounded too: aiohttp refuses header lines
over ``max_field_size`` (8 KiB, 431) and the app refuses bodies over
``MAX_BODY_BYTES`` (3 MiB, 413), as upstream.
"""

from k8py.apiserver.overload.filter import FLOW_SCHEMA_UID, PRIORITY_LEVEL_UID, TOO_MANY, FlowControl, flow_control_user

__all__ = ["FlowControl", "TOO_MANY", "FLOW_SCHEMA_UID", "PRIORITY_LEVEL_UID", "flow_control_user"]
