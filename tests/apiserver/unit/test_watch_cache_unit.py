"""WatchCache alone: state, indexes, the event ring, and the one-directional
fan-out (``apply`` offers each event to the watchers indexed under it and
returns the ones that want a flush)."""

from __future__ import annotations

import orjson
import pytest

from k8py.apiserver.watch.watch_cache import (
    ADDED,
    DELETED,
    MODIFIED,
    CacheEvent,
    TooOldResourceVersion,
    WatchCache,
    build_cached_object,
)
from tests.support.watch_events import delete, obj, put


class Recorder:
    """A CacheWatcher that records what it is offered (the protocol, nothing more)."""

    def __init__(self, namespace: str = "", index_value: str | None = None, *, wants_flush: bool = True,
                 name_value: str | None = None) -> None:
        self.namespace = namespace
        self.index_value = index_value
        self.name_value = name_value
        self.wants_flush = wants_flush
        self.offered: list[tuple[str, str, int]] = []
        self.terminated = False

    def offer(self, event: CacheEvent, decisions: dict | None = None) -> bool:
        self.offered.append((event.type, event.obj.name, event.rv))
        return self.wants_flush

    def flush(self, frames: dict | None = None) -> None:
        pass

    def terminate(self) -> None:
        self.terminated = True


def pod(name: str, ns: str = "default", node: str = "", **labels: str) -> dict:
    o = obj(name, ns, labels=labels or None)
    o["spec"] = {"nodeName": node} if node else {}
    return o


def test_a_cached_object_carries_its_json_with_the_revision_and_the_selectable_fields(pods):
    cached = build_cached_object(pods, "/registry/pods/default/a", orjson.dumps(pod("a", node="n1", app="web")), 7)
    decoded = orjson.loads(cached.data)
    assert decoded["metadata"]["resourceVersion"] == "7"
    assert (cached.namespace, cached.name, cached.rv) == ("default", "a", 7)
    assert cached.labels == {"app": "web"}
    assert cached.field("spec.nodeName") == "n1"
    assert cached.field("status.phase") == ""
    assert cached.decode() == decoded and cached.decode() is not cached.decode()


def test_apply_keeps_objects_namespaces_and_the_index_exact(pods):
    cache = WatchCache(pods)
    cache.apply(put(pods, pod("a", "ns1", node="n1"), 2))
    cache.apply(put(pods, pod("b", "ns2", node="n1"), 3))
    cache.apply(put(pods, pod("a", "ns1", node="n2"), 4))  # moves to another node
    assert set(cache.by_namespace) == {"ns1", "ns2"}
    assert {o.name for o in cache.candidates(index_value="n1")} == {"b"}
    assert {o.name for o in cache.candidates(index_value="n2")} == {"a"}
    assert {o.name for o in cache.candidates("ns1", "n1")} == set()
    cache.apply(delete(pods, pod("b", "ns2", node="n1"), 5))
    assert set(cache.by_namespace) == {"ns1"}
    assert "n1" not in cache.by_index  # empty groups are dropped
    assert [o.name for o in cache.candidates()] == ["a"]
    assert cache.revision == 5


def test_the_ring_replays_events_after_a_revision_and_refuses_older_than_it_holds(configmaps):
    cache = WatchCache(configmaps, capacity=3)
    for rev in range(2, 7):  # 5 events into a ring of 3
        cache.apply(put(configmaps, obj(f"c{rev}"), rev))
    assert [e.rv for e in cache.events_after(4)] == [5, 6]
    assert cache.events_after(6) == []
    assert cache.oldest_rv == 3  # the ring holds 4, 5, 6: a watch from 3 still sees all of them
    assert [e.rv for e in cache.events_after(3)] == [4, 5, 6]
    with pytest.raises(TooOldResourceVersion) as info:
        cache.events_after(2)
    assert (info.value.requested, info.value.oldest) == (2, 3)


def test_event_types_follow_the_previous_state(configmaps):
    cache = WatchCache(configmaps)
    cache.apply(put(configmaps, obj("x"), 2))
    cache.apply(put(configmaps, obj("x", data={"k": "v"}), 3))
    cache.apply(delete(configmaps, obj("x"), 4))
    types = [(e.type, e.rv, e.prev is not None) for e in cache.ring]
    assert types == [(ADDED, 2, False), (MODIFIED, 3, True), (DELETED, 4, True)]
    # the DELETED event's object is stamped with the delete's revision
    assert orjson.loads(cache.ring[-1].obj.data)["metadata"]["resourceVersion"] == "4"


