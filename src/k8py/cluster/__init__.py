"""The cluster ``k8py up`` runs: a small supervisor over one process per component.

What it is the source of truth for: which component processes of one cluster
run, with which arguments, logging where (``DATA_DIR/logs/<component>.log``),
and whether the cluster is ready. It writes ``DATA_DIR/cluster.json`` (the
supervisor's pid, each component's pid, state and restarts, the API URL and
the progress messages), which ``k8py status``, ``k8py down`` and a detaching
``k8py up`` read.

Room: it starts processes (``python -m k8py <component> …``) and talks to the
API server only over HTTP (readiness: ``/readyz``, Nodes' ``Ready``). It never
imports the API server, the store or a component: each runs in its own
process, as in Kubernetes.

- :mod:`.spec`: what the cluster consists of (flags and ``--config FILE``);
- :mod:`.addresses`: its ports, pod range and Service range on this machine;
- :mod:`.commands`: each component's command line;
- :mod:`.supervisor`: start in order, restart with backoff, stop in reverse;
- :mod:`.state`: ``cluster.json``, read and written atomically;
- :mod:`.readiness`: API ready, nodes Ready;
- :mod:`.sweep`: no process of a data directory is left behind on stop.
"""
