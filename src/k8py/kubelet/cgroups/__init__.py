"""Pod and container cgroups: where a pod lives by its QoS class, and its limits.

- :mod:`.qos` — pure: a pod's cgroup parent as upstream places it
  (``kubepods/pod<uid>`` for Guaranteed, ``kubepods/burstable/pod<uid>``,
  ``kubepods/besteffort/pod<uid>``) and its pod-level resources (memory and
  CPU limits when every container has one, CPU shares from the requests,
  the pids limit);
- :mod:`.tree` — :class:`CgroupTree`: that layout on the host's cgroups,
  v1 (one directory per controller: memory, cpu, cpuacct, pids) or v2
  (one unified directory), under a k8py-owned parent ``k8py-<node>-<tag>`` inside
  the kubelet's own cgroup; limits written, OOM kills and usage read back.
"""
