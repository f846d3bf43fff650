"""The scheduler's cache: every node's view and the pods on it, including pods
*assumed* on a node before the API server confirms the binding.

Life of a pod in the cache (upstream ``internal/cache``)::

    assume_pod ──▶ Assumed ──finish_binding──▶ Assumed(expiring) ──ttl──▶ gone
        │                      │                       │
        │ forget_pod           │ add_pod (informer)    │ add_pod (informer)
        ▼                      ▼                       ▼
      gone                  Added                   Added ──remove_pod──▶ gone

- an assumed pod counts on its node at once, so the next cycle sees the
  resources taken (binding runs concurrently with later cycles);
- when the informer delivers the bound pod, the assumption is confirmed (and
  moved if the pod landed elsewhere);
- a failed bind forgets the pod; an assumption whose bind finished but that
  the informer never confirmed expires after ``assumed_ttl`` (0: never);
- a node deleted while pods remain on it is kept, unlisted, until they go.

Not thread-safe; the scheduler mutates it only from its event loop, never in
the middle of a (synchronous) scheduling cycle, so a cycle's view is stable.
``nodes`` is the list cycles iterate, in a stable order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable

from k8py.scheduler.framework.types import _GENERATIONS, NodeInfo, PodInfo, same_for_scheduling

__all__ = ["SchedulerCache"]

logger = logging.getLogger(__name__)

Object = dict[str, Any]


@dataclass(slots=True)
class _PodState:
    info: PodInfo
    assumed: bool
    deadline: float | None = None  # set by finish_binding when a ttl applies


def _count(counts: dict[str, int], keys: Iterable[str], sign: int) -> None:
    for key in keys:
        n = counts.get(key, 0) + sign
        if n > 0:
            counts[key] = n
        else:
            counts.pop(key, None)


class SchedulerCache:
    def __init__(self, *, assumed_ttl: float = 0.0) -> None:
        self.assumed_ttl = assumed_ttl
        self._infos: dict[str, NodeInfo] = {}
        self.nodes: list[NodeInfo] = []
        self._pods: dict[str, _PodState] = {}
        #: key -> deadline of the assumed pods whose bind finished (what
        #: ``cleanup_expired`` looks at: not every pod in the cache, each second)
        self._expiring: dict[str, float] = {}
        self._image_nodes: dict[str, int] = {}
        #: label key -> how many listed nodes have it: lets PodTopologySpread skip a
        #: pass over the feasible nodes for a key no node has (a zone, on zone-less nodes)
        self._label_key_nodes: dict[str, int] = {}
        #: node name -> how many of its pods have (required anti-)affinity; lets the
        #: affinity plugins skip nodes (and whole cycles) with nothing to check
        self.affinity_nodes: dict[str, int] = {}
        self.anti_affinity_nodes: dict[str, int] = {}
        #: every NodeInfo ever changed, least recently changed first (removed
        #: nodes stay as tombstones with node=None): ``changed_since`` walks it
        #: from the end, as upstream's generation-ordered node list
        self._recent: dict[str, NodeInfo] = {}
        #: bumped whenever a node enters or leaves ``nodes`` (positions move):
        #: ``framework.node_table`` rebuilds its tables then
        self.layout = 0

    # -- nodes -------------------------------------------------------------------------

    def node(self, name: str) -> NodeInfo | None:
        info = self._infos.get(name)
        return info if info is not None and info.node is not None else None

    def image_node_count(self, image: str) -> int:
        return self._image_nodes.get(image, 0)

    def label_key_node_count(self, key: str) -> int:
        """How many listed nodes have a label ``key``."""
        return self._label_key_nodes.get(key, 0)

    def _info(self, name: str) -> NodeInfo:
        info = self._infos.get(name)
        if info is None:
            info = self._infos[name] = NodeInfo(name)
        return info

    def _touch(self, info: NodeInfo) -> None:
        self._recent.pop(info.name, None)
        self._recent[info.name] = info

    @property
    def generation(self) -> int:
        """The generation of the latest change (0 before any)."""
        if not self._recent:
            return 0
        return next(reversed(self._recent.values())).generation

    def changed_since(self, generation: int) -> list[NodeInfo]:
        """Every NodeInfo changed after ``generation`` (tombstones included), newest first."""
        out = []
        for info in reversed(self._recent.values()):
            if info.generation <= generation:
                break
            out.append(info)
        return out

    def all_infos(self) -> list[NodeInfo]:
        """Every NodeInfo, listed or not (a deleted node still holding pods)."""
        return list(self._infos.values())

    def _count_node(self, info: NodeInfo, sign: int) -> None:
        """Count (sign +1) or uncount (-1) what the node has: its images, its label keys."""
        _count(self._image_nodes, info.images, sign)
        _count(self._label_key_nodes, info.labels, sign)

    def add_node(self, node: Object) -> NodeInfo:
        info = self._info(node["metadata"]["name"])
        if info.node is not None:
            self._count_node(info, -1)
        info.set_node(node)
        self._count_node(info, +1)
        if info.index < 0:
            info.index = len(self.nodes)
            self.nodes.append(info)
            self.layout += 1
        self._touch(info)
        return info

    update_node = add_node

    def remove_node(self, name: str) -> None:
        info = self._infos.get(name)
        if info is None:
            return
        if info.node is not None:
            self._count_node(info, -1)
        if info.index >= 0:
            last = self.nodes.pop()
            if last is not info:
                self.nodes[info.index] = last
                last.index = info.index
            info.index = -1
            self.layout += 1
        info.node = None
        info.labels = {}
        info.generation = next(_GENERATIONS)
        self._touch(info)
        if not info.pods:
            del self._infos[name]

    def _drop_ghost(self, info: NodeInfo) -> None:
        if info.node is None and not info.pods:
            self._infos.pop(info.name, None)

    # -- pods --------------------------------------------------------------------------

    def is_assumed(self, key: str) -> bool:
        state = self._pods.get(key)
        return state is not None and state.assumed

    def pod(self, key: str) -> PodInfo | None:
        state = self._pods.get(key)
        return state.info if state is not None else None

    def assume_pod(self, info: PodInfo) -> None:
        """``info`` carries the chosen node in ``node_name``."""
        if info.key in self._pods:
            raise ValueError(f"pod {info.key} is in the cache, so can't be assumed")
        self._place(info)
        self._pods[info.key] = _PodState(info, assumed=True)

    def finish_binding(self, key: str, now: float) -> None:
        state = self._pods.get(key)
        if state is not None and state.assumed and self.assumed_ttl > 0:
            state.deadline = self._expiring[key] = now + self.assumed_ttl

    def forget_pod(self, key: str) -> None:
        state = self._pods.get(key)
        if state is None or not state.assumed:
            return
        self._remove(state.info)
        del self._pods[key]
        self._expiring.pop(key, None)

    def _place(self, info: PodInfo) -> None:
        node = self._info(info.node_name)
        node.add_pod(info)
        self._touch(node)
        self._count_affinity(info, +1)

    def _count_affinity(self, info: PodInfo, sign: int) -> None:
        for flag, counts in ((info.has_pod_affinity, self.affinity_nodes),
                             (info.has_required_anti_affinity, self.anti_affinity_nodes)):
            if flag:
                n = counts.get(info.node_name, 0) + sign
                if n > 0:
                    counts[info.node_name] = n
                else:
                    counts.pop(info.node_name, None)

    def _remove(self, info: PodInfo) -> None:
        node = self._infos.get(info.node_name)
        if node is not None:
            if node.remove_pod(info.key) is not None:
                self._count_affinity(info, -1)
                self._touch(node)
            self._drop_ghost(node)

    def add_pod(self, pod: Object) -> PodInfo:
        """A pod with ``spec.nodeName`` seen by the informer (confirms an assumption).

        The common case, the bound pod confirming its assumption (or a status
        update of a placed pod), changes nothing the node's sums or the
        plugins read: the cached view is refreshed in place and the node's
        generation kept, so the next cycle reuses what it knew of the node.
        """
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        state = self._pods.get(key)
        if state is not None:
            if state.assumed:
                self._expiring.pop(key, None)
            cached = state.info
            if cached.node_name == ((pod.get("spec") or {}).get("nodeName") or "") and same_for_scheduling(cached.pod, pod):
                node = self._infos.get(cached.node_name)
                if node is not None and node.pods.get(key) is cached:
                    info = cached.refreshed(pod)
                    node.refresh_pod(info)
                    self._pods[key] = _PodState(info, assumed=False)
                    return info
            self._remove(state.info)
        info = PodInfo(pod)
        self._place(info)
        self._pods[info.key] = _PodState(info, assumed=False)
        return info

    def update_pod(self, pod: Object) -> PodInfo:
        return self.add_pod(pod)

    def remove_pod(self, key: str) -> PodInfo | None:
        state = self._pods.pop(key, None)
        if state is None:
            return None
        self._expiring.pop(key, None)
        self._remove(state.info)
        return state.info

    def cleanup_expired(self, now: float) -> list[str]:
        """Forget assumptions whose bind finished more than ``assumed_ttl`` ago."""
        expired = [key for key, deadline in self._expiring.items() if deadline <= now]
        for key in expired:
            logger.warning("assumed pod expired", extra={"pod": key})
            self.forget_pod(key)
        return expired

    # -- introspection ---------------------------------------------------------------------

    def pod_count(self) -> int:
        return len(self._pods)

    def dump(self) -> dict[str, list[str]]:
        """node -> pod keys (for debugging and tests)."""
        return {name: sorted(info.pods) for name, info in self._infos.items()}
