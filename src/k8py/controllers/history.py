"""ControllerRevisions: the template history of StatefulSets and DaemonSets.

Upstream: ``pkg/controller/history/controller_history.go`` and the
``getPatch``/``newRevision`` halves of the StatefulSet and DaemonSet
controllers. A revision's ``data`` is the strategic-merge patch that puts the
owner's pod template back (``{"spec": {"template": {..., "$patch": "replace"}}}``);
``kubectl rollout undo`` applies exactly that patch to the owner, and
``kubectl rollout history`` lists the revisions it owns by ``revision``.

Invariants:

- a revision is named ``<owner>-<hash>``, the hash being of the data plus the
  owner's ``collisionCount`` (bumped when a name is taken by different data),
  and carries the hash as its ``controller-revision-hash`` label; pods carry
  the same label, which is how a controller tells old pods from new;
- revision numbers only grow: when the owner's template returns to an earlier
  revision's (an undo), that revision is given the next number rather than a
  duplicate being created;
- history beyond ``revisionHistoryLimit`` is trimmed oldest first, never a
  revision that a live pod (or the owner's current/update revision) uses.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable, Mapping

import orjson

__all__ = ["REVISION_HASH_LABEL", "template_patch", "revision_hash", "safe_encode", "new_revision",
           "equal_revisions", "next_revision_number", "revisions_to_trim", "revision_of_pod"]

REVISION_HASH_LABEL = "controller-revision-hash"
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def safe_encode(text: str) -> str:
    """apimachinery's ``rand.SafeEncodeString``: no vowels, no look-alikes."""
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in text)


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def template_patch(owner: Mapping[str, Any]) -> dict[str, Any]:
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def revision_hash(data: Mapping[str, Any], collision_count: int | None) -> str:
    raw = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    if collision_count:
        raw += collision_count.to_bytes(4, "little")
    return safe_encode(str(_fnv32a(raw)))


def new_revision(owner: Mapping[str, Any], *, kind: str, revision: int,
                 collision_count: int | None) -> dict[str, Any]:
    meta = owner.get("metadata") or {}
    data = template_patch(owner)
    digest = revision_hash(data, collision_count)
    labels = dict(((owner.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {})
    labels[REVISION_HASH_LABEL] = digest
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": f"{meta['name']}-{digest}",
            "namespace": meta.get("namespace"),
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": kind, "name": meta["name"], "uid": meta["uid"],
                "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "data": data,
        "revision": revision,
    }


def equal_revisions(revisions: Iterable[Mapping[str, Any]], wanted: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Revisions whose data equals ``wanted``'s (oldest first)."""
    same = [r for r in revisions if r.get("data") == wanted.get("data")]
    return sorted(same, key=lambda r: r.get("revision", 0))


def next_revision_number(revisions: Iterable[Mapping[str, Any]]) -> int:
    return max((int(r.get("revision", 0)) for r in revisions), default=0) + 1


def revision_of_pod(pod: Mapping[str, Any]) -> str | None:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_HASH_LABEL)


def revisions_to_trim(revisions: Iterable[Mapping[str, Any]], *, limit: int, live_hashes: set[str],
                      live_names: set[str]) -> list[Mapping[str, Any]]:
    """The oldest revisions beyond ``limit`` that nothing live uses."""
    candidates = [r for r in sorted(revisions, key=lambda r: r.get("revision", 0))
                  if r["metadata"]["name"] not in live_names
                  and (r["metadata"].get("labels") or {}).get(REVISION_HASH_LABEL) not in live_hashes]
    excess = len(candidates) - max(0, limit)
    return candidates[:excess] if excess > 0 else []
