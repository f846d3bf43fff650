"""Which nodes a DaemonSet's pod belongs on: upstream's ``NodeShouldRunDaemonPod``.

Upstream: ``pkg/controller/daemon/daemon_controller.go`` and
``pkg/controller/daemon/util``. The controller builds the pod it would create
for a node (the template plus the tolerations every daemon pod gets) and asks:

- ``should_run``: the template's ``nodeName`` (if any) is this node, the node
  matches the pod's required node affinity (``nodeSelector`` and
  ``requiredDuringSchedulingIgnoredDuringExecution``), and every ``NoSchedule``
  and ``NoExecute`` taint is tolerated;
- ``should_continue_running``: as above, except that only ``NoExecute`` taints
  matter: a pod already on a node that later gets a ``NoSchedule`` taint stays.

The pod itself is placed by the scheduler: :func:`pin_to_node` replaces the
template's required node affinity with a ``matchFields metadata.name`` term, as
upstream's ``ReplaceDaemonSetPodNodeNameNodeAffinity`` does.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping

from k8py.api.taints import tolerates

__all__ = ["DAEMON_TOLERATIONS", "Eligibility", "node_should_run_daemon_pod", "add_daemon_tolerations",
           "pin_to_node", "node_matches_selector_terms", "tolerates"]

DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
NETWORK_UNAVAILABLE = ("node.kubernetes.io/network-unavailable", "NoSchedule")


@dataclass(frozen=True)
class Eligibility:
    should_run: bool
    should_continue_running: bool


def add_daemon_tolerations(pod_spec: dict[str, Any]) -> None:
    """Add (or replace) the tolerations upstream gives every daemon pod."""
    wanted = list(DAEMON_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        wanted.append(NETWORK_UNAVAILABLE)
    tolerations = list(pod_spec.get("tolerations") or [])
    for key, effect in wanted:
        tolerations = [t for t in tolerations if not (t.get("key") == key and t.get("effect") == effect)]
        tolerations.append({"key": key, "operator": "Exists", "effect": effect})
    pod_spec["tolerations"] = tolerations


def _untolerated(taints: list[Mapping[str, Any]], tolerations: list[Mapping[str, Any]], effects: set[str]) -> bool:
    return any(t.get("effect") in effects and not any(tolerates(tol, t) for tol in tolerations) for t in taints)


def _requirement_matches(req: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, op = req.get("key"), req.get("operator")
    wanted = list(req.get("values") or ())
    present = key in values
    if op == "In":
        return present and values[key] in wanted
    if op == "NotIn":
        return not present or values[key] not in wanted
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(wanted) != 1:
            return False
        try:
            have, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def node_matches_selector_terms(terms: list[Mapping[str, Any]], node: Mapping[str, Any]) -> bool:
    """Terms are ORed, their requirements ANDed; a term with no requirements matches nothing."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    fields = {"metadata.name": (node.get("metadata") or {}).get("name", "")}
    for term in terms:
        exprs = term.get("matchExpressions") or []
        field_exprs = term.get("matchFields") or []
        if not exprs and not field_exprs:
            continue
        if all(_requirement_matches(r, labels) for r in exprs) and all(
                _requirement_matches(r, fields) for r in field_exprs):
            return True
    return False


def _required_terms(pod_spec: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return None
    return list(required.get("nodeSelectorTerms") or [])


def _fits_affinity(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    terms = _required_terms(pod_spec)
    return terms is None or node_matches_selector_terms(terms, node)


def node_should_run_daemon_pod(template_spec: Mapping[str, Any], node: Mapping[str, Any]) -> Eligibility:
    node_name = (node.get("metadata") or {}).get("name")
    pod_spec = copy.deepcopy(dict(template_spec))
    add_daemon_tolerations(pod_spec)
    if pod_spec.get("nodeName") not in (None, "", node_name):
        return Eligibility(False, False)
    if not _fits_affinity(pod_spec, node):
        return Eligibility(False, False)
    taints = list((node.get("spec") or {}).get("taints") or [])
    tolerations = list(pod_spec.get("tolerations") or [])
    if _untolerated(taints, tolerations, {"NoSchedule", "NoExecute"}):
        return Eligibility(False, not _untolerated(taints, tolerations, {"NoExecute"}))
    return Eligibility(True, True)


def pin_to_node(pod_spec: dict[str, Any], node_name: str) -> None:
    """Make the pod schedulable only onto ``node_name`` (upstream replaces the
    required node affinity's terms with one ``metadata.name`` field term)."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    affinity = pod_spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}
