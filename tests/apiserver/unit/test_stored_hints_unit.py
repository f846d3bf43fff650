"""The watch cache's shortcut for the server's own writes (``watch.stored_hints``)
and the one-pass field reading it shares with the decode path: a value built
from a note is byte for byte what decoding the stored value gives, and a
note is used only for the very bytes it was made for."""

from __future__ import annotations

import copy

import orjson
import pytest

from k8py.apiserver.registry import Registry
from k8py.apiserver.resources import register_builtins
from k8py.apiserver.resources.strategies import path_getter
from k8py.apiserver.store.stored_form import encode_for_store
from k8py.apiserver.watch.cached_object import build_cached_object, read_fields
from k8py.apiserver.watch.stored_hints import StoredHints
from k8py.storage import EventType, KeyValue, WatchEvent


@pytest.fixture(scope="module")
def defs():
    registry = Registry()
    register_builtins(registry)
    return {(d.group, d.plural): d for d in registry}


def _pod(**extra):
    pod = {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": "web-0", "namespace": "default", "uid": "u-1", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "tier": "front"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                            '{"metadata":{"name":"web-0"},"spec":{"nodeName":"x"}}\n', "note": "é ☃ \\ \" }"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1",
                                 "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                               "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                            "f:spec": {"k:{\"name\":\"c\"}": {".": {}}}}}],
        },
        "spec": {"nodeName": "node-1", "hostNetwork": False, "restartPolicy": "Always",
                 "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": 0.5}}}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7"},
    }
    pod.update(extra)
    return pod


def _objects():
    yield ("", "pods"), _pod()
    with_rv = _pod()
    with_rv["metadata"]["resourceVersion"] = "41"  # what a PUT body carries: the stored form leaves it out
    yield ("", "pods"), with_rv
    rv_only = _pod()
    rv_only["metadata"] = {"resourceVersion": "3", "name": "web-0", "namespace": "default"}
    yield ("", "pods"), rv_only
    yield ("", "nodes"), {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1", "labels": {"zone": "a"}},
                          "spec": {"unschedulable": True}}
    yield ("", "configmaps"), {"kind": "ConfigMap", "apiVersion": "v1",
                               "metadata": {"name": "c", "namespace": "ns"}, "data": {"a": "}" * 5 + '","data":{'}}
    # metadata last, and metadata empty but for the name the key needs
    yield ("", "configmaps"), {"kind": "ConfigMap", "apiVersion": "v1", "data": {"x": "1"},
                               "metadata": {"name": "last", "namespace": "ns"}}
    yield ("", "namespaces"), {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "n"}}


def _put(key: str, value: bytes, rv: int) -> WatchEvent:
    return WatchEvent(EventType.PUT, KeyValue(key, value, rv, rv))


def _same(a, b) -> None:
    assert (a.key, a.namespace, a.name, a.rv, a.data, a.labels, a.fields) == \
        (b.key, b.namespace, b.name, b.rv, b.data, b.labels, b.fields)


@pytest.mark.parametrize("index", range(7))
def test_an_object_built_from_its_note_is_exactly_the_decoded_one(defs, index):
    group_plural, obj = list(_objects())[index]
    d = defs[group_plural]
    meta = obj["metadata"]
    key = d.key(meta.get("namespace", ""), meta["name"])
    value = encode_for_store(obj)
    hints = StoredHints()
    hints.note(d, key, value, obj)
    from_note = hints.take(d, _put(key, value, 1234))
    decoded = build_cached_object(d, key, value, 1234)
    if list(obj)[:3] != ["kind", "apiVersion", "metadata"]:
        assert from_note is None  # a layout the splice does not know: decoded as before
        return
    assert from_note is not None and hints.used == 1
    _same(from_note, decoded)
    assert orjson.loads(from_note.data)["metadata"]["resourceVersion"] == "1234"


