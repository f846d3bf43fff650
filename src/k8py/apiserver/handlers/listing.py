"""List semantics: resourceVersion, resourceVersionMatch, limit/continue.

Lists are served from the watch cache (pre-encoded objects spliced into the
response), with upstream's resourceVersion semantics:

- unset: a consistent read — wait until the cache has caught up with the
  store's current revision (asking the store for a progress notification,
  ``Cacher.wait_for_store_revision``), then serve the cache (or, if that
  takes longer than ``CACHE_CATCH_UP_TIMEOUT``, read the store at that
  revision);
- ``"0"``: any state — serve the cache as it is (``limit`` is ignored, as
  upstream's cache does);
- ``N`` with NotOlderThan (the default): wait (≤ 3 s) until the cache is at
  N or later, else 504 "Too large resource version";
- ``N`` with Exact: the state at exactly N — the cache if it is at N, else the
  store at revision N (410 Expired if compacted).

Pagination: a page is cut at ``limit`` matching objects, sorted by key; the
``continue`` token carries the revision of the first page and the last key
served. A later page is served from the cache when the cache is still at that
revision, else from the store at that revision (410 once it is compacted).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Mapping

import orjson

from k8py.api.errors import BadRequest, Cause, Expired, Invalid, Timeout
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.handlers.query import Query
from k8py.apiserver.watch.watch_cache import WatchCache, build_cached_object
from k8py.storage import CompactedError, FutureRevisionError, Storage

__all__ = ["ListPage", "list_objects", "parse_rv", "too_large_rv", "CONSISTENT_READ_TIMEOUT"]

CONSISTENT_READ_TIMEOUT = 3.0
#: how long a consistent list waits for the cache before reading the store
CACHE_CATCH_UP_TIMEOUT = 0.25

_TOO_OLD_LIST = "The resourceVersion for the provided list is too old."  # upstream's etcd3 wording
_TOO_OLD_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)


@dataclass(slots=True)
class ListPage:
    items: list[bytes]  # encoded objects, resourceVersion stamped
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


def parse_rv(value: str, what: str = "resourceVersion") -> int:
    try:
        rv = int(value)
    except ValueError:
        raise BadRequest(f"invalid {what}: {value}") from None
    if rv < 0:
        raise BadRequest(f"invalid {what}: {value}")
    return rv


def too_large_rv(requested: int, current: int) -> Timeout:
    return Timeout(
        f"Too large resource version: {requested}, current: {current}",
        causes=[Cause("ResourceVersionTooLarge", "Too large resource version")],
        retry_after_seconds=1,
    )


def _invalid_options(field: str, message: str) -> Invalid:
    return Invalid.for_object("ListOptions", "", [Cause("FieldValueForbidden", message, field)], "meta.k8s.io")


def _encode_continue(rv: int, start: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(padded))
        return int(data["rv"]), str(data["start"])
    except Exception:
        raise BadRequest(f"continue key is not valid: {token}") from None


async def list_objects(
    cacher: Cacher,
    cache: WatchCache,
    storage: Storage,
    query: Query,
    params: Mapping[str, str],
) -> ListPage:
    rv_param = params.get("resourceVersion", "")
    match = params.get("resourceVersionMatch", "")
    limit_param = params.get("limit", "")
    token = params.get("continue", "")
    limit = 0
    if limit_param:
        try:
            limit = max(int(limit_param), 0)
        except ValueError:
            raise BadRequest(f"invalid limit: {limit_param}") from None
    if match and not rv_param:
        raise _invalid_options("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")
    if match and match not in ("NotOlderThan", "Exact"):
        raise _invalid_options("resourceVersionMatch", f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"')
    if token:
        if rv_param and rv_param != "0":
            raise _invalid_options("resourceVersion", "Forbidden: specifying resource version is not allowed when using continue")
        token_rv, start = _decode_continue(token)
        return await _page_at(cacher, cache, storage, query, token_rv, start, limit)

    if rv_param == "0" and match != "Exact":
        return _page_from_cache(cache, query, "", 0)  # any state; limit ignored
    if not rv_param:
        # a consistent read: the cache, once it has reached the store's current
        # revision (on etcd the newest revision may belong to keys outside our
        # prefix: the cacher asks the store for a progress notification); if
        # it does not get there quickly, read the store itself at that
        # revision, as upstream does when etcd cannot answer progress requests
        current = await storage.current_revision()
        if await cacher.wait_for_store_revision(current, timeout=CACHE_CATCH_UP_TIMEOUT):
            return _page_from_cache(cache, query, "", limit)
        return await _page_at(cacher, cache, storage, query, current, "", limit, wait=False)
    rv = parse_rv(rv_param)
    if match == "Exact":
        if rv == 0:
            raise _invalid_options("resourceVersionMatch", 'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        return await _page_at(cacher, cache, storage, query, rv, "", limit)
    if not await cacher.wait_for_revision(rv, timeout=CONSISTENT_READ_TIMEOUT):
        raise too_large_rv(rv, cacher.revision)
    return _page_from_cache(cache, query, "", limit)


def _sorted_matches(cache: WatchCache, query: Query) -> list:
    objs = [o for o in cache.candidates(query.namespace, query.index_value, query.name_value) if query.matches(o)]
    objs.sort(key=lambda o: o.key)
    return objs


def _page_from_cache(cache: WatchCache, query: Query, start: str, limit: int) -> ListPage:
    revision = cache.revision
    objs = _sorted_matches(cache, query)
    if start:
        lo, hi = 0, len(objs)
        while lo < hi:  # first key > start
            mid = (lo + hi) // 2
            if objs[mid].key <= start:
                lo = mid + 1
            else:
                hi = mid
        objs = objs[lo:]
    if limit and len(objs) > limit:
        page = objs[:limit]
        remaining = len(objs) - limit
        return ListPage(
            [o.data for o in page],
            revision,
            _encode_continue(revision, page[-1].key),
            remaining if query.selects_everything else None,
        )
    return ListPage([o.data for o in objs], revision)


async def _page_at(
    cacher: Cacher,
    cache: WatchCache,
    storage: Storage,
    query: Query,
    rv: int,
    start: str,
    limit: int,
    *,
    wait: bool = True,
) -> ListPage:
    """A page of the state at exactly ``rv``."""
    if cache.revision == rv:
        return _page_from_cache(cache, query, start, limit)
    if wait and rv > cacher.revision and not await cacher.wait_for_revision(rv, timeout=CONSISTENT_READ_TIMEOUT):
        raise too_large_rv(rv, cacher.revision)
    definition = cache.definition
    prefix = definition.namespace_prefix(query.namespace)
    items: list[bytes] = []
    last_key = start
    after = start if start.startswith(prefix) else ""
    while True:
        try:
            result = await storage.list(prefix, revision=rv, limit=max(limit, 100) if limit else 0, start_after=after)
        except CompactedError:
            raise Expired(_TOO_OLD_CONTINUE if start else _TOO_OLD_LIST) from None
        except FutureRevisionError:
            raise too_large_rv(rv, cacher.revision) from None
        for kv in result.kvs:
            after = kv.key
            obj = build_cached_object(definition, kv.key, kv.value, kv.mod_revision)
            if not query.matches(obj):
                continue
            items.append(obj.data)
            last_key = kv.key
            if limit and len(items) == limit:
                more = result.more or kv is not result.kvs[-1]
                if more:
                    return ListPage(items, rv, _encode_continue(rv, last_key))
                return ListPage(items, rv)
        if not result.more:
            return ListPage(items, rv)
