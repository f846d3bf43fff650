"""WatcherGroup with the watch cache: watchers with one selection decided
once per event and flushed together, each still getting exactly its own
stream (start revision, backlog, bound)."""

from __future__ import annotations

import orjson

from k8py.apiserver.handlers.query import parse_query
from k8py.apiserver.watch.watch_cache import ADDED, DELETED, MODIFIED, WatchCache
from k8py.apiserver.watch.watcher import Watcher
from k8py.apiserver.watch.watcher_group import WatcherGroup
from tests.support.watch_events import obj, put


def grouped(definition) -> WatchCache:
    return WatchCache(definition, group_factory=WatcherGroup)


def live_watcher(cache: WatchCache, definition, selector: str = "", *, namespace: str = "default") -> tuple[Watcher, list]:
    """A watcher with a sink that records each write (events, frames memo)."""
    params = {"labelSelector": selector} if selector else {}
    w = Watcher(parse_query(definition, namespace, params))
    writes: list = []
    w.sink = lambda events, frames: writes.append((list(events), frames)) or True
    cache.add_watcher(w)
    return w, writes


def apply_and_flush(cache: WatchCache, *events) -> dict:
    touched = []
    for event in events:
        touched.extend(cache.apply(event))
    frames: dict = {}
    for t in dict.fromkeys(touched):
        t.flush(frames)
    return frames


def names(events) -> list[tuple[str, str]]:
    return [(t, orjson.loads(d)["metadata"]["name"]) for t, d in events]


def test_watchers_with_one_selection_are_indexed_and_offered_as_one(configmaps):
    cache = grouped(configmaps)
    (a, wa), (b, wb) = live_watcher(cache, configmaps, "app=web"), live_watcher(cache, configmaps, "app=web")
    c, wc = live_watcher(cache, configmaps, "app=db")
    assert len(cache.watchers.groups) == 2 and cache.watcher_count == 3
    assert len(cache.watchers.by_namespace["default"]) == 2  # two groups, not three watchers
    touched = cache.apply(put(configmaps, obj("x", labels={"app": "web"}), 2))
    assert len(touched) == 1 and isinstance(touched[0], WatcherGroup)
    frames: dict = {}
    touched[0].flush(frames)
    assert names(wa[0][0]) == names(wb[0][0]) == [(ADDED, "x")]
    assert wa[0][0][0] is wb[0][0][0] and wa[0][1] is wb[0][1] is frames  # the same item, one memo
    assert wc == []
    assert sorted(map(id, cache.all_watchers())) == sorted(map(id, (a, b, c)))


def test_selector_transitions_come_out_per_group(configmaps):
    cache = grouped(configmaps)
    web, writes_web = live_watcher(cache, configmaps, "app=web")
    db, writes_db = live_watcher(cache, configmaps, "app=db")
    apply_and_flush(cache, put(configmaps, obj("x", labels={"app": "web"}), 2),
                    put(configmaps, obj("x", labels={"app": "web", "v": "2"}), 3),
                    put(configmaps, obj("x", labels={"app": "db"}), 4))
    assert [names(e) for e, _ in writes_web] == [[(ADDED, "x"), (MODIFIED, "x"), (DELETED, "x")]]
    assert [names(e) for e, _ in writes_db] == [[(ADDED, "x")]]


def test_a_watcher_joining_while_items_are_queued_gets_none_of_them(configmaps):
    cache = grouped(configmaps)
    first, writes_first = live_watcher(cache, configmaps)
    touched = cache.apply(put(configmaps, obj("old"), 2))  # queued in the group, not flushed yet
    late, writes_late = live_watcher(cache, configmaps)  # its start (snapshot at rev 2) covers "old"
    touched += cache.apply(put(configmaps, obj("new"), 3))
    for t in dict.fromkeys(touched):
        t.flush({})
    assert [names(e) for e, _ in writes_first] == [[(ADDED, "old"), (ADDED, "new")]]
    assert [names(e) for e, _ in writes_late] == [[(ADDED, "new")]]


