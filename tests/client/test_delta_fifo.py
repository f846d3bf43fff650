"""DeltaFIFO: compression, re-list (replace) semantics, tombstones, sync state."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from k8py.client.clock import settle
from k8py.client.delta_fifo import Delta, DeltaFIFO, Deltas, DeltaType, FIFOClosedError, ReflectorStore, Requeue
from k8py.client.indexer import Indexer
from k8py.client.keys import DeletedFinalStateUnknown

A, U, D, R, S = DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED, DeltaType.REPLACED, DeltaType.SYNC


def obj(name: str, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def tomb(name: str, last: Any = None) -> DeletedFinalStateUnknown:
    return DeletedFinalStateUnknown(f"ns/{name}", last)


def shape(deltas: Deltas) -> list[tuple[DeltaType, Any]]:
    """(type, rv) per delta; a tombstone shows as ("tomb", rv of its object or None)."""
    out: list[tuple[DeltaType, Any]] = []
    for d in deltas:
        o = d.object
        if isinstance(o, DeletedFinalStateUnknown):
            out.append((d.type, ("tomb", o.obj["metadata"]["resourceVersion"] if o.obj else None)))
        else:
            out.append((d.type, o["metadata"]["resourceVersion"]))
    return out


async def pop_all(fifo: DeltaFIFO) -> dict[str, list[tuple[DeltaType, Any]]]:
    popped: dict[str, list[tuple[DeltaType, Any]]] = {}
    while len(fifo):
        deltas = await fifo.pop(lambda d, initial: None)
        popped[fifo.key_of(deltas)] = shape(deltas)
    return popped


def apply(fifo: DeltaFIFO, steps: list[tuple[str, Any]]) -> None:
    for op, arg in steps:
        if op == "replace":
            fifo.replace(arg, "99")
        else:
            getattr(fifo, op)(arg)


COMPRESSION_CASES = [
    pytest.param([("add", obj("a", "1")), ("update", obj("a", "2"))], [(A, "1"), (U, "2")], id="add-update-accumulate"),
    pytest.param(
        [("add", obj("a", "1")), ("delete", obj("a", "2")), ("delete", obj("a", "3"))],
        [(A, "1"), (D, "2")],
        id="consecutive-deletes-keep-the-first-real-state",
    ),
    pytest.param(
        [("add", obj("a", "1")), ("delete", tomb("a", obj("a", "1"))), ("delete", obj("a", "5"))],
        [(A, "1"), (D, "5")],
        id="real-delete-replaces-tombstone",
    ),
    pytest.param(
        [("add", obj("a", "1")), ("delete", obj("a", "5")), ("delete", tomb("a", obj("a", "1")))],
        [(A, "1"), (D, "5")],
        id="tombstone-after-real-delete-collapses",
    ),
    pytest.param(
        [("add", obj("a", "1")), ("delete", obj("a", "2")), ("add", obj("a", "3")), ("delete", obj("a", "4"))],
        [(A, "1"), (D, "2"), (A, "3"), (D, "4")],
        id="non-consecutive-deletes-kept",
    ),
    pytest.param([("update", obj("a", "1")), ("update", obj("a", "1"))], [(U, "1"), (U, "1")], id="updates-never-deduped"),
]


@pytest.mark.parametrize(("steps", "expected"), COMPRESSION_CASES)
async def test_deltas_of_one_key_compress(steps: list[tuple[str, Any]], expected: list[tuple[DeltaType, Any]]) -> None:
    fifo = DeltaFIFO()
    apply(fifo, steps)
    assert fifo.list_keys() == ["ns/a"]
    assert await pop_all(fifo) == {"ns/a": expected}


def test_delete_of_an_unknown_key_is_ignored() -> None:
    known = Indexer()
    for fifo in (DeltaFIFO(), DeltaFIFO(known_objects=known)):
        fifo.delete(obj("ghost"))
        assert fifo.list_keys() == []


async def test_delete_of_a_key_only_the_cache_knows_is_queued() -> None:
    known = Indexer()
    known.add(obj("a", "1"))
    fifo = DeltaFIFO(known_objects=known)
    fifo.delete(obj("a", "2"))
    assert await pop_all(fifo) == {"ns/a": [(D, "2")]}


# (known objects in the indexer, steps before the re-list, listed objects, emit_replaced, expected pops)
REPLACE_CASES = [
    pytest.param(
        [],
        [],
        [obj("a", "1"), obj("b", "1")],
        True,
        {"ns/a": [(R, "1")], "ns/b": [(R, "1")]},
        id="listed-objects-are-replaced",
    ),
    pytest.param([], [], [obj("a", "1")], False, {"ns/a": [(S, "1")]}, id="sync-type-when-replaced-disabled"),
    pytest.param(
        [obj("a", "1"), obj("gone", "3")],
        [],
        [obj("a", "2")],
        True,
        {"ns/a": [(R, "2")], "ns/gone": [(D, ("tomb", "3"))]},
        id="known-but-unlisted-gets-tombstone-with-cached-state",
    ),
    pytest.param(
        [],
        [("add", obj("q", "4"))],
        [obj("a", "1")],
        True,
        {"ns/q": [(A, "4"), (D, ("tomb", "4"))], "ns/a": [(R, "1")]},
        id="queued-but-unlisted-gets-tombstone-with-newest-state",
    ),
    pytest.param(
        [obj("q", "1")],
        [("update", obj("q", "6"))],
        [],
        True,
        {"ns/q": [(U, "6"), (D, ("tomb", "6"))]},
        id="queued-and-known-gets-one-tombstone-from-the-queue",
    ),
    pytest.param(
        [obj("q", "1")],
        [("delete", obj("q", "2"))],
        [],
        True,
        {"ns/q": [(D, "2")]},
        id="tombstone-collapses-into-queued-delete",
    ),
    pytest.param(
        [obj("a", "1")],
        [],
        [],
        True,
        {"ns/a": [(D, ("tomb", "1"))]},
        id="empty-list-deletes-everything-known",
    ),
]


@pytest.mark.parametrize(("known", "before", "listed", "emit_replaced", "expected"), REPLACE_CASES)
async def test_replace(
    known: list[dict[str, Any]],
    before: list[tuple[str, Any]],
    listed: list[dict[str, Any]],
    emit_replaced: bool,
    expected: dict[str, list[tuple[DeltaType, Any]]],
) -> None:
    indexer = Indexer()
    indexer.replace(known, "1")
    fifo = DeltaFIFO(known_objects=indexer, emit_delta_type_replaced=emit_replaced)
    apply(fifo, before)
    fifo.replace(listed, "99")
    assert await pop_all(fifo) == expected


async def test_replace_twice_keeps_one_tombstone_with_the_real_object() -> None:
    indexer = Indexer()
    indexer.add(obj("gone", "3"))
    fifo = DeltaFIFO(known_objects=indexer)
    fifo.replace([], "5")
    fifo.replace([], "6")
    assert await pop_all(fifo) == {"ns/gone": [(D, ("tomb", "3"))]}


async def test_has_synced_after_the_initial_list_is_popped() -> None:
    indexer = Indexer()
    indexer.add(obj("stale"))
    fifo = DeltaFIFO(known_objects=indexer)
    assert not fifo.has_synced()
    fifo.replace([obj("a"), obj("b")], "10")
    fifo.update(obj("a", "2"))  # does not extend the initial population
    flags: list[bool] = []
    for _ in range(2):
        await fifo.pop(lambda d, initial: flags.append(initial))
        assert not fifo.has_synced()
    await fifo.pop(lambda d, initial: flags.append(initial))  # the stale tombstone
    assert fifo.has_synced()
    assert flags == [True, True, True]


def test_an_add_before_any_replace_counts_as_synced() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    assert fifo.has_synced()


async def test_empty_initial_replace_is_synced_at_once() -> None:
    fifo = DeltaFIFO()
    fifo.replace([], "1")
    assert fifo.has_synced()


async def test_keys_pop_in_first_queued_order_with_all_their_deltas() -> None:
    fifo = DeltaFIFO()
    for name, rv in [("a", "1"), ("b", "1"), ("a", "2"), ("c", "1")]:
        fifo.update(obj(name, rv))
    assert fifo.list_keys() == ["ns/a", "ns/b", "ns/c"]
    assert [o["metadata"]["resourceVersion"] for o in fifo.list()] == ["2", "1", "1"]
    assert shape(fifo.get(obj("a")) or []) == [(U, "1"), (U, "2")]
    assert list((await pop_all(fifo)).keys()) == ["ns/a", "ns/b", "ns/c"]


async def test_pop_waits_for_an_item_and_closing_stops_it() -> None:
    fifo = DeltaFIFO()
    waiter = asyncio.create_task(fifo.pop(lambda d, i: None))
    await settle()
    assert not waiter.done()
    fifo.add(obj("a"))
    assert shape(await asyncio.wait_for(waiter, 1)) == [(A, "1")]

    blocked = asyncio.create_task(fifo.pop(lambda d, i: None))
    await settle()
    fifo.close()
    with pytest.raises(FIFOClosedError):
        await asyncio.wait_for(blocked, 1)


async def test_closed_fifo_still_hands_out_what_is_queued() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    fifo.close()
    assert fifo.is_closed
    await fifo.pop(lambda d, i: None)
    with pytest.raises(FIFOClosedError):
        await fifo.pop(lambda d, i: None)


async def test_process_updates_known_objects_before_anything_else_runs() -> None:
    indexer = Indexer()
    fifo = DeltaFIFO(known_objects=indexer)

    def process(deltas: Deltas, initial: bool) -> None:
        for d in deltas:
            (indexer.delete if d.type is D else indexer.update)(d.object)

    fifo.add(obj("a"))
    await fifo.pop(process)
    fifo.replace([], "2")  # a is known only to the indexer now
    popped = await fifo.pop(process)
    assert shape(popped) == [(D, ("tomb", "1"))]
    assert indexer.list_keys() == []


async def test_requeue_puts_deltas_back_unless_requeued_meanwhile() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))

    def fail(deltas: Deltas, initial: bool) -> None:
        raise Requeue(RuntimeError("handler busy"))

    with pytest.raises(RuntimeError, match="handler busy"):
        await fifo.pop(fail)
    assert shape(fifo.get_by_key("ns/a") or []) == [(A, "1")]

    def requeue_after_new_event(deltas: Deltas, initial: bool) -> None:
        fifo.update(obj("a", "2"))
        raise Requeue()

    await fifo.pop(requeue_after_new_event)
    assert shape(fifo.get_by_key("ns/a") or []) == [(U, "2")]


async def test_resync_queues_sync_only_for_keys_with_nothing_queued() -> None:
    indexer = Indexer()
    indexer.replace([obj("a", "1"), obj("b", "1")], "1")
    fifo = DeltaFIFO(known_objects=indexer)
    fifo.update(obj("b", "2"))
    fifo.resync()
    assert await pop_all(fifo) == {"ns/b": [(U, "2")], "ns/a": [(S, "1")]}
    DeltaFIFO().resync()  # without known objects: nothing to do


async def test_transformer_sees_every_object_before_it_is_queued() -> None:
    def strip(o: Any) -> Any:
        if isinstance(o, dict):
            return {**o, "metadata": {k: v for k, v in o["metadata"].items() if k != "managedFields"}}
        return o

    fifo = DeltaFIFO(transformer=strip)
    fifo.add({"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "1", "managedFields": [1]}})
    (delta,) = fifo.get_by_key("ns/a") or []
    assert "managedFields" not in delta.object["metadata"]


def test_key_of_deltas_uses_the_newest_object() -> None:
    fifo = DeltaFIFO()
    assert fifo.key_of([Delta(A, obj("a")), Delta(D, tomb("b"))]) == "ns/b"
    with pytest.raises(ValueError):
        fifo.key_of([])


def test_delta_fifo_is_a_reflector_store() -> None:
    assert isinstance(DeltaFIFO(), ReflectorStore)
