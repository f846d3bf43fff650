"""Per-key locks: one read-modify-write at a time per object in this server.

Optimistic concurrency alone makes writers that race on one object retry
each other: with the group-committing store, every round of N racing
updates has one winner and N-1 losers, and a loser can lose many rounds in
a row. Queueing the updates of one key inside this process turns that into
a line instead of a scramble; the guarded write stays, so several API
servers on one etcd remain correct (they retry as before).

Invariant: a key's entry exists only while someone holds or waits for it,
so the table stays as small as the number of objects being written now.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

__all__ = ["KeyLocks"]


class KeyLocks:
    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
