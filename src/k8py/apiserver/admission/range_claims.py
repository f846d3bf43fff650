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
- the repair loop (:mod:`.service_repair`) can free claims whose owner no
  longer exists (an API server that died between claiming and storing the
  Service) while leaving recent claims alone, since their owner may still be
  on its way into the store, and re-mark or take over the items Services hold.

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

__all__ = ["RangeClaims", "Claim", "Owner"]

log = logging.getLogger(__name__)

Owner = dict[str, str]


class Claim:
    """One stored claim: its owner and when it was made, at a store revision."""

    __slots__ = ("uid", "claimed_at", "revision")

    def __init__(self, value: dict[str, Any], revision: int) -> None:
        self.uid: str = value.get("uid", "")
        self.claimed_at = float(value.get("claimedAt") or 0)
        self.revision = revision


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

    async def claims(self) -> dict[str, "Claim"]:
        """Every claim as stored now, by item."""
        result = await self.storage.list(self.prefix)
        out: dict[str, Claim] = {}
        for kv in result.kvs:
            value: dict[str, Any] = orjson.loads(kv.value)
            out[kv.key[len(self.prefix):]] = Claim(value, kv.mod_revision)
        return out

    async def mark(self, item: str, owner: Owner) -> "Claim | None":
        """Create the claim of ``item`` for ``owner`` if there is none (the repair
        loop's re-marking): None when it was made now, else the claim found."""
        try:
            await self.storage.create(self._key(item), orjson.dumps({**owner, "claimedAt": self.clock()}))
            return None
        except KeyExistsError:
            kv = await self.storage.get(self._key(item))
            if kv is None:  # released in between: try once more
                return await self.mark(item, owner)
            return Claim(orjson.loads(kv.value), kv.mod_revision)

    async def take_over(self, item: str, claim: "Claim", owner: Owner) -> bool:
        """Give ``item`` to ``owner`` if it is still held as ``claim`` (a claim whose
        owner is gone while another Service uses the item)."""
        value = orjson.dumps({**owner, "claimedAt": self.clock()})
        try:
            await self.storage.update(self._key(item), value, expected_revision=claim.revision)
            return True
        except (KeyNotFoundError, RevisionConflictError):
            return False

    async def free(self, item: str, claim: "Claim") -> bool:
        """Delete the claim of ``item`` if it is still ``claim`` (a leak)."""
        try:
            await self.storage.delete(self._key(item), expected_revision=claim.revision)
            return True
        except (KeyNotFoundError, RevisionConflictError):
            return False
