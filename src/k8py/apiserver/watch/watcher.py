"""One watch connection's view of its resource's events.

The watch cache calls :meth:`Watcher.offer` for each event that might concern
the watcher (it only visits watchers indexed under the event's namespace or
indexed-field value). ``offer`` applies the watcher's selectors to the new
*and* the previous state of the object, so transitions come out right:

=================  ==================  =========================================
previous matched   new matches         the watcher receives
=================  ==================  =========================================
no                 yes                 ADDED
yes                yes                 MODIFIED
yes                no                  DELETED (previous state, this event's RV)
no                 no                  nothing
=================  ==================  =========================================

Events are queued as ``(type, encoded object)``. Once the stream is live,
``offer`` returns True when it queued something, the watch cache hands the
watchers that did back to the cacher, and the cacher flushes each once after
the store batch (the watcher knows neither of them): everything
queued goes out in one write straight to the connection, with no task switch
per watcher per event. While the initial events are still being written, or
when the connection's buffer is backed up, the stream's own task writes them
instead (and waits for the buffer to drain). The queue is bounded in
*bytes* (:attr:`WatchLimits.max_pending_bytes`; a count of events says
nothing about memory when one object is 1 MB): a watcher that falls that far
behind is terminated (``overflowed``), and its client re-watches from the
last resourceVersion it saw, as with upstream's slow-watcher handling.
``offer`` never awaits.

The queued events hold references to the cache's encoded bytes, shared by
every watcher, so the bound is what the client is owed rather than memory
the watcher holds alone (a converted or Table-printed watch encodes its own
copy only when it writes).

What an event means to a watcher depends only on the event and the
watcher's selection (namespace, selectors, indexed values), so watchers with
equal selections share one decision per event: ``selection`` is one shared
object for all of them (interned), and the watch cache hands every watcher
of one event the same ``decisions`` memo. The decision is a ``(type, bytes)``
tuple that the watchers queue as is, so their queues hold the very same
tuples and the stream can share the encoded frame too (``flush(frames)``,
see ``handlers.watch_stream``). Only ``min_rv`` and the watcher's own state
(terminated, live or not) are looked at per watcher.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Protocol

from k8py.apiserver.watch.watch_cache import ADDED, DELETED, MODIFIED, CacheEvent, CachedObject

__all__ = ["Selection", "SelectionToken", "Sink", "Watcher", "decide", "WatchLimits", "MAX_PENDING_BYTES", "SLOW_CLIENT_TIMEOUT"]


class Selection(Protocol):
    """Which objects a watch is for (upstream's SelectionPredicate);
    :class:`k8py.apiserver.handlers.query.Query` is one."""

    @property
    def namespace(self) -> str:
        """The namespace selected ("" = every namespace, or cluster-scoped)."""

    @property
    def index_value(self) -> str | None:
        """The value the selection pins the resource's indexed field to."""

    @property
    def name_value(self) -> str | None:
        """The object name the selection pins (``metadata.name=X``), if any."""

    @property
    def selection_key(self) -> Hashable | None:
        """Equal for selections that select the same objects; None when unknown
        (the watcher then decides alone)."""

    def matches(self, obj: CachedObject) -> bool:
        """True if ``obj`` is selected."""

MAX_PENDING_BYTES = 64 * 1024 * 1024
SLOW_CLIENT_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class WatchLimits:
    """How far a watch client may fall behind before the server gives up on it."""

    #: bytes queued for one watcher beyond which it is terminated
    max_pending_bytes: int = MAX_PENDING_BYTES
    #: the largest frame the stream's task writes at once (then it waits for the client)
    frame_bytes: int = 1024 * 1024
    #: a client whose connection stays backed up this long is disconnected
    #: (upstream's cacher closes an unresponsive watcher the same way)
    slow_client_timeout: float = SLOW_CLIENT_TIMEOUT
    #: told the resource's plural when a watcher is closed for being too slow
    on_slow_close: Callable[[str], None] | None = None


log = logging.getLogger(__name__)

#: writes queued events to the stream now; False when it cannot (a slow client).
#: The second argument is the frames memo of the flush (see :meth:`Watcher.flush`).
Sink = Callable[[list[tuple[str, bytes]], "dict[Any, bytes] | None"], bool]

_UNDECIDED: Any = object()


class SelectionToken:
    """One per distinct selection: the key of the per-event decisions memo.
    Identity-hashed, so a lookup costs no hashing of selectors."""

    __slots__ = ("key", "__weakref__")

    def __init__(self, key: Hashable) -> None:
        self.key = key


_tokens: "weakref.WeakValueDictionary[Hashable, SelectionToken]" = weakref.WeakValueDictionary()


def selection_token(query: Selection) -> SelectionToken:
    """The token shared by every live watcher whose selection equals ``query``'s."""
    key = getattr(query, "selection_key", None)
    if key is None:
        return SelectionToken(None)  # unknown: a token of its own
    token = _tokens.get(key)
    if token is None:
        token = _tokens[key] = SelectionToken(key)
    return token


def decide(query: Selection, event: CacheEvent) -> tuple[str, bytes] | None:
    """What ``event`` means to a watcher of ``query`` (the table in the module
    docstring): the ``(type, bytes)`` to queue, shared by every watcher that
    decides alike, or None."""
    if event.type == ADDED:
        if query.matches(event.obj):
            return event.as_added()
    elif event.type == MODIFIED:
        now_matches = query.matches(event.obj)
        before = event.prev is not None and query.matches(event.prev)
        if now_matches and before:
            return event.as_modified()
        elif now_matches:
            return event.as_added()
        elif before:
            return event.as_left()
    elif event.type == DELETED:
        if query.matches(event.obj):
            return event.as_deleted()
    return None


class Watcher:
    __slots__ = (
        "query", "namespace", "index_value", "name_value", "selection", "group", "pending", "pending_bytes", "wake", "terminated", "overflowed",
        "max_pending_bytes", "min_rv", "sink", "failure",
    )

    def __init__(self, query: Selection, *, max_pending_bytes: int = MAX_PENDING_BYTES) -> None:
        self.query = query
        self.namespace = query.namespace
        self.index_value = query.index_value
        self.name_value: str | None = getattr(query, "name_value", None)
        #: shared by the watchers with an equal selection (see the module docstring)
        self.selection = selection_token(query)
        #: the group it is a member of (set by the group), whose queued items
        #: are owed to it too until the group flushes
        self.group: Any = None
        self.pending: list[tuple[str, bytes]] = []
        #: the bytes of the objects in ``pending``
        self.pending_bytes = 0
        self.wake = asyncio.Event()
        self.terminated = False
        self.overflowed = False
        self.max_pending_bytes = max_pending_bytes
        #: events at or below this revision are not for this watcher (a watch
        #: that started from a resourceVersion the cache had not reached)
        self.min_rv = 0
        #: set by the stream once its initial events are out: from then on the
        #: cacher writes each batch's events straight to the connection
        self.sink: Sink | None = None
        #: why this watcher was failed (its stream ends with an ERROR event saying so)
        self.failure: str | None = None

    def offer(self, event: CacheEvent, decisions: dict[SelectionToken, Any] | None = None) -> bool:
        """Queue what ``event`` means to this watcher; True if the queue now
        wants a :meth:`flush` after the batch (the stream is live).
        ``decisions`` is the event's memo shared by the watchers it is
        offered to (None: decide alone)."""
        if self.terminated or event.rv <= self.min_rv:
            return False
        if decisions is None:
            decision = decide(self.query, event)
        else:
            decision = decisions.get(self.selection, _UNDECIDED)
            if decision is _UNDECIDED:
                decision = decisions[self.selection] = decide(self.query, event)
        if decision is None:
            return False
        return self._push(decision)

    def decide(self, event: CacheEvent) -> tuple[str, bytes] | None:
        """What ``event`` means to this watcher (see :func:`decide`)."""
        return decide(self.query, event)

    def _push(self, item: tuple[str, bytes]) -> bool:
        self.pending.append(item)
        self.pending_bytes += len(item[1])
        if self.pending_bytes > self.max_pending_bytes:
            self.overflowed = True
            self.terminate()
            return False
        if self.sink is not None:
            return True
        self.wake.set()
        return False

    def deliver(self, items: list[tuple[str, bytes]], rvs: list[int], nbytes: int,
                frames: dict[Any, bytes] | None = None) -> None:
        """Take a group's queued decisions (:mod:`.watcher_group`; shared with
        the other members: never kept as is) and write them now when the
        stream is live and nothing older is queued, else queue them behind
        the backlog. Items at or below ``min_rv`` are skipped."""
        if self.terminated:
            return
        if rvs[0] <= self.min_rv:
            keep = [item for item, rv in zip(items, rvs) if rv > self.min_rv]
            if not keep:
                return
            items, nbytes = keep, sum(len(d) for _, d in keep)
        if not self.pending and self.sink is not None and nbytes <= self.max_pending_bytes:
            self.pending_bytes = nbytes  # what the sink sees while it decides
            try:
                written = self.sink(items, frames)
            except Exception as err:  # encoding for this watcher failed: it alone ends
                log.exception("writing watch events failed; closing the watch")
                self.fail(f"unable to encode watch events: {err!r}")
                return
            if written:
                self.pending_bytes = 0
                return
            self.pending = list(items)  # a backed-up client: the stream's task writes them
            self.wake.set()
            return
        self.pending.extend(items)
        self.pending_bytes += nbytes
        if self.pending_bytes > self.max_pending_bytes:
            self.overflowed = True
            self.terminate()
        elif self.sink is not None:
            self.flush(frames)
        else:
            self.wake.set()

    def flush(self, frames: dict[Any, bytes] | None = None) -> None:
        """Write the queued events straight to the stream (the cacher calls
        this once per store batch), or hand them to the stream's task when
        the connection is backed up. ``frames`` is shared by the watchers
        flushed together: the sink keeps each encoded frame there, so
        watchers owed the same events write the same bytes, encoded once."""
        if not self.pending or self.terminated or self.sink is None:
            return
        try:
            written = self.sink(self.pending, frames)
        except Exception as err:  # encoding for this watcher failed: it alone ends
            log.exception("writing watch events failed; closing the watch")
            self.fail(f"unable to encode watch events: {err!r}")
            return
        if written:
            self.pending = []
            self.pending_bytes = 0
        else:
            self.wake.set()

    def take(self, max_bytes: int = 0) -> list[tuple[str, bytes]]:
        """The queued events, oldest first: all of them, or (``max_bytes``) a
        prefix of at most that many bytes (at least one event)."""
        if not max_bytes or self.pending_bytes <= max_bytes:
            out, self.pending = self.pending, []
            self.pending_bytes = 0
            self.wake.clear()
            return out
        size = 0
        count = 0
        for _, data in self.pending:
            size += len(data)
            count += 1
            if size >= max_bytes:
                break
        out = self.pending[:count]
        del self.pending[:count]
        self.pending_bytes -= size
        return out

    @property
    def caught_up(self) -> bool:
        """Nothing is owed to the client: every event up to the cache's
        revision is written or was not for this watcher (so a bookmark at
        that revision cannot overtake an event still to come)."""
        return not self.pending and (self.group is None or not self.group.items)

    def terminate(self) -> None:
        self.terminated = True
        self.wake.set()

    def fail(self, reason: str) -> None:
        """End this watcher with an ERROR event carrying ``reason`` (nothing queued is sent)."""
        if self.failure is None:
            self.failure = reason
        self.pending = []
        self.pending_bytes = 0
        self.terminate()
