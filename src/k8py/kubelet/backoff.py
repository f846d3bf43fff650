"""Per-container restart back-off (upstream ``flowcontrol.Backoff`` as the kubelet uses it).

``next(key, now)`` is called when a restart happens: the first time the
delay is ``base``, then it doubles up to ``max``; an entry untouched for
``2 * max`` (or, for crash loops, a container that ran longer than
``reset``) starts over. ``in_backoff_since(key, event_time, now)`` says
whether a restart must still wait because less than the current delay has
passed since ``event_time`` (the container's finish time). Time is passed
in, so tests drive it without sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass
class _Entry:
    delay: float
    last_update: float


class Backoff:
    def __init__(self, base: float = 10.0, maximum: float = 300.0) -> None:
        self.base = base
        self.max = maximum
        self._entries: dict[str, _Entry] = {}

    def get(self, key: str) -> float:
        e = self._entries.get(key)
        return e.delay if e else 0.0

    def next(self, key: str, now: float) -> float:
        e = self._entries.get(key)
        if e is None or now - e.last_update > 2 * self.max:
            e = self._entries[key] = _Entry(self.base, now)
        else:
            e.delay = min(e.delay * 2, self.max)
            e.last_update = now
        return e.delay

    def in_backoff_since(self, key: str, event_time: float, now: float) -> bool:
        e = self._entries.get(key)
        if e is None or now - e.last_update > 2 * self.max:
            return False
        return now - event_time < e.delay

    def remaining(self, key: str, event_time: float, now: float) -> float:
        e = self._entries.get(key)
        return max(0.0, e.delay - (now - event_time)) if e else 0.0

    def reset(self, key: str) -> None:
        self._entries.pop(key, None)

    def forget_prefix(self, prefix: str) -> None:
        for k in [k for k in self._entries if k.startswith(prefix)]:
            del self._entries[k]
