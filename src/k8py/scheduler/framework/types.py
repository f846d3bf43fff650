"""What plugins read: :class:`PodInfo` (one pod, precomputed) and :class:`NodeInfo`
(one node with the pods on it and their sums).

Both are *views* computed once from the API objects, so the per-node hot path
reads plain attributes instead of walking dicts:

- ``PodInfo`` holds the pod's requests as upstream computes them
  (``max(sum(containers) + sum(sidecars), max(each init container + the
  sidecars started before it)) + overhead``), the same with the non-zero
  defaults used for scoring (100m cpu, 200Mi memory), its host ports,
  tolerations and a ``memo`` where plugins cache what they parse from the pod
  (the pod object never changes under a PodInfo: an update makes a new one).
- ``NodeInfo`` holds the node's allocatable, the summed requests of its pods
  (assumed ones included), used host ports, taints split by effect, images,
  and a ``generation`` taken from one global clock on every change.

Invariants: ``NodeInfo.requested`` always equals the sum of its pods' requests;
only the cache (``k8py.scheduler.cache``) mutates NodeInfos, and only between
scheduling cycles (the loop is single-threaded, so a cycle sees a stable view).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import orjson

from k8py.scheduler.framework.resources import (DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, Resources,
                                               pod_requests, pod_requests_pair)

__all__ = ["PodInfo", "NodeInfo", "Resources", "pod_requests", "same_for_scheduling", "DEFAULT_MILLI_CPU_REQUEST",
           "DEFAULT_MEMORY_REQUEST"]

Object = dict[str, Any]

#: one clock for every NodeInfo: a change anywhere gets a higher generation than
#: every change before it, so "what changed since G" is well defined (the cache's
#: incremental aggregates rely on it)
_GENERATIONS = itertools.count(1)

def _host_ports(spec: Object) -> list[tuple[str, str, int]]:
    ports = []
    for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        for p in c.get("ports") or ():
            hp = p.get("hostPort") or 0
            if hp > 0:
                ports.append((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", int(hp)))
    return ports


_dumps_sorted = functools.partial(orjson.dumps, option=orjson.OPT_SORT_KEYS)


def _freeze(value: Any) -> bytes:
    """A hashable digest of a JSON value: its canonical JSON (keys sorted), made
    in C. Equal digests mean equal values (1 and 1.0 differ here, which only
    costs a memo miss); a recursive sort of tuples in Python cost a pod's
    tolerations ~20 µs, for every pending pod."""
    return _dumps_sorted(value)


class PodInfo:
    """One pod as plugins read it; built once per pod object (see module docstring)."""

    __slots__ = ("pod", "key", "namespace", "name", "uid", "labels", "priority", "scheduler_name",
                 "node_name", "requests", "non_zero", "host_ports", "tolerations", "affinity",
                 "has_pod_affinity", "has_required_anti_affinity", "memo")

    def __init__(self, pod: Object) -> None:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.pod = pod
        self.namespace: str = meta.get("namespace") or ""
        self.name: str = meta.get("name") or ""
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid") or ""
        self.labels: dict[str, str] = meta.get("labels") or {}
        self.priority: int = int(spec.get("priority") or 0)
        self.scheduler_name: str = spec.get("schedulerName") or "default-scheduler"
        self.node_name: str = spec.get("nodeName") or ""
        self.requests, self.non_zero = pod_requests_pair(pod)
        self.host_ports = _host_ports(spec)
        self.tolerations: list[Object] = spec.get("tolerations") or []
        self.affinity: Object = spec.get("affinity") or {}
        pa = self.affinity.get("podAffinity") or {}
        paa = self.affinity.get("podAntiAffinity") or {}
        self.has_pod_affinity = bool(pa or paa)
        self.has_required_anti_affinity = bool(paa.get("requiredDuringSchedulingIgnoredDuringExecution"))
        self.memo: dict[str, Any] = {}

    @property
    def spec(self) -> Object:
        return self.pod.get("spec") or {}

    def shape(self, part: str) -> Any:
        """A hashable digest of what ``part`` of the pod decides for node-local
        plugins (``requests``, ``tolerations``, ``node-affinity``, ``ports``);
        pods with equal digests get equal node-local results."""
        key = "shape-" + part
        digest = self.memo.get(key)
        if digest is None:
            if part == "requests":
                r, z = self.requests, self.non_zero
                digest = (r.milli_cpu, r.memory, r.ephemeral, tuple(sorted(r.scalar.items())), z.milli_cpu, z.memory)
            elif part == "tolerations":
                digest = _freeze(self.tolerations)
            elif part == "node-affinity":
                digest = (_freeze(self.spec.get("nodeSelector")), _freeze(self.affinity.get("nodeAffinity")))
            elif part == "ports":
                digest = tuple(self.host_ports)
            else:
                raise KeyError(part)
            self.memo[key] = digest
        return digest

    def with_node(self, node_name: str) -> PodInfo:
        """The same pod assumed on ``node_name`` (a new view over a shallow copy)."""
        pod = {**self.pod, "spec": {**self.spec, "nodeName": node_name}}
        info = PodInfo.__new__(PodInfo)
        for slot in PodInfo.__slots__:
            setattr(info, slot, getattr(self, slot))
        info.pod = pod
        info.node_name = node_name
        info.memo = dict(self.memo)
        return info

    def refreshed(self, pod: Object) -> PodInfo:
        """This view over a newer object of the same pod whose spec and metadata
        are unchanged but for what every write moves (see
        :func:`same_for_scheduling`): what it derives from them still holds."""
        info = PodInfo.__new__(PodInfo)
        for slot in PodInfo.__slots__:
            setattr(info, slot, getattr(self, slot))
        info.pod = pod
        info.memo = dict(self.memo)
        return info

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


#: metadata every write may change that no PodInfo field, plugin or cache sum reads
_VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields", "generation"})


def same_for_scheduling(old: Object, new: Object) -> bool:
    """Whether ``new`` (a later object of the same pod) schedules like ``old``:
    equal spec, equal metadata but for :data:`_VOLATILE_METADATA`. Status may
    differ (the bound pod's PodScheduled condition, a kubelet's updates): the
    cache's sums and the plugins' per-node results do not read it."""
    if old.get("spec") != new.get("spec"):
        return False
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return ({k: v for k, v in old_meta.items() if k not in _VOLATILE_METADATA}
            == {k: v for k, v in new_meta.items() if k not in _VOLATILE_METADATA})


class NodeInfo:
    """One node, its pods and their sums (see module docstring)."""

    __slots__ = ("name", "node", "labels", "taints", "no_schedule_taints", "prefer_no_schedule_taints",
                 "unschedulable", "allocatable", "requested", "non_zero_requested", "pods",
                 "pods_with_affinity", "pods_with_required_anti_affinity", "used_ports", "images",
                 "generation", "index", "memo", "memo_key", "memo_entry", "match_counts")

    def __init__(self, name: str) -> None:
        self.name = name
        self.node: Object | None = None
        self.labels: dict[str, str] = {}
        self.taints: list[Object] = []
        self.no_schedule_taints: list[Object] = []
        self.prefer_no_schedule_taints: list[Object] = []
        self.unschedulable = False
        self.allocatable = Resources()
        self.requested = Resources()
        self.non_zero_requested = Resources()
        self.pods: dict[str, PodInfo] = {}
        self.pods_with_affinity: dict[str, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[str, PodInfo] = {}
        self.used_ports: dict[tuple[str, int], dict[str, int]] = {}
        self.images: dict[str, int] = {}
        self.generation = 0
        #: position in the cache's node list (-1 when not listed)
        self.index = -1
        #: node-local plugin results by pod shape, valid while ``generation`` holds
        #: (see ``framework.node_local``)
        self.memo: dict[Any, Any] = {}
        #: the entry of ``memo`` used last, in two slots: the hot path reads these
        self.memo_key = 0
        self.memo_entry: Any = None
        #: (namespace, selector) -> (generation, how many of this node's pods it matches): what
        #: PodTopologySpread counts for every pod of a workload on every node it scores; bounded
        self.match_counts: dict[tuple[str, str], tuple[int, int]] = {}

    def set_node(self, node: Object) -> None:
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        self.node = node
        self.labels = (node.get("metadata") or {}).get("labels") or {}
        self.taints = list(spec.get("taints") or ())
        self.no_schedule_taints = [t for t in self.taints if t.get("effect") in ("NoSchedule", "NoExecute")]
        self.prefer_no_schedule_taints = [t for t in self.taints if t.get("effect") == "PreferNoSchedule"]
        self.unschedulable = bool(spec.get("unschedulable"))
        self.allocatable = Resources.from_list(status.get("allocatable") or status.get("capacity") or {})
        images: dict[str, int] = {}
        for image in status.get("images") or ():
            for name in image.get("names") or ():
                images[name] = int(image.get("sizeBytes") or 0)
        self.images = images
        self.generation = next(_GENERATIONS)

    def add_pod(self, info: PodInfo) -> None:
        self.pods[info.key] = info
        self.requested.add(info.requests)
        self.non_zero_requested.add(info.non_zero)
        if info.has_pod_affinity:
            self.pods_with_affinity[info.key] = info
        if info.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[info.key] = info
        for ip, protocol, port in info.host_ports:
            ips = self.used_ports.setdefault((protocol, port), {})
            ips[ip] = ips.get(ip, 0) + 1
        self.generation = next(_GENERATIONS)

    def refresh_pod(self, info: PodInfo) -> None:
        """Point at a newer view of a pod already here that schedules the same
        (:meth:`PodInfo.refreshed`): sums and ``generation`` stay, so nothing
        computed from this node is invalidated."""
        key = info.key
        self.pods[key] = info
        if key in self.pods_with_affinity:
            self.pods_with_affinity[key] = info
        if key in self.pods_with_required_anti_affinity:
            self.pods_with_required_anti_affinity[key] = info

    def remove_pod(self, key: str) -> PodInfo | None:
        info = self.pods.pop(key, None)
        if info is None:
            return None
        self.requested.add(info.requests, -1)
        self.non_zero_requested.add(info.non_zero, -1)
        self.pods_with_affinity.pop(key, None)
        self.pods_with_required_anti_affinity.pop(key, None)
        for ip, protocol, port in info.host_ports:
            ips = self.used_ports.get((protocol, port))
            if ips and ip in ips:
                ips[ip] -= 1
                if ips[ip] <= 0:
                    del ips[ip]
                if not ips:
                    del self.used_ports[(protocol, port)]
        self.generation = next(_GENERATIONS)
        return info

    def clone(self) -> NodeInfo:
        """A copy whose pod set and sums can change without touching this one
        (preemption's what-if runs; the node object itself is shared)."""
        c = NodeInfo(self.name)
        c.node, c.labels, c.taints = self.node, self.labels, self.taints
        c.no_schedule_taints, c.prefer_no_schedule_taints = self.no_schedule_taints, self.prefer_no_schedule_taints
        c.unschedulable, c.allocatable, c.images = self.unschedulable, self.allocatable, self.images
        c.requested = self.requested.copy()
        c.non_zero_requested = self.non_zero_requested.copy()
        c.pods = dict(self.pods)
        c.pods_with_affinity = dict(self.pods_with_affinity)
        c.pods_with_required_anti_affinity = dict(self.pods_with_required_anti_affinity)
        c.used_ports = {k: dict(v) for k, v in self.used_ports.items()}
        c.generation = self.generation
        return c

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"


class QueuedPodInfo:
    """A pod in the scheduling queue: its view plus queueing bookkeeping.

    ``timestamp`` is when it last entered the queue (ordering among equal
    priorities), ``initial_attempt_timestamp`` its first time (for the
    attempt-duration metric), ``attempts`` the scheduling attempts so far
    (backoff doubles with each), ``unschedulable_plugins`` the plugins that
    rejected it last (only their cluster events can move it back), and
    ``gated`` whether a PreEnqueue plugin holds it back.
    """

    __slots__ = ("info", "timestamp", "initial_attempt_timestamp", "attempts", "unschedulable_plugins",
                 "pending_plugins", "gated", "gating_plugin", "backoff_expiry", "seq")

    def __init__(self, info: PodInfo, timestamp: float) -> None:
        self.info = info
        self.timestamp = timestamp
        self.initial_attempt_timestamp: float | None = None
        self.attempts = 0
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.gated = False
        self.gating_plugin = ""
        self.backoff_expiry = 0.0
        self.seq = 0

    @property
    def key(self) -> str:
        return self.info.key

    def __repr__(self) -> str:
        return f"QueuedPodInfo({self.info.key}, attempts={self.attempts})"
