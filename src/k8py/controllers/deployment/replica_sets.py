"""A Deployment's ReplicaSets: which is new, which are old, their revisions,
the pod-template-hash, and the surge/unavailability fenceposts (pure).

As ``pkg/controller/deployment/util``:

- the *new* ReplicaSet is the oldest one whose pod template equals the
  Deployment's, ignoring the ``pod-template-hash`` label; every other one is
  *old*;
- a ReplicaSet's revision is its ``deployment.kubernetes.io/revision``
  annotation; a new ReplicaSet gets ``max(old revisions) + 1``, and one that
  becomes new again (a rollback) keeps its earlier numbers in
  ``deployment.kubernetes.io/revision-history``;
- the name of a created ReplicaSet is ``<deployment>-<hash>``, the hash an
  FNV-32a of the template (and ``status.collisionCount``) encoded with
  upstream's safe alphabet. (Upstream hashes Go's printed struct; this
  hashes canonical JSON, so the names differ from a real cluster's but are
  just as stable.)
- ``maxSurge`` rounds percentages up, ``maxUnavailable`` down; both zero
  means one unavailable.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import orjson

from k8py.client.indexer import deep_copy
from k8py.controllers.object_meta import meta as _meta

__all__ = [
    "POD_TEMPLATE_HASH_LABEL", "REVISION_ANNOTATION", "REVISION_HISTORY_ANNOTATION", "DESIRED_REPLICAS_ANNOTATION",
    "MAX_REPLICAS_ANNOTATION", "template_hash", "equal_ignore_hash", "find_new_replica_set", "find_old_replica_sets",
    "revision_of", "max_revision", "resolve_fenceposts", "max_surge", "max_unavailable", "replicas_of",
    "available_of", "by_creation", "active", "is_rolling", "desired_replicas", "set_replicas_annotations",
    "replicas_annotations_need_update", "set_new_replica_set_annotations", "template_without_hash",
]

POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
ROLLBACK_TO_ANNOTATION = "deprecated.deployment.rollback.to"
_SKIP_COPY = {"kubectl.kubernetes.io/last-applied-configuration", REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
              DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, ROLLBACK_TO_ANNOTATION}
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

Obj = Mapping[str, Any]


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def replicas_of(obj: Obj | None) -> int:
    if obj is None:
        return 0
    value = _spec(obj).get("replicas")
    return 1 if value is None else int(value)


def status_replicas(obj: Obj | None) -> int:
    return int(((obj or {}).get("status") or {}).get("replicas") or 0)


def available_of(obj: Obj | None) -> int:
    """Available pods as the ReplicaSet reports them, never more than it is scaled to
    (a status not yet caught up with a scale-down must not count pods being removed)."""
    if obj is None:
        return 0
    available = int((obj.get("status") or {}).get("availableReplicas") or 0)
    return min(available, replicas_of(obj))


def ready_of(obj: Obj | None) -> int:
    return int(((obj or {}).get("status") or {}).get("readyReplicas") or 0)


def template_hash(template: Obj, collision_count: int | None) -> str:
    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    if collision_count is not None:
        data += orjson.dumps(collision_count)
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(h))


def template_without_hash(template: Obj) -> dict[str, Any]:
    t = deep_copy(dict(template))
    labels = (t.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(POD_TEMPLATE_HASH_LABEL, None)
    return t


def equal_ignore_hash(a: Obj, b: Obj) -> bool:
    """Whether two pod templates are equal but for the pod-template-hash label
    (what comparing two :func:`template_without_hash` copies says, without the
    copies: every sync compares the Deployment's template with each of its
    ReplicaSets')."""
    meta_a, meta_b = a.get("metadata"), b.get("metadata")
    if len(a) != len(b) or any(v != b.get(k, _MISSING) for k, v in a.items() if k != "metadata"):
        return False
    if meta_a is None or meta_b is None or not isinstance(meta_a, dict) or not isinstance(meta_b, dict):
        return meta_a == meta_b and ("metadata" in a) == ("metadata" in b)
    if len(meta_a) != len(meta_b) or any(v != meta_b.get(k, _MISSING) for k, v in meta_a.items() if k != "labels"):
        return False
    labels_a, labels_b = meta_a.get("labels"), meta_b.get("labels")
    if not isinstance(labels_a, dict) or not isinstance(labels_b, dict):
        return labels_a == labels_b
    if len(labels_a) - (POD_TEMPLATE_HASH_LABEL in labels_a) != len(labels_b) - (POD_TEMPLATE_HASH_LABEL in labels_b):
        return False
    return all(k == POD_TEMPLATE_HASH_LABEL or labels_b.get(k, _MISSING) == v for k, v in labels_a.items())


_MISSING = object()


def by_creation(rss: list[Any]) -> list[Any]:
    return sorted(rss, key=lambda rs: (_meta(rs).get("creationTimestamp") or "", _meta(rs).get("name") or ""))


def active(rss: list[Any]) -> list[Any]:
    return [rs for rs in rss if rs is not None and replicas_of(rs) > 0]


def find_new_replica_set(deployment: Obj, rss: list[Any]) -> Any | None:
    template = _spec(deployment).get("template") or {}
    for rs in by_creation(rss):
        if equal_ignore_hash(_spec(rs).get("template") or {}, template):
            return rs
    return None


def find_old_replica_sets(deployment: Obj, rss: list[Any], new: Any | None = _MISSING) -> list[Any]:
    """Every ReplicaSet but the new one (``new``: already found by the caller)."""
    if new is _MISSING:
        new = find_new_replica_set(deployment, rss)
    return [rs for rs in rss if rs is not new]


def revision_of(obj: Obj | None) -> int:
    raw = (_meta(obj or {}).get("annotations") or {}).get(REVISION_ANNOTATION)
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0


def max_revision(rss: list[Any]) -> int:
    return max((revision_of(rs) for rs in rss), default=0)


def is_rolling(deployment: Obj) -> bool:
    return ((_spec(deployment).get("strategy") or {}).get("type") or "RollingUpdate") == "RollingUpdate"


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        pct = int(text[:-1])
        exact = pct * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text)