def test_a_member_with_a_backlog_gets_the_items_behind_it(configmaps):
    cache = grouped(configmaps)
    w, writes = live_watcher(cache, configmaps)
    backed_up = True
    w.sink = lambda events, frames: (not backed_up) and (writes.append(list(events)) or True)
    apply_and_flush(cache, put(configmaps, obj("a"), 2))
    assert names(w.pending) == [(ADDED, "a")] and w.wake.is_set()  # the stream's task takes it
    backed_up = False
    apply_and_flush(cache, put(configmaps, obj("b"), 3))
    assert [names(e) for e in writes] == [[(ADDED, "a"), (ADDED, "b")]] and w.pending == []


def test_a_member_past_its_bound_is_terminated_alone(configmaps):
    cache = grouped(configmaps)
    small, _ = live_watcher(cache, configmaps)
    other, writes = live_watcher(cache, configmaps)
    small.sink = lambda events, frames: False  # never drains
    apply_and_flush(cache, put(configmaps, obj("a"), 2))
    small.max_pending_bytes = small.pending_bytes * 2
    apply_and_flush(cache, put(configmaps, obj("b"), 3), put(configmaps, obj("c"), 4))
    assert small.terminated and small.overflowed
    assert not other.terminated and sum(len(e) for e, _ in writes) == 3


def test_a_watcher_from_a_future_revision_skips_what_came_before(configmaps):
    cache = grouped(configmaps)
    w, writes = live_watcher(cache, configmaps)
    w.min_rv = 3
    apply_and_flush(cache, put(configmaps, obj("c2"), 2), put(configmaps, obj("c3"), 3), put(configmaps, obj("c4"), 4))
    assert [names(e) for e, _ in writes] == [[(ADDED, "c4")]]


def test_the_group_goes_with_its_last_member(configmaps):
    cache = grouped(configmaps)
    a, _ = live_watcher(cache, configmaps)
    b, _ = live_watcher(cache, configmaps)
    cache.remove_watcher(a)
    assert cache.watcher_count == 1 and len(cache.watchers.groups) == 1
    cache.remove_watcher(b)
    assert cache.watcher_count == 0 and cache.watchers.groups == {} and "default" not in cache.watchers.by_namespace
    cache.remove_watcher(b)  # removing twice (a stream's finally) is harmless


def test_a_decision_that_raises_fails_the_group(configmaps):
    cache = grouped(configmaps)
    a, _ = live_watcher(cache, configmaps)
    b, _ = live_watcher(cache, configmaps)
    group = next(iter(cache.watchers.groups.values()))

    class Broken:
        namespace = "default"

        def matches(self, o):
            raise ValueError("boom")

    group.query = Broken()
    assert cache.apply(put(configmaps, obj("a"), 2)) == []
    assert a.failure and b.failure and "boom" in a.failure


def test_a_member_is_not_caught_up_while_its_group_holds_items(configmaps):
    """The stream writes a bookmark only when caught up: one at the cache's
    revision must not overtake an event still queued in the group."""
    cache = grouped(configmaps)
    w, _ = live_watcher(cache, configmaps)
    assert w.caught_up
    touched = cache.apply(put(configmaps, obj("a"), 2))
    assert not w.caught_up and w.pending == []
    touched[0].flush({})
    assert w.caught_up
    cache.remove_watcher(w)
    assert w.group is None


def test_interested_watchers_counts_the_members_not_the_groups(pods):
    cache = grouped(pods)
    for _ in range(3):
        live_watcher(cache, pods, namespace="ns1")
    live_watcher(cache, pods, "app=web", namespace="ns1")
    for node in ("n1", "n2"):
        cache.add_watcher(Watcher(parse_query(pods, "", {"fieldSelector": f"spec.nodeName={node}"})))
    everyone, _ = live_watcher(cache, pods, namespace="")
    assert cache.interested_watchers("ns1", "a") == 4 + 2 + 1
    assert cache.interested_watchers("ns2", "a") == 2 + 1
    cache.remove_watcher(everyone)
    cache.remove_watcher(everyone)
    assert cache.interested_watchers("ns2", "a") == 2
