"""Claims on a range of addresses or ports, kept in the store: one key per
item taken (upstream's newer allocator keeps one IPAddress object per
address; its older one a bitmap). Used for Service cluster IPs
(``/registry/ranges/serviceips/<ip>``) and node ports
(``/registry/ranges/servicenodeports/<port>``).

Why one key per item: the store's ``create`` is atomic across every API
server on the same store, so two concurrent claims of one item cannot both
succeed — no lock, no read-modify-write of a shared bitmap, no hot key — and
a restart loses nothing. Each claim records its owner (namespace, name, uid)
and when it was made, so:

- a release deletes the key only if it still belongs to that owner (guarded
  on the revision read), which makes releases idempotent and safe when
  several API servers see the same deletion;
- :meth:`RangeClaims.repair` can free claims whose owner no longer exists
  (an API server that died between claiming and storing the Service) while
  leaving recent claims alone, since their owner may still be on its way
  into the store.

These keys live under ``/registry/ranges/``, which no served resource uses,
so the watch cache skips them.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Callable, Iterable, Sequence

import orjson

from k8py.storage import Storage
from k8py.storage.interface import KeyExistsError, KeyNotFoundError, RevisionConflictError

__all__ = ["RangeClaims", "Owner"]

log = logging.getLogger(__name__)

Owner = dict[str, str]


class RangeClaims:
    def __init__(self, storage: Storage, prefix: str, *, clock: Callable[[], float] = time.time) -> None:
        self.storage = storage
        self.prefix = prefix.rstrip("/") + "/"
        self.clock = clock
        self._rng = random.Random()

    def _key(self, item: str) -> str:
        return self.prefix + item

    async def claim(self, item: str, owner: Owner) -> bool:
        """Take ``item`` for ``owner``; False if someone else holds it."""
        value = orjson.dumps({**owner, "claimedAt": self.clock()})
        try:
            await self.storage.create(self._key(item), value)
            return True
        except KeyExistsError:
            kv = await self.storage.get(self._key(item))
            return kv is not None and orjson.loads(kv.value).get("uid") == owner.get("uid")

    async def claim_any(self, candidates: Sequence[str], owner: Owner, *, skip: Iterable[str] = (),
                        random_tries: int = 32) -> str | None:
        """A free item of ``candidates`` (random probes first, then a scan from a
        random start); ``skip`` are items known to be taken (from a cache)."""
        taken = set(skip)
        n = len(candidates)
        if n == 0:
            return None
        for _ in range(min(random_tries, n)):
            item = candidates[self._rng.randrange(n)]
            if item not in taken:
                if await self.claim(item, owner):
                    return item
                taken.add(item)
        start = self._rng.randrange(n)
        for i in range(n):
            item = candidates[(start + i) % n]
            if item not in taken and await self.claim(item, owner):
                return item
        return None

    async def release(self, item: str, uid: str) -> None:
        key = self._key(item)
        for _ in range(3):
            kv = await self.storage.get(key)
            if kv is None or orjson.loads(kv.value).get("uid") != uid:
                return
            try:
                await self.storage.delete(key, expected_revision=kv.mod_revision)
                return
            except KeyNotFoundError:
                return
            except RevisionConflictError:
                continue

    async def repair(self, live_uids: set[str], *, grace: float = 60.0) -> int:
        """Free claims whose owner is not in ``live_uids`` and older than ``grace`` s."""
        freed = 0
        result = await self.storage.list(self.prefix)
        now = self.clock()
        for kv in result.kvs:
            claim: dict[str, Any] = orjson.loads(kv.value)
            if claim.get("uid") in live_uids or now - float(claim.get("claimedAt") or 0) < grace:
                continue
            try:
                await self.storage.delete(kv.key, expected_revision=kv.mod_revision)
                freed += 1
            except (KeyNotFoundError, RevisionConflictError):
                pass
        if freed:
            log.info("freed claims whose owner is gone", extra={"prefix": self.prefix, "count": freed})
        return freed

    async def held(self) -> dict[str, str]:
        """item -> owner uid, as stored now."""
        result = await self.storage.list(self.prefix)
        return {kv.key[len(self.prefix):]: orjson.loads(kv.value).get("uid", "") for kv in result.kvs}
