"""k8py.controllers: the controller manager and the controllers it runs.

The room, as kube-controller-manager draws it. Every controller here is a
client of the API server and nothing else: it watches resources through the
process's shared informers (one watch and one cache per resource, however
many controllers read it), turns changes into keys on its own rate-limited
work queue, and reconciles one key at a time in ``sync(key)``, which reads
the latest state from the listers and writes through the REST client. It is
the source of truth for nothing: the API server holds all state, so a
controller can be killed at any moment and a new one picks up where it left
off (leader election keeps one active at a time).

Layout (one module per concept, named as upstream names it):

- ``context``: :class:`ControllerContext`, what every controller is given
  (REST client, shared informer factory, event recorders, clock, options);
- ``registry``: the controller names (upstream's) and where each factory is;
- ``keyed_controller``: the informer -> rate-limited queue -> ``sync(key)``
  base that most controllers extend;
- ``owner_refs``, ``controller_ref_manager``, ``expectations``,
  ``pod_control``, ``pod_status``, ``pod_ranking``: what every workload
  controller needs (controller ownerReferences, adopt/release, create/delete
  expectations, creating pods from templates, readiness/availability, which
  pods to delete first);
- one module or small folder per controller: ``replicaset``,
  ``replication_controller``, ``deployment/``, ``garbage_collector/``,
  ``namespace``, ``service_account``, ``pod_gc``, ``node_ipam``, and the
  batch ones (``job``, ``cronjob``, ``ttl_after_finished``, ``daemonset``,
  ``statefulset``);
- ``controller_manager``: starts the enabled controllers (behind leader
  election if asked), serves ``/healthz`` and ``/metrics``.

Layering (import-linter checks it): this package imports ``k8py.client`` and
``k8py.api`` only, never the API server, the store, the CLI, or the other
components (scheduler, kubelet, proxy).

Writes: Pods, ReplicaSets and the other workload objects' ``status``,
Events, the ``kube-system/kube-controller-manager`` Lease; deletes
(garbage collection, namespace content, terminated pods).
"""