def test_reset_replaces_the_state_and_forgets_the_history(configmaps):
    cache = WatchCache(configmaps)
    cache.apply(put(configmaps, obj("old"), 2))
    fresh = build_cached_object(configmaps, configmaps.key("default", "new"), orjson.dumps(obj("new")), 9)
    cache.reset([fresh], 10)
    assert [o.name for o in cache.candidates()] == ["new"]
    assert (cache.revision, cache.oldest_rv) == (10, 10)
    with pytest.raises(TooOldResourceVersion):
        cache.events_after(9)
    cache.advance(12)
    assert cache.revision == 12
    cache.advance(11)
    assert cache.revision == 12  # only increases


def test_fan_out_visits_only_the_watchers_indexed_under_the_event(pods):
    cache = WatchCache(pods)
    everything, ns1, ns2 = Recorder(), Recorder("ns1"), Recorder("ns2")
    node1, node2 = Recorder(index_value="n1"), Recorder(index_value="n2")
    for w in (everything, ns1, ns2, node1, node2):
        cache.add_watcher(w)
    assert cache.watcher_count == 5
    cache.apply(put(pods, pod("a", "ns1", node="n1"), 2))
    cache.apply(put(pods, pod("a", "ns1", node="n2"), 3))  # rescheduled: both node groups see it
    assert everything.offered == [(ADDED, "a", 2), (MODIFIED, "a", 3)]
    assert ns1.offered == [(ADDED, "a", 2), (MODIFIED, "a", 3)]
    assert ns2.offered == []
    assert node1.offered == [(ADDED, "a", 2), (MODIFIED, "a", 3)]
    assert node2.offered == [(MODIFIED, "a", 3)]


def test_one_object_watches_are_offered_only_their_objects_events(nodes):
    cache = WatchCache(nodes)
    watchers = {n: Recorder(name_value=n) for n in ("n0", "n1", "n2")}
    for w in watchers.values():
        cache.add_watcher(w)
    cache.apply(put(nodes, obj("n1", ""), 2))
    cache.apply(put(nodes, obj("n1", ""), 3))
    cache.apply(delete(nodes, obj("n1", ""), 4))
    cache.apply(put(nodes, obj("other", ""), 5))
    assert watchers["n1"].offered == [(ADDED, "n1", 2), (MODIFIED, "n1", 3), (DELETED, "n1", 4)]
    assert watchers["n0"].offered == watchers["n2"].offered == []
    cache.remove_watcher(watchers["n1"])
    assert "n1" not in cache.watchers.by_name and cache.watcher_count == 2


def test_candidates_of_one_name_are_looked_up_not_scanned(configmaps, nodes):
    cms = WatchCache(configmaps)
    for i, ns in enumerate(("a", "b")):
        cms.apply(put(configmaps, obj("x", ns), 2 + i))
    assert [(o.namespace, o.name) for o in cms.candidates("b", name="x")] == [("b", "x")]
    assert list(cms.candidates("c", name="x")) == []
    # every namespace: the name narrows nothing, the query's own match does
    assert sorted(o.namespace for o in cms.candidates(name="x")) == ["a", "b"]
    cluster = WatchCache(nodes)
    cluster.apply(put(nodes, obj("n1", ""), 2))
    assert [o.name for o in cluster.candidates(name="n1")] == ["n1"]
    assert list(cluster.candidates(name="n2")) == []


def test_apply_returns_exactly_the_watchers_that_want_a_flush(configmaps):
    cache = WatchCache(configmaps)
    live, backed_up, elsewhere = Recorder(), Recorder(wants_flush=False), Recorder("other")
    for w in (live, backed_up, elsewhere):
        cache.add_watcher(w)
    touched = cache.apply(put(configmaps, obj("x"), 2))
    assert touched == [live]
    assert backed_up.offered and not elsewhere.offered
    cache.remove_watcher(live)
    cache.remove_watcher(elsewhere)
    assert cache.apply(put(configmaps, obj("y"), 3)) == []
    assert cache.all_watchers() == [backed_up]
    assert "other" not in cache.watchers.by_namespace  # empty groups are dropped