def test_a_note_is_used_only_for_the_very_bytes_it_was_made_for(defs):
    d = defs[("", "pods")]
    obj = _pod()
    key = d.key("default", "web-0")
    value = encode_for_store(obj)
    hints = StoredHints()
    hints.note(d, key, value, obj)
    equal_copy = bytes(bytearray(value))
    assert equal_copy == value and equal_copy is not value
    assert hints.take(d, _put(key, equal_copy, 7)) is None  # another write's value, even if equal
    assert hints.missed == 1
    assert hints.take(d, _put(key, value, 8)) is None  # the key's note was used up by its event


def test_a_note_does_not_see_later_changes_to_the_dict(defs):
    d = defs[("", "pods")]
    obj = _pod()
    key = d.key("default", "web-0")
    value = encode_for_store(obj)
    expected = build_cached_object(d, key, value, 9)
    hints = StoredHints()
    hints.note(d, key, value, obj)
    obj["metadata"]["labels"]["app"] = "changed"  # the handler goes on with the dict
    obj["spec"]["nodeName"] = "elsewhere"
    _same(hints.take(d, _put(key, value, 9)), expected)


def test_delete_events_and_converted_views_are_decoded(defs):
    d = defs[("", "pods")]
    obj = _pod()
    key = d.key("default", "web-0")
    value = encode_for_store(obj)
    hints = StoredHints()
    hints.note(d, key, value, obj)
    assert hints.take(d, WatchEvent(EventType.DELETE, KeyValue(key, value, 1, 5))) is None
    views = [v for v in defs.values() if v.converter is not None]
    assert views, "the built-ins serve some kinds as views of another's stored form"
    view = views[0]
    hints.note(view, "/registry/x", value, obj)
    assert hints.take(view, _put("/registry/x", value, 6)) is None


def test_notes_of_writes_that_never_produced_an_event_are_bounded(defs):
    d = defs[("", "pods")]
    hints = StoredHints(limit=10)
    for i in range(25):
        obj = _pod()
        obj["metadata"]["name"] = f"p{i}"
        hints.note(d, d.key("default", f"p{i}"), encode_for_store(obj), obj)
        assert len(hints._notes) <= 10


def test_the_field_plan_reads_what_each_getter_reads():
    getters = {
        "spec.nodeName": path_getter("spec", "nodeName"),
        "spec.hostNetwork": path_getter("spec", "hostNetwork"),
        "spec.replicas": path_getter("spec", "replicas"),
        "spec.deep.er": path_getter("spec", "deep", "er"),
        "reason": path_getter("reason"),
        "custom": lambda o: "always",
    }
    cases = [
        {},
        {"spec": None, "reason": ""},
        {"spec": "not a dict", "reason": 3},
        {"spec": {"nodeName": "n", "hostNetwork": False, "replicas": 0, "deep": {"er": True}}, "reason": "Why"},
        {"spec": {"nodeName": "", "hostNetwork": True, "replicas": 2.5, "deep": ["x"]}},
        {"spec": {"deep": {"er": {"a": 1}}}},
    ]
    for obj in cases:
        expected = {}
        for path, getter in getters.items():
            v = getter(copy.deepcopy(obj))
            if v:
                expected[path] = v
        assert read_fields(getters, obj) == expected, obj


@pytest.mark.parametrize("obj", [
    {"kind": "Namespace", "apiVersion": "v1", "metadata": {"resourceVersion": "5"}, "spec": {}},
    {"kind": "Namespace", "apiVersion": "v1", "metadata": {}},
    {"kind": "Namespace", "apiVersion": "v1", "metadata": {"resourceVersion": "5"}},
])
def test_metadata_with_nothing_but_the_resource_version_it_gets(defs, obj):
    d = defs[("", "namespaces")]
    value = encode_for_store(obj)
    hints = StoredHints()
    hints.note(d, "/registry/namespaces/x", value, obj)
    from_note = hints.take(d, _put("/registry/namespaces/x", value, 77))
    assert from_note is not None
    _same(from_note, build_cached_object(d, "/registry/namespaces/x", value, 77))
