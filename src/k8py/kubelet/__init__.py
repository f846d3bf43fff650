"""``k8py.kubelet``: the node agent, where pods come alive.

The kubelet registers its Node, keeps it alive, watches the pods bound to it
(``fieldSelector=spec.nodeName=<node>``) and runs them through a container
runtime, reporting their status back through the API server. It talks to the
cluster only through :mod:`k8py.client` (import-linter checks it).

It is cut into rooms, each the source of truth for one thing, as upstream's is:

- ``node_status`` / ``node_lease`` — the Node object: registration (capacity,
  allocatable, labels, taints, nodeInfo, addresses, daemon endpoint), the
  conditions read from the host, and the Lease heartbeat in kube-node-lease.
- ``pod_workers`` — one asyncio worker per pod, the lifecycle
  syncing → terminating → terminated → cleaned up. The source of truth for
  *what phase of its life a pod is in on this node*.
- ``pod_actions`` — ``compute_pod_actions``: a pure function from (pod spec,
  runtime state) to a plan (start these, kill those); the worker carries it out.
- ``runtime/`` — CRI-shaped protocols (``runtime/protocols.py``) and their
  implementations: ``runtime/process`` (host processes, under bubblewrap
  where present) and ``runtime/simulated`` (no processes, for scale). The
  runtime is the source of truth for *what is actually running*.
- ``pleg`` — the pod lifecycle event generator: turns runtime container
  events into "pod X changed" wake-ups for its worker, at once.
- ``status_manager`` — the source of truth for *what the API server should
  be told*: caches each pod's latest computed status, writes only changes,
  batched, never from a stale resourceVersion.
- ``pod_status`` — builds the API ``PodStatus`` (phase, conditions, container
  statuses, qosClass …) from spec + runtime state: pure functions.
- ``prober/`` — startup, liveness and readiness probes; results feed the
  worker (restart) and the status (ready).
- ``volumes/`` — lays out each pod's volumes on disk (emptyDir, configMap,
  secret, downwardAPI, projected, hostPath) with the ``..data`` atomic swap.
- ``server/`` — the kubelet's HTTP server (/healthz, /metrics, logs, exec,
  attach, port-forward, stats), given a :class:`~k8py.kubelet.server_context.ServerContext`.
"""
