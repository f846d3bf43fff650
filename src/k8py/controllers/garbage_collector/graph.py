"""The ownership graph: every object the collector watches, by uid, with its
owners and dependents (upstream ``graph_builder``'s ``uidToNode``).

Fed synchronously by the monitors' event handlers (asyncio: one change at a
time, in each resource's event order). Each change returns nothing but puts
uids on the collector's queues through the two callbacks it was built with:

- ``attempt_to_delete(uid)``: an object whose owners may be gone or waiting
  (an owner was deleted, or entered foreground deletion), an owner that may
  now drop its ``foregroundDeletion`` finalizer, or a *virtual* node (an
  owner named by some ownerReference but never observed) to be verified;
- ``attempt_to_orphan(uid)``: an owner being deleted with the ``orphan``
  finalizer.

Invariants: ``node.dependents`` holds exactly the uids of nodes listing it
among their owners; a virtual node exists only while something depends on
it (or until it is verified).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from k8py.controllers.object_meta import meta as _meta

__all__ = ["Node", "Graph", "FOREGROUND", "ORPHAN"]

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


@dataclass
class Node:
    uid: str
    api_version: str
    kind: str
    namespace: str
    name: str
    owners: list[dict[str, Any]] = field(default_factory=list)
    dependents: set[str] = field(default_factory=set)
    virtual: bool = False
    being_deleted: bool = False
    deleting_dependents: bool = False
    resource_version: str = ""
    """Of the last observed version ("" for a virtual node)."""
    finalizers: tuple[str, ...] = ()

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name} ({self.uid})"


class Graph:
    def __init__(self, attempt_to_delete: Callable[[str], None], attempt_to_orphan: Callable[[str], None],
                 is_namespaced: Callable[[str, str], bool | None]) -> None:
        self.nodes: dict[str, Node] = {}
        self._delete = attempt_to_delete
        self._orphan = attempt_to_orphan
        self._is_namespaced = is_namespaced  # (apiVersion, kind) -> namespaced? None if unknown

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, uid: str) -> Node | None:
        return self.nodes.get(uid)

    # -- changes -------------------------------------------------------------------------

    def observe(self, obj: Mapping[str, Any]) -> None:
        """An object was added or updated."""
        meta = _meta(obj)
        uid = meta.get("uid")
        if not uid:
            return
        refs = [dict(r) for r in meta.get("ownerReferences") or () if r.get("uid")]
        node = self.nodes.get(uid)
        if node is None:
            node = Node(uid, obj.get("apiVersion") or "", obj.get("kind") or "", meta.get("namespace") or "", meta.get("name") or "")
            self.nodes[uid] = node
            node.owners = refs
            self._link(node, refs)
        else:
            if node.virtual:
                node.virtual = False
                node.api_version, node.kind = obj.get("apiVersion") or node.api_version, obj.get("kind") or node.kind
                node.namespace, node.name = meta.get("namespace") or "", meta.get("name") or node.name
                for dep_uid in list(node.dependents):
                    dep = self.nodes.get(dep_uid)
                    if dep is not None and node.namespace and dep.namespace != node.namespace:
                        self._delete(dep_uid)
            old = {r["uid"]: r for r in node.owners}
            new = {r["uid"]: r for r in refs}
            added = [r for u, r in new.items() if u not in old]
            removed = [r for u, r in old.items() if u not in new]
            node.owners = refs
            self._link(node, added)
            self._unlink(node, removed)
            for u, r in new.items():
                # a dependent that stops blocking its owner lets a foreground deletion finish
                if u in old and old[u].get("blockOwnerDeletion") and not r.get("blockOwnerDeletion"):
                    self._wake_owner(u)
        finalizers = meta.get("finalizers") or ()
        node.resource_version = meta.get("resourceVersion") or ""
        node.finalizers = tuple(finalizers)
        node.being_deleted = bool(meta.get("deletionTimestamp"))
        if node.being_deleted and FOREGROUND in finalizers:
            if not node.deleting_dependents:
                node.deleting_dependents = True
                for dep in list(node.dependents):
                    self._delete(dep)
            self._delete(uid)
        elif not (node.being_deleted and FOREGROUND in finalizers):
            node.deleting_dependents = False
        if node.being_deleted and ORPHAN in finalizers:
            self._orphan(uid)

    def forget(self, obj: Mapping[str, Any]) -> None:
        """An object was deleted."""
        uid = _meta(obj).get("uid")
        node = self.nodes.get(uid) if uid else None
        if node is None:
            return
        self.remove(node)

    def remove(self, node: Node) -> None:
        """Drop ``node``; its dependents are looked at again (their owner is gone)."""
        self.nodes.pop(node.uid, None)
        self._unlink(node, node.owners)
        for dep in list(node.dependents):
            self._delete(dep)

    # -- links -------------------------------------------------------------------------------

    def _link(self, node: Node, refs: list[dict[str, Any]]) -> None:
        for ref in refs:
            owner = self.nodes.get(ref["uid"])
            if owner is None:
                namespaced = self._is_namespaced(ref.get("apiVersion") or "", ref.get("kind") or "")
                owner = Node(ref["uid"], ref.get("apiVersion") or "", ref.get("kind") or "",
                             node.namespace if namespaced is not False else "", ref.get("name") or "", virtual=True)
                self.nodes[owner.uid] = owner
                self._delete(owner.uid)  # verify that it exists
            elif not owner.virtual and owner.namespace and owner.namespace != node.namespace:
                self._delete(node.uid)  # an owner in another namespace is no owner: look again
            owner.dependents.add(node.uid)

    def _unlink(self, node: Node, refs: list[dict[str, Any]]) -> None:
        for ref in refs:
            owner = self.nodes.get(ref["uid"])
            if owner is None:
                continue
            owner.dependents.discard(node.uid)
            if owner.virtual and not owner.dependents:
                self.nodes.pop(owner.uid, None)
            elif owner.deleting_dependents:
                self._delete(owner.uid)

    def _wake_owner(self, uid: str) -> None:
        owner = self.nodes.get(uid)
        if owner is not None and owner.deleting_dependents:
            self._delete(uid)
