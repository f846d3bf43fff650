"""Pod (anti-)affinity terms, parsed once per pod: which pods a term selects
(label selector, with ``matchLabelKeys``/``mismatchLabelKeys`` folded in from
the owning pod's labels) in which namespaces (``namespaces`` list,
``namespaceSelector``, or the owning pod's namespace when both are unset),
and the topology key that defines "together".

Used by InterPodAffinity; pure and free of I/O (namespace labels come in as a
function).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from k8py.api.selectors import LabelSelector, Operator, Requirement, label_selector_from_dict
from k8py.scheduler.framework.types import PodInfo

__all__ = ["AffinityTerm", "WeightedTerm", "pod_affinity_terms", "NamespaceLabels"]

Object = dict[str, Any]
NamespaceLabels = Callable[[str], Mapping[str, str] | None]


class AffinityTerm:
    __slots__ = ("selector", "namespaces", "namespace_selector", "topology_key")

    def __init__(self, term: Object, owner: PodInfo) -> None:
        selector = label_selector_from_dict(term.get("labelSelector")) if term.get("labelSelector") is not None else LabelSelector.match_nothing()
        extra = []
        for key in term.get("matchLabelKeys") or ():
            if key in owner.labels:
                extra.append(Requirement.new(key, Operator.IN, [owner.labels[key]]))
        for key in term.get("mismatchLabelKeys") or ():
            if key in owner.labels:
                extra.append(Requirement.new(key, Operator.NOT_IN, [owner.labels[key]]))
        if extra and not selector.nothing:
            selector = LabelSelector.of([*selector.requirements, *extra])
        self.selector = selector
        namespaces = list(term.get("namespaces") or ())
        ns_selector = term.get("namespaceSelector")
        self.namespace_selector = label_selector_from_dict(ns_selector) if ns_selector is not None else None
        if not namespaces and ns_selector is None:
            namespaces = [owner.namespace]
        self.namespaces = frozenset(namespaces)
        self.topology_key: str = term.get("topologyKey") or ""

    def matches(self, pod: PodInfo, namespace_labels: NamespaceLabels | None = None) -> bool:
        if pod.namespace not in self.namespaces:
            if self.namespace_selector is None:
                return False
            if self.namespace_selector.empty:
                pass  # {} selects every namespace
            else:
                labels = namespace_labels(pod.namespace) if namespace_labels is not None else None
                if labels is None or not self.namespace_selector.matches(labels):
                    return False
        return self.selector.matches(pod.labels)


class WeightedTerm:
    __slots__ = ("term", "weight")

    def __init__(self, term: AffinityTerm, weight: int) -> None:
        self.term = term
        self.weight = weight


class PodAffinityTerms:
    __slots__ = ("affinity", "anti_affinity", "preferred_affinity", "preferred_anti_affinity")

    def __init__(self, pod: PodInfo) -> None:
        pa = pod.affinity.get("podAffinity") or {}
        paa = pod.affinity.get("podAntiAffinity") or {}
        req = "requiredDuringSchedulingIgnoredDuringExecution"
        pref = "preferredDuringSchedulingIgnoredDuringExecution"
        self.affinity = [AffinityTerm(t, pod) for t in pa.get(req) or ()]
        self.anti_affinity = [AffinityTerm(t, pod) for t in paa.get(req) or ()]
        self.preferred_affinity = [WeightedTerm(AffinityTerm(t.get("podAffinityTerm") or {}, pod), int(t.get("weight") or 0))
                                   for t in pa.get(pref) or ()]
        self.preferred_anti_affinity = [WeightedTerm(AffinityTerm(t.get("podAffinityTerm") or {}, pod), int(t.get("weight") or 0))
                                        for t in paa.get(pref) or ()]

    @property
    def has_required(self) -> bool:
        return bool(self.affinity or self.anti_affinity)

    @property
    def has_preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti_affinity)


def pod_affinity_terms(pod: PodInfo) -> PodAffinityTerms:
    terms = pod.memo.get("pod-affinity-terms")
    if terms is None:
        terms = pod.memo["pod-affinity-terms"] = PodAffinityTerms(pod)
    return terms
