"""The garbage collector's ownership graph, alone: what each change queues."""

from __future__ import annotations

from k8py.controllers.garbage_collector.graph import Graph


def obj(uid: str, *, owners: tuple[str, ...] = (), namespace: str = "ns", deleting: bool = False, finalizers: tuple[str, ...] = (),
        block: bool = False) -> dict:
    meta: dict = {"uid": uid, "name": uid, "namespace": namespace,
                  "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": o, "uid": o, "blockOwnerDeletion": block}
                                      for o in owners]}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def graph() -> tuple[Graph, list[str], list[str]]:
    deletes: list[str] = []
    orphans: list[str] = []
    return Graph(deletes.append, orphans.append, lambda api_version, kind: True), deletes, orphans


def test_an_unseen_owner_becomes_a_virtual_node_to_verify():
    g, deletes, _ = graph()
    g.observe(obj("child", owners=("ghost",)))
    assert g.get("ghost").virtual and g.get("ghost").dependents == {"child"}
    assert deletes == ["ghost"]
    g.observe(obj("ghost"))
    assert not g.get("ghost").virtual


def test_deleting_an_owner_queues_its_dependents():
    g, deletes, _ = graph()
    g.observe(obj("owner"))
    g.observe(obj("a", owners=("owner",)))
    g.observe(obj("b", owners=("owner",)))
    deletes.clear()
    g.forget(obj("owner"))
    assert sorted(deletes) == ["a", "b"] and g.get("owner") is None


def test_foreground_deletion_queues_dependents_and_the_owner():
    g, deletes, orphans = graph()
    g.observe(obj("owner"))
    g.observe(obj("a", owners=("owner",), block=True))
    deletes.clear()
    g.observe(obj("owner", deleting=True, finalizers=("foregroundDeletion",)))
    assert g.get("owner").deleting_dependents and deletes == ["a", "owner"]
    deletes.clear()
    g.forget(obj("a"))  # the last dependent went: the owner may drop its finalizer now
    assert deletes == ["owner"]
    assert orphans == []


def test_orphan_finalizer_queues_the_owner_for_orphaning():
    g, _, orphans = graph()
    g.observe(obj("owner", deleting=True, finalizers=("orphan",)))
    assert orphans == ["owner"]


def test_dropping_an_owner_reference_unlinks_and_a_virtual_owner_without_dependents_goes():
    g, _, _ = graph()
    g.observe(obj("child", owners=("ghost",)))
    g.observe(obj("child"))
    assert g.get("ghost") is None and g.get("child").owners == []


def test_an_owner_in_another_namespace_queues_the_dependent():
    g, deletes, _ = graph()
    g.observe(obj("owner", namespace="other"))
    g.observe(obj("child", owners=("owner",), namespace="ns"))
    assert deletes == ["child"]
