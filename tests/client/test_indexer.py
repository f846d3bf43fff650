"""Indexer: the keyed cache and its secondary indexes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from k8py.client.delta_fifo import ReflectorStore
from k8py.client.indexer import (
    NAMESPACE_INDEX,
    Indexer,
    IndexNotFoundError,
    deep_copy,
    index_by_field,
    index_by_label,
    index_by_owner_uid,
)
from k8py.client.keys import DeletedFinalStateUnknown


def pod(name: str, ns: str = "default", node: str | None = None, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": ns, **extra}, "spec": {}}
    if node is not None:
        obj["spec"]["nodeName"] = node
    return obj


def by_node() -> Indexer:
    return Indexer(indexers={"node": index_by_field("spec.nodeName")})


# (steps applied in order, expected node index: value -> keys)
INDEX_CASES = [
    pytest.param([("add", pod("a", node="n1"))], {"n1": {"default/a"}}, id="add-files-under-value"),
    pytest.param([("add", pod("a"))], {}, id="missing-field-not-indexed"),
    pytest.param(
        [("add", pod("a", node="n1")), ("update", pod("a", node="n2"))],
        {"n2": {"default/a"}},
        id="update-moves-entry-and-drops-empty-value",
    ),
    pytest.param(
        [("add", pod("a", node="n1")), ("add", pod("b", node="n1")), ("update", pod("a", node="n2"))],
        {"n1": {"default/b"}, "n2": {"default/a"}},
        id="update-moves-only-that-key",
    ),
    pytest.param(
        [("add", pod("a", node="n1")), ("update", pod("a"))],
        {},
        id="update-clearing-field-unindexes",
    ),
    pytest.param(
        [("add", pod("a")), ("update", pod("a", node="n3"))],
        {"n3": {"default/a"}},
        id="update-setting-field-indexes",
    ),
    pytest.param(
        [("add", pod("a", node="n1")), ("add", pod("b", node="n1")), ("delete", pod("a"))],
        {"n1": {"default/b"}},
        id="delete-unindexes",
    ),
    pytest.param(
        [("add", pod("a", node="n1")), ("delete", DeletedFinalStateUnknown("default/a", None))],
        {},
        id="tombstone-deletes-its-key",
    ),
    pytest.param(
        [("add", pod("a", node="n1")), ("replace", [pod("b", node="n2"), pod("c", node="n2")])],
        {"n2": {"default/b", "default/c"}},
        id="replace-rebuilds",
    ),
]


@pytest.mark.parametrize(("steps", "expected"), INDEX_CASES)
def test_index_entries_follow_the_objects(steps: list[tuple[str, Any]], expected: dict[str, set[str]]) -> None:
    store = by_node()
    for op, arg in steps:
        if op == "replace":
            store.replace(arg, "7")
        else:
            getattr(store, op)(arg)
    assert sorted(store.list_index_func_values("node")) == sorted(expected)
    for value, keys in expected.items():
        assert set(store.index_keys("node", value)) == keys
        assert {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in store.by_index("node", value)} == keys


def test_namespace_index_is_built_in() -> None:
    store = Indexer()
    store.add(pod("a", ns="x"))
    store.add(pod("b", ns="y"))
    store.add({"metadata": {"name": "node-1"}})
    assert [o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "x")] == ["a"]
    assert store.index_keys(NAMESPACE_INDEX, "") == ["node-1"]
    assert sorted(store.list_index_func_values(NAMESPACE_INDEX)) == ["", "x", "y"]


def test_get_list_and_keys() -> None:
    store = Indexer()
    a = pod("a")
    store.add(a)
    assert store.get(pod("a")) is a
    assert store.get_by_key("default/a") is a
    assert store.get_by_key("default/zz") is None
    assert store.list() == [a]
    assert store.list_keys() == ["default/a"]
    assert "default/a" in store and len(store) == 1


def test_replace_records_resource_version_and_drops_absent_keys() -> None:
    store = Indexer()
    store.add(pod("old"))
    store.replace([pod("new")], "42")
    assert store.list_keys() == ["default/new"]
    assert store.last_sync_resource_version == "42"


def test_owner_uid_and_label_indexes() -> None:
    store = Indexer(indexers={"owner": index_by_owner_uid, "app": index_by_label("app")})
    owned = pod("a", ownerReferences=[{"uid": "u1"}, {"uid": "u2"}], labels={"app": "web"})
    store.add(owned)
    store.add(pod("b", labels={"tier": "db"}))
    assert store.index_keys("owner", "u2") == ["default/a"]
    assert store.index_keys("app", "web") == ["default/a"]
    assert sorted(store.list_index_func_values("app")) == ["web"]
    assert store.index("owner", pod("probe", ownerReferences=[{"uid": "u1"}])) == [owned]


@pytest.mark.parametrize(
    ("obj", "values"),
    [
        ({"spec": {"nodeName": "n1"}}, ["n1"]),
        ({"spec": {"nodeName": ""}}, []),
        ({"spec": {"nodeName": None}}, []),
        ({"spec": "not-a-mapping"}, []),
        ({}, []),
        ({"spec": {"nodeName": ["a", "b"]}}, ["a", "b"]),
        ({"spec": {"nodeName": 3}}, ["3"]),
        ({"spec": {"nodeName": True}}, ["true"]),
    ],
)
def test_field_index_function(obj: dict[str, Any], values: list[str]) -> None:
    assert index_by_field("spec.nodeName")(obj) == values


def test_indexes_added_later_file_existing_objects() -> None:
    store = Indexer()
    store.add(pod("a", node="n1"))
    store.add_indexers({"node": index_by_field("spec.nodeName")})
    assert store.index_keys("node", "n1") == ["default/a"]
    with pytest.raises(ValueError):
        store.add_indexers({"node": index_by_field("spec.nodeName")})


def test_unknown_index_is_an_error() -> None:
    with pytest.raises(IndexNotFoundError):
        Indexer().by_index("nope", "x")


def test_indexer_is_a_reflector_store() -> None:
    assert isinstance(Indexer(), ReflectorStore)


def test_concurrent_writers_from_threads_keep_indexes_consistent() -> None:
    store = by_node()
    n_threads, n_ops = 4, 500

    def writer(t: int) -> None:
        for i in range(n_ops):
            name = f"p{i % 50}"
            store.update(pod(name, node=f"n{(i + t) % 3}"))
            if i % 7 == 0:
                store.delete(pod(name))
            store.by_index("node", "n1")

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    # Every stored object is filed under exactly its current node, and nothing else is filed.
    filed = {(v, k) for v in store.list_index_func_values("node") for k in store.index_keys("node", v)}
    expected = {(o["spec"]["nodeName"], f"default/{o['metadata']['name']}") for o in store.list()}
    assert filed == expected


def test_deep_copy_is_independent_and_equal() -> None:
    original = pod("a", node="n1", labels={"x": "1"})
    original["spec"]["containers"] = [{"name": "c", "ports": [{"containerPort": 80}]}]
    clone = deep_copy(original)
    assert clone == original
    clone["spec"]["containers"][0]["ports"][0]["containerPort"] = 81
    clone["metadata"]["labels"]["x"] = "2"
    assert original["spec"]["containers"][0]["ports"][0]["containerPort"] == 80
    assert original["metadata"]["labels"]["x"] == "1"


@pytest.mark.parametrize("odd", [{1: "int key"}, {"big": 2**70}])
def test_deep_copy_falls_back_for_values_json_cannot_carry(odd: dict[Any, Any]) -> None:
    clone = deep_copy(odd)
    assert clone == odd and clone is not odd


def test_swap_stores_the_object_and_returns_the_one_it_replaced() -> None:
    store = Indexer(indexers={"by-node": index_by_field("spec.nodeName")})
    first = {**pod("a"), "spec": {"nodeName": "n1"}}
    second = {**pod("a"), "spec": {"nodeName": "n2"}}
    assert store.swap(first) is None
    assert store.swap(second) is first
    assert store.get_by_key("default/a") is second
    assert store.index_keys("by-node", "n1") == [] and store.index_keys("by-node", "n2") == ["default/a"]


def test_swap_that_an_index_function_refuses_changes_nothing() -> None:
    def broken(obj: Any) -> list[str]:
        if obj["metadata"].get("labels"):
            raise ValueError("no")
        return []

    store = Indexer(indexers={"broken": broken})
    a = pod("a")
    store.swap(a)
    with pytest.raises(ValueError):
        store.swap({**pod("a"), "metadata": {**pod("a")["metadata"], "labels": {"x": "y"}}})
    assert store.get_by_key("default/a") is a