def resolve_fenceposts(deployment: Obj) -> tuple[int, int]:
    rolling = (_spec(deployment).get("strategy") or {}).get("rollingUpdate") or {}
    desired = replicas_of(deployment)
    surge = _int_or_percent(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = _int_or_percent(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(deployment: Obj) -> int:
    return resolve_fenceposts(deployment)[0] if is_rolling(deployment) else 0


def max_unavailable(deployment: Obj) -> int:
    if not is_rolling(deployment) or replicas_of(deployment) == 0:
        return 0
    return min(resolve_fenceposts(deployment)[1], replicas_of(deployment))


def desired_replicas(rs: Obj) -> int | None:
    raw = (_meta(rs).get("annotations") or {}).get(DESIRED_REPLICAS_ANNOTATION)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def max_replicas_annotation(rs: Obj) -> int | None:
    raw = (_meta(rs).get("annotations") or {}).get(MAX_REPLICAS_ANNOTATION)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def replicas_annotations_need_update(rs: Obj, desired: int, maximum: int) -> bool:
    annotations = _meta(rs).get("annotations") or {}
    return annotations.get(DESIRED_REPLICAS_ANNOTATION) != str(desired) or annotations.get(MAX_REPLICAS_ANNOTATION) != str(maximum)


def set_replicas_annotations(rs: dict[str, Any], desired: int, maximum: int) -> bool:
    annotations = rs.setdefault("metadata", {}).setdefault("annotations", {})
    changed = replicas_annotations_need_update(rs, desired, maximum)
    annotations[DESIRED_REPLICAS_ANNOTATION] = str(desired)
    annotations[MAX_REPLICAS_ANNOTATION] = str(maximum)
    return changed


def set_new_replica_set_annotations(deployment: Obj, rs: dict[str, Any], new_revision: int, exists: bool) -> bool:
    """Copy the Deployment's annotations and set the revision (upstream ``SetNewReplicaSetAnnotations``)."""
    annotations = rs.setdefault("metadata", {}).setdefault("annotations", {})
    changed = False
    for key, value in (_meta(deployment).get("annotations") or {}).items():
        if key in _SKIP_COPY:
            continue
        if annotations.get(key) != value:
            annotations[key] = value
            changed = True
    old_revision = annotations.get(REVISION_ANNOTATION)
    try:
        old_int = int(old_revision) if old_revision else 0
    except ValueError:
        old_int = 0
    if old_int < new_revision:
        annotations[REVISION_ANNOTATION] = str(new_revision)
        changed = True
        if old_revision:
            history = annotations.get(REVISION_HISTORY_ANNOTATION)
            annotations[REVISION_HISTORY_ANNOTATION] = f"{history},{old_revision}" if history else old_revision
    if not exists:
        desired = replicas_of(deployment)
        if set_replicas_annotations(rs, desired, desired + max_surge(deployment)):
            changed = True
    return changed
