"""Node-pressure eviction (upstream's ``pkg/kubelet/eviction``).

- :mod:`.thresholds` — ``--eviction-hard``/``--eviction-soft`` and their grace periods, parsed;
- :mod:`.signals` — what the node has left: memory, nodefs, imagefs (bytes and inodes), pids;
- :mod:`.ranking` — which pod goes first, and upstream's eviction message;
- :mod:`.manager` — :class:`~.manager.EvictionManager`: observe, decide, report the pressure
  conditions, evict one pod at a time.
"""
