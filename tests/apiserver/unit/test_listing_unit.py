"""list_objects over a real Cacher and the in-memory store: where each kind of
list is served from (the cache or the store at a revision), pagination, and
upstream's errors for bad, too old and too new resource versions."""

from __future__ import annotations

import orjson
import pytest

from k8py.api.errors import BadRequest, Expired, Invalid, Timeout
from k8py.apiserver.handlers import listing
from k8py.apiserver.handlers.listing import list_objects
from k8py.apiserver.handlers.query import parse_query
from tests.support.watch_events import obj

TIMEOUT = 10.0


@pytest.fixture(autouse=True)
def short_waits(monkeypatch):
    # a list that waits for a revision the cache never reaches gives up after this
    monkeypatch.setattr(listing, "CONSISTENT_READ_TIMEOUT", 0.2)
    monkeypatch.setattr(listing, "CACHE_CATCH_UP_TIMEOUT", 0.2)


async def seed(memory, configmaps, count: int, ns: str = "default") -> list[int]:
    revs = []
    for i in range(count):
        o = obj(f"cm-{i:02d}", ns, labels={"parity": "even" if i % 2 == 0 else "odd"})
        revs.append((await memory.create(configmaps.key(ns, o["metadata"]["name"]), orjson.dumps(o))).mod_revision)
    return revs


async def run(cacher, memory, definition, params: dict[str, str], ns: str = "default"):
    return await list_objects(cacher, cacher.cache_for(definition), memory, parse_query(definition, ns, params), params)


def item_names(page) -> list[str]:
    return [orjson.loads(i)["metadata"]["name"] for i in page.items]


async def test_a_consistent_list_is_served_from_the_cache_once_it_has_caught_up(cacher, memory, configmaps):
    revs = await seed(memory, configmaps, 3)
    reads_before = len(memory.lists)
    page = await run(cacher, memory, configmaps, {})
    assert item_names(page) == ["cm-00", "cm-01", "cm-02"]
    assert page.resource_version == revs[-1]
    assert len(memory.lists) == reads_before  # no store read


async def test_a_consistent_list_reads_the_store_when_the_cache_lags(cacher, memory, configmaps):
    await seed(memory, configmaps, 2)
    assert await cacher.wait_consistent(timeout=TIMEOUT)
    memory.pause_watches()
    current = (await memory.create(configmaps.key("default", "new"), orjson.dumps(obj("new")))).mod_revision
    page = await run(cacher, memory, configmaps, {})
    assert item_names(page) == ["cm-00", "cm-01", "new"]
    assert page.resource_version == current
    assert memory.lists[-1] == current  # read at the store's revision
    memory.resume_watches()


async def test_pages_follow_continue_tokens_at_the_first_pages_revision(cacher, memory, configmaps):
    await seed(memory, configmaps, 5)
    first = await run(cacher, memory, configmaps, {"limit": "2"})
    assert item_names(first) == ["cm-00", "cm-01"]
    assert first.remaining == 3 and first.continue_token
    await memory.create(configmaps.key("default", "cm-00a"), orjson.dumps(obj("cm-00a")))  # after page 1
    assert await cacher.wait_consistent(timeout=TIMEOUT)
    second = await run(cacher, memory, configmaps, {"limit": "2", "continue": first.continue_token})
    # the cache moved on: the page comes from the store at the first page's revision
    assert item_names(second) == ["cm-02", "cm-03"]
    assert second.resource_version == first.resource_version
    last = await run(cacher, memory, configmaps, {"limit": "2", "continue": second.continue_token})
    assert item_names(last) == ["cm-04"] and not last.continue_token


async def test_a_label_selector_filters_and_hides_the_remaining_count(cacher, memory, configmaps):
    await seed(memory, configmaps, 5)
    page = await run(cacher, memory, configmaps, {"labelSelector": "parity=even", "limit": "2"})
    assert item_names(page) == ["cm-00", "cm-02"]
    assert page.remaining is None  # upstream does not count what a selector would keep


async def test_resource_version_zero_serves_whatever_the_cache_has(cacher, memory, configmaps):
    await seed(memory, configmaps, 1)
    assert await cacher.wait_consistent(timeout=TIMEOUT)
    memory.pause_watches()
    await memory.create(configmaps.key("default", "unseen"), orjson.dumps(obj("unseen")))
    page = await run(cacher, memory, configmaps, {"resourceVersion": "0", "limit": "1"})
    assert item_names(page) == ["cm-00"]  # limit ignored, no wait, no store read
    memory.resume_watches()


async def test_an_exact_resource_version_is_read_from_the_store_at_it(cacher, memory, configmaps):
    revs = await seed(memory, configmaps, 3)
    assert await cacher.wait_consistent(timeout=TIMEOUT)
    page = await run(cacher, memory, configmaps, {"resourceVersion": str(revs[0]), "resourceVersionMatch": "Exact"})
    assert item_names(page) == ["cm-00"]
    assert page.resource_version == revs[0]
    assert memory.lists[-1] == revs[0]


async def test_a_compacted_resource_version_is_410_expired(cacher, memory, configmaps):
    revs = await seed(memory, configmaps, 3)
    await memory.compact(revs[-1])
    with pytest.raises(Expired) as info:
        await run(cacher, memory, configmaps, {"resourceVersion": str(revs[0]), "resourceVersionMatch": "Exact"})
    assert info.value.message == "The resourceVersion for the provided list is too old."


async def test_a_resource_version_the_cache_never_reaches_is_a_timeout(cacher, memory, configmaps):
    current = await memory.current_revision()
    with pytest.raises(Timeout) as info:
        await run(cacher, memory, configmaps, {"resourceVersion": str(current + 100)})
    assert info.value.message == f"Too large resource version: {current + 100}, current: {current}"


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"resourceVersion": "x"}, BadRequest),
        ({"limit": "many"}, BadRequest),
        ({"continue": "not-a-token"}, BadRequest),
        ({"resourceVersionMatch": "Exact"}, Invalid),
        ({"resourceVersion": "1", "resourceVersionMatch": "Newest"}, Invalid),
        ({"resourceVersion": "0", "resourceVersionMatch": "Exact"}, Invalid),
        ({"resourceVersion": "5", "continue": "abc"}, Invalid),
    ],
)
async def test_bad_list_options_are_refused(cacher, memory, configmaps, params, error):
    with pytest.raises(error):
        await run(cacher, memory, configmaps, params)
