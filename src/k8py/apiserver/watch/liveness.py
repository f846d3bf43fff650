"""One timer that notices every watch client that has gone away.

A watch with nothing to send would never learn that its client hung up
(aiohttp does not cancel a handler on disconnect): each stream used to wake
every 5 s to look at its connection, so 1,000 idle watches cost 200 task
wake-ups a second. :class:`LivenessSweep` keeps one timer per API server
instead: every ``interval`` seconds it asks each registered stream whether
its connection is gone and wakes only the watchers of those (their stream
then ends). The streams' own timers are left with the bookmark and the
``timeoutSeconds`` deadline.

Invariants: the timer runs only while something is registered; a gone
client is seen within ``interval`` (plus the loop's latency), as before;
the sweep never awaits and a check that raises counts as gone.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from k8py.apiserver.watch.clock import Timer, WatchClock

__all__ = ["LivenessSweep"]

log = logging.getLogger(__name__)


class LivenessSweep:
    def __init__(self, clock: WatchClock, *, interval: float = 5.0) -> None:
        self.clock = clock
        self.interval = interval
        #: watcher -> "is its client gone?", in registration order
        self._checks: dict[Any, Callable[[], bool]] = {}
        self._timer: Timer | None = None
        #: sweeps run (for tests)
        self.sweeps = 0

    def __len__(self) -> int:
        return len(self._checks)

    def add(self, watcher: Any, gone: Callable[[], bool]) -> None:
        """Wake ``watcher`` (``watcher.wake.set()``) once ``gone()`` says its client has left."""
        self._checks[watcher] = gone
        if self._timer is None:
            self._timer = self.clock.call_at(self.clock.now() + self.interval, self._sweep)

    def discard(self, watcher: Any) -> None:
        self._checks.pop(watcher, None)
        if not self._checks and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _sweep(self) -> None:
        self._timer = None
        self.sweeps += 1
        for watcher, gone in list(self._checks.items()):
            try:
                left = gone()
            except Exception:
                log.exception("checking a watch client failed; ending its watch")
                left = True
            if left:
                watcher.wake.set()
        if self._checks:
            self._timer = self.clock.call_at(self.clock.now() + self.interval, self._sweep)
