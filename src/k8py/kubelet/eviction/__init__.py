"""Node-pressure eviction (upstream's ``pkg/kubelet/eviction``).

- :mod:`.thresholds` — ``--eviction-hard``/``--eviction-soft`` and their grace periods, parsed;
- :mod:`.signals` — what the node has left: memory, nodefs, imagefs (bytes and inodes), pids;
- :mod:`.ranking` — which pod goes first, and upstream's eviction message;
- :mod:`.node_reclaim` — dead containers and unused images deleted before a pod is evicted for disk;
- :mod:`.local_storage` — a pod over its own emptyDir ``sizeLimit`` or ``limits.ephemeral-storage``;
- :mod:`.pod_usage` — what each pod uses (memory, disk, processes, inodes);
- :mod:`.manager` — :class:`~.manager.EvictionManager`: observe, decide, report the pressure
  conditions, evict one pod at a time.
"""
