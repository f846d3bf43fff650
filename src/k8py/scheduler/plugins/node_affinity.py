"""NodeAffinity: ``spec.nodeSelector`` and required node affinity (Filter,
UnschedulableAndUnresolvable), preferred terms (Score: the summed weights of
matching terms, normalized by the maximum).

Matching as upstream ``nodeaffinity``: the nodeSelector map must match every
label; required ``nodeSelectorTerms`` are ORed, a term's ``matchExpressions``
(labels) and ``matchFields`` (only ``metadata.name``) ANDed; an empty term
matches nothing; operators In, NotIn, Exists, DoesNotExist, Gt, Lt.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from k8py.scheduler.framework.interfaces import ClusterEventHint, CycleState, PreFilterResult
from k8py.scheduler.framework.status import Code, Status, unresolvable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import NODE_AFFINITY
from k8py.scheduler.plugins.taint_toleration import default_normalize

__all__ = ["NodeAffinity", "RequiredNodeAffinity", "required_affinity", "match_term", "preferred_score", "REASON"]

Object = dict[str, Any]
REASON = "node(s) didn't match Pod's node affinity/selector"


def _match_expression(expr: Object, value: str | None) -> bool:
    op = expr.get("operator")
    values = expr.get("values") or ()
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def match_term(term: Object, labels: Mapping[str, str], node_name: str) -> bool:
    exprs = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not exprs and not fields:
        return False
    for e in exprs:
        if not _match_expression(e, labels.get(e.get("key", ""))):
            return False
    for f in fields:
        value = node_name if f.get("key") == "metadata.name" else None
        if not _match_expression(f, value):
            return False
    return True


class RequiredNodeAffinity:
    """The pod's nodeSelector and required terms, parsed once (``match`` per node)."""

    __slots__ = ("selector", "terms")

    def __init__(self, selector: Mapping[str, str], terms: list[Object] | None) -> None:
        self.selector = dict(selector)
        self.terms = terms  # None: no required affinity

    @property
    def empty(self) -> bool:
        return not self.selector and self.terms is None

    def match(self, labels: Mapping[str, str], node_name: str) -> bool:
        for k, v in self.selector.items():
            if labels.get(k) != v:
                return False
        if self.terms is None:
            return True
        return any(match_term(t, labels, node_name) for t in self.terms)


def required_affinity(pod: PodInfo) -> RequiredNodeAffinity:
    cached = pod.memo.get("required-node-affinity")
    if cached is None:
        na = pod.affinity.get("nodeAffinity") or {}
        req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
        terms = list(req.get("nodeSelectorTerms") or ()) if isinstance(req, dict) else None
        cached = RequiredNodeAffinity(pod.spec.get("nodeSelector") or {}, terms)
        pod.memo["required-node-affinity"] = cached
    return cached


def preferred_score(preferred: Sequence[Object], labels: Mapping[str, str], node_name: str) -> int:
    return sum(int(p.get("weight") or 0) for p in preferred if match_term(p.get("preference") or {}, labels, node_name))


def _node_names_from_fields(terms: list[Object]) -> set[str] | None:
    """When every term pins metadata.name with In, only those nodes need filtering."""
    names: set[str] = set()
    for t in terms:
        pinned = [f for f in t.get("matchFields") or () if f.get("key") == "metadata.name" and f.get("operator") == "In"]
        if not pinned:
            return None
        names.update(pinned[0].get("values") or ())
    return names


class NodeAffinity:
    name = NODE_AFFINITY

    def __init__(self, args: dict | None = None, handle: object = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        req = required_affinity(pod)
        if req.empty:
            return None, Status(Code.SKIP)
        if req.terms:
            names = _node_names_from_fields(req.terms)
            if names is not None:
                return PreFilterResult(names), None
        return None, None

    def local_key(self, pod: PodInfo) -> object:
        """Filter and Score read only the node and this digest of the pod (see framework.node_local)."""
        return pod.shape("node-affinity")

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None if required_affinity(pod).match(node.labels, node.name) else unresolvable(REASON)

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], failed: dict[str, Status]) -> list[NodeInfo]:
        req = required_affinity(pod)
        out = []
        for node in nodes:
            if req.match(node.labels, node.name):
                out.append(node)
            else:
                failed[node.name] = unresolvable(REASON).with_plugin(self.name)
        return out

    def _preferred(self, pod: PodInfo) -> list[Object]:
        return list(((pod.affinity.get("nodeAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution")) or ())

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        return None if self._preferred(pod) else Status(Code.SKIP)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return preferred_score(self._preferred(pod), node.labels, node.name)

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        preferred = self._preferred(pod)
        return [preferred_score(preferred, n.labels, n.name) for n in nodes]

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize(scores, reverse=False)

    def events_to_register(self) -> list[ClusterEventHint]:
        def hint(pod: PodInfo, old: Object | None, new: Object | None) -> bool:
            if new is None:
                return False
            meta = new.get("metadata") or {}
            return required_affinity(pod).match(meta.get("labels") or {}, meta.get("name") or "")

        return [ClusterEventHint("Node", frozenset({"Add", "UpdateNodeLabel"}), hint)]
