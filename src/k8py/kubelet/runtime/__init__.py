"""Container runtimes behind CRI-shaped protocols (see :mod:`.protocols`).

- :mod:`.process` — every container is a host process in its own process
  group, under bubblewrap (own pid/ipc/uts namespaces, private /tmp, volumes
  at their mountPath over a read-only view of the host) where ``bwrap`` exists;
- :mod:`.simulated` — no processes at all: containers "run" on timers, so one
  process can host thousands of nodes (as kwok does).
"""
