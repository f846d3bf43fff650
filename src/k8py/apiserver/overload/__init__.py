"""Overload protection: API Priority and Fairness (``flowcontrol.apiserver.k8s.io/v1``).

Upstream's APF, with the server's total seats from ``--max-requests-inflight``
plus ``--max-mutating-requests-inflight``:

- :mod:`.bootstrap` — the FlowSchemas and PriorityLevelConfigurations every
  server has (``exempt``, ``system``, ``node-high``, ``leader-election``,
  ``workload-high``, ``workload-low``, ``global-default``, ``catch-all``),
  created at start when missing;
- :mod:`.classify` — which FlowSchema a request matches and its flow;
- :mod:`.fair_queuing` — one level's seats and queues (shuffle sharding,
  ``queueLengthLimit``, fair dispatch by seats);
- :mod:`.work_estimate` — how many seats a request takes (a LIST over many
  objects several, as upstream's work estimator);
- :mod:`.borrowing` — levels lend the seats they do not need
  (``lendablePercent``) to busy ones (up to ``borrowingLimitPercent``),
  re-shared every few seconds from each level's seat demand;
- :mod:`.status` — FlowSchemas' ``Dangling`` condition;
- :mod:`.metrics` — the ``apiserver_flowcontrol_*`` metrics, upstream's names;
- :mod:`.filter` — the middleware: classify, the ``X-Kubernetes-PF-*``
  response headers, seats or a queue or 429 with ``Retry-After``; and the
  background loop that re-shares seats and writes the conditions.

So a client that floods fills its own flow's queues in its own level, and
system components (nodes, the scheduler, the controller manager, leader
election) keep theirs; a level nobody uses lends its seats to one that is busy.

Request headers and bodies are bounded too: aiohttp refuses header lines
over ``max_field_size`` (8 KiB, 431) and the app refuses bodies over
``MAX_BODY_BYTES`` (3 MiB, 413), as upstream.
"""

from k8py.apiserver.overload.filter import FLOW_SCHEMA_UID, PRIORITY_LEVEL_UID, TOO_MANY, FlowControl, flow_control_user

__all__ = ["FlowControl", "TOO_MANY", "FLOW_SCHEMA_UID", "PRIORITY_LEVEL_UID", "flow_control_user"]
