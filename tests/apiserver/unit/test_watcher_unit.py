"""Watcher alone: selector transitions, the start revision, the bound, and
the hand-off between direct writes (a sink) and the stream's own task."""

from __future__ import annotations

import orjson

from k8py.apiserver.handlers.query import parse_query
from k8py.apiserver.watch.watch_cache import ADDED, DELETED, MODIFIED, WatchCache
from k8py.apiserver.watch.watcher import Selection, Watcher
from tests.support.watch_events import delete, obj, put


def cm(name: str, **labels: str) -> dict:
    return obj(name, labels=labels or None)


def watcher_on(cache: WatchCache, definition, selector: str = "", **kw) -> Watcher:
    query: Selection = parse_query(definition, "default", {"labelSelector": selector} if selector else {})
    w = Watcher(query, **kw)
    cache.add_watcher(w)
    return w


def names(events: list[tuple[str, bytes]]) -> list[tuple[str, str, str]]:
    out = []
    for type_, data in events:
        meta = orjson.loads(data)["metadata"]
        out.append((type_, meta["name"], meta["resourceVersion"]))
    return out


def test_selector_transitions_become_added_modified_and_deleted(configmaps):
    cache = WatchCache(configmaps)
    w = watcher_on(cache, configmaps, "app=web")
    cache.apply(put(configmaps, cm("a", app="web"), 2))  # matches: ADDED
    cache.apply(put(configmaps, cm("a", app="web", v="2"), 3))  # still matches: MODIFIED
    cache.apply(put(configmaps, cm("a", app="db"), 4))  # stops matching: DELETED (old state, this RV)
    cache.apply(put(configmaps, cm("a", app="db", v="3"), 5))  # never matched: nothing
    cache.apply(put(configmaps, cm("a", app="web"), 6))  # matches again: ADDED
    cache.apply(delete(configmaps, cm("a", app="web"), 7))
    events = w.take()
    assert names(events) == [
        (ADDED, "a", "2"),
        (MODIFIED, "a", "3"),
        (DELETED, "a", "4"),
        (ADDED, "a", "6"),
        (DELETED, "a", "7"),
    ]
    # the DELETED-by-transition carries the last state that matched
    assert orjson.loads(events[2][1])["metadata"]["labels"] == {"app": "web", "v": "2"}


def test_events_at_or_below_the_start_revision_are_skipped(configmaps):
    cache = WatchCache(configmaps)
    w = watcher_on(cache, configmaps)
    w.min_rv = 3
    for rev in (2, 3, 4):
        cache.apply(put(configmaps, cm(f"c{rev}"), rev))
    assert [n for _, n, _ in names(w.take())] == ["c4"]


def test_without_a_sink_events_wake_the_stream_task_and_are_not_flushed(configmaps):
    cache = WatchCache(configmaps)
    w = watcher_on(cache, configmaps)
    touched = cache.apply(put(configmaps, cm("a"), 2))
    assert touched == []  # nothing for the cacher to flush: the stream's task takes them
    assert w.wake.is_set()
    assert len(w.take()) == 1 and not w.wake.is_set()


def test_with_a_sink_the_batch_is_flushed_in_one_write(configmaps):
    cache = WatchCache(configmaps)
    w = watcher_on(cache, configmaps)
    writes: list[list[tuple[str, bytes]]] = []
    w.sink = lambda events, frames: writes.append(list(events)) or True
    touched = set(cache.apply(put(configmaps, cm("a"), 2))) | set(cache.apply(put(configmaps, cm("b"), 3)))
    assert touched == {w}
    assert writes == []  # offer never writes; the flush after the batch does
    w.flush()
    assert [[n for _, n, _ in names(batch)] for batch in writes] == [["a", "b"]]
    assert w.pending == [] and not w.wake.is_set()


def test_a_backed_up_sink_leaves_the_events_to_the_stream_task(configmaps):
    cache = WatchCache(configmaps)
    w = watcher_on(cache, configmaps)
    w.sink = lambda events, frames: False  # the client's buffer is over its high-water mark
    cache.apply(put(configmaps, cm("a"), 2))
    w.flush()
    assert w.wake.is_set()
    assert [n for _, n, _ in names(w.take())] == ["a"]


def test_a_watcher_past_its_bound_is_terminated_and_gets_nothing_more(configmaps):
    cache = WatchCache(configmaps)
    w = watcher_on(cache, configmaps)
    cache.apply(put(configmaps, cm("c1"), 1))
    w.max_pending_bytes = int(w.pending_bytes * 3.5)  # the bound is in bytes: room for three such events
    for rev in range(2, 5):
        cache.apply(put(configmaps, cm(f"c{rev}"), rev))
    assert w.terminated and w.overflowed
    assert w.wake.is_set()  # the stream's task notices and ends the watch
    before = len(w.pending)
    assert w.offer(cache.ring[-1]) is False
    assert len(w.pending) == before


def test_watchers_with_equal_selections_queue_the_same_decision(configmaps):
    cache = WatchCache(configmaps)
    a, b = watcher_on(cache, configmaps, "app=web"), watcher_on(cache, configmaps, "app=web")
    other = watcher_on(cache, configmaps, "app=db")
    assert a.selection is b.selection and a.selection is not other.selection
    cache.apply(put(configmaps, cm("x", app="web"), 2))
    cache.apply(put(configmaps, cm("x", app="db"), 3))  # leaves app=web, enters app=db
    pa, pb, po = a.take(), b.take(), other.take()
    assert [t for t, _ in pa] == [ADDED, DELETED] and [t for t, _ in po] == [ADDED]
    # one decision per event for both: the very same queued tuples (so one encoded frame)
    assert all(x is y for x, y in zip(pa, pb, strict=True))


def test_a_flush_hands_every_sink_the_same_frames_memo(configmaps):
    cache = WatchCache(configmaps)
    seen: list[tuple[list, dict]] = []
    watchers = [watcher_on(cache, configmaps) for _ in range(3)]
    for w in watchers:
        w.sink = lambda events, frames: seen.append((list(events), frames)) or True
    cache.apply(put(configmaps, cm("a"), 2))
    frames: dict = {}
    for w in watchers:
        w.flush(frames)
    assert len(seen) == 3 and all(f is frames for _, f in seen)
    assert seen[0][0][0] is seen[1][0][0] is seen[2][0][0]
