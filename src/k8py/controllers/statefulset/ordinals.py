"""StatefulSet identities: ordinals, names and which pods are condemned.

Upstream: ``pkg/controller/statefulset/stateful_set_utils.go``. Pod ``i`` of set
``web`` is named ``web-i`` for ``i`` in ``[start, start + replicas)``
(``spec.ordinals.start``, 0 by default), carries the
``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``
labels, and has hostname ``web-i`` in the set's ``serviceName`` subdomain.
Pods outside the range are *condemned* and removed highest ordinal first.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = ["POD_NAME_LABEL", "POD_INDEX_LABEL", "pod_name", "ordinal_of", "start_ordinal",
           "split_pods"]

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")


def pod_name(set_name: str, ordinal: int) -> str:
    return f"{set_name}-{ordinal}"


def ordinal_of(pod: Mapping[str, Any], set_name: str) -> int | None:
    """The pod's ordinal if its name is ``<set>-<n>``, else None (not one of ours)."""
    m = _ORDINAL.match((pod.get("metadata") or {}).get("name", ""))
    if m is None or m.group(1) != set_name:
        return None
    return int(m.group(2))


def start_ordinal(stateful_set: Mapping[str, Any]) -> int:
    ordinals = (stateful_set.get("spec") or {}).get("ordinals") or {}
    return int(ordinals.get("start") or 0)


def split_pods(pods: list[Mapping[str, Any]], set_name: str, start: int,
               replicas: int) -> tuple[dict[int, Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(pods in range by ordinal, condemned pods highest ordinal first)."""
    in_range: dict[int, Mapping[str, Any]] = {}
    condemned: list[tuple[int, Mapping[str, Any]]] = []
    for pod in pods:
        ordinal = ordinal_of(pod, set_name)
        if ordinal is None:
            continue
        if start <= ordinal < start + replicas:
            in_range[ordinal] = pod
        else:
            condemned.append((ordinal, pod))
    condemned.sort(key=lambda x: -x[0])
    return in_range, [p for _, p in condemned]
