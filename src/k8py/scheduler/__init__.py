"""k8py's scheduler (``k8py scheduler``): kube-scheduler's framework in asyncio.

The room it draws:

- **watches** pods (all of them: pending ones to place, placed ones to count)
  and nodes, through shared informers (``k8py.client``);
- **writes** ``pods/binding`` (the choice), the ``PodScheduled=False``
  condition and ``status.nominatedNodeName`` of pods it cannot place,
  ``Scheduled``/``FailedScheduling`` Events, preemption's deletions of
  victims, and its Lease when leader election is on;
- **is the source of truth for** nothing stored: its cache (nodes, placed
  and *assumed* pods) and its queue are rebuilt from the API server on start.

Inside: ``queue/`` (active, backoff, unschedulable, gated), ``cache/``
(node views and assumed pods), ``framework/`` (Status codes, the extension
point protocols, the per-profile runtime), ``plugins/`` (one module per
in-tree plugin), ``profile/`` (KubeSchedulerConfiguration and profiles),
``schedule_one`` (filter, score, pick), ``scheduler`` (the loop, binding
cycle, failure handling), ``event_handlers``, ``pod_status``, ``metrics``,
``app`` (the command's wiring; healthz/readyz/metrics come from k8py.client.health_server).

It imports only ``k8py.client`` and ``k8py.api`` (an import-linter contract).
"""

from k8py.scheduler.app import run

__all__ = ["run"]
