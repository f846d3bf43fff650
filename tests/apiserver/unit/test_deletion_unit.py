"""delete_object and parse_delete_options over a real ObjectStore on the
in-memory store, with a fixed clock: immediate, graceful and finalizer-held
deletion, preconditions, dry runs, namespaces going Terminating, and the
retry when a write lands between the read and the delete."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from k8py.api.errors import BadRequest, Conflict, Invalid, NotFound
from k8py.apiserver.handlers.deletion import DeleteOptions, delete_object, parse_delete_options
from k8py.apiserver.registry import Strategy
from k8py.apiserver.store.object_store import ObjectStore
from k8py.storage import KeyValue
from tests.support.fake_storage import MemoryStorage

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
NOW_TEXT = "2027-01-15T08:00:00Z"


@pytest.fixture
def store(memory) -> ObjectStore:
    return ObjectStore(memory, clock=lambda: NOW)


def pod(name: str, *, node: str = "", grace: int | None = None, phase: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": name}, "spec": spec}


def cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta}, "data": {"k": "v"}}


async def stored(memory: MemoryStorage, definition, name: str, ns: str = "default") -> dict[str, Any] | None:
    kv = await memory.get(definition.key(ns, name))
    return None if kv is None else orjson.loads(kv.value)


async def test_an_unheld_object_goes_at_once_and_the_reply_is_a_status(store, memory, configmaps):
    created = await store.create(configmaps, "default", cm("plain"))
    reply, deleted = await delete_object(store, configmaps, "default", "plain", DeleteOptions())
    assert deleted is True
    assert (reply["kind"], reply["status"]) == ("Status", "Success")
    assert reply["details"] == {"name": "plain", "kind": "configmaps", "uid": created["metadata"]["uid"]}
    assert await stored(memory, configmaps, "plain") is None
    with pytest.raises(NotFound):
        await delete_object(store, configmaps, "default", "plain", DeleteOptions())


async def test_pods_reply_with_the_deleted_object_stamped_with_the_delete_revision(store, memory, pods):
    await store.create(pods, "default", pod("unbound"))
    reply, deleted = await delete_object(store, pods, "default", "unbound", DeleteOptions())
    assert deleted and reply["kind"] == "Pod"
    assert reply["metadata"]["resourceVersion"] == str(await memory.current_revision())


async def test_a_bound_pod_is_deleted_gracefully_and_grace_zero_finishes_it(store, memory, pods):
    await store.create(pods, "default", pod("bound", node="n1", grace=30))
    reply, deleted = await delete_object(store, pods, "default", "bound", DeleteOptions())
    assert deleted is False
    meta = (await stored(memory, pods, "bound"))["metadata"]  # type: ignore[index]
    assert meta["deletionGracePeriodSeconds"] == 30
    assert meta["deletionTimestamp"] == "2027-01-15T08:00:30Z"
    assert reply["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
    # a shorter grace period shortens it; the same again changes nothing
    await delete_object(store, pods, "default", "bound", DeleteOptions(grace_period_seconds=5))
    assert (await stored(memory, pods, "bound"))["metadata"]["deletionGracePeriodSeconds"] == 5  # type: ignore[index]
    revision = await memory.current_revision()
    await delete_object(store, pods, "default", "bound", DeleteOptions(grace_period_seconds=5))
    assert await memory.current_revision() == revision
    _, deleted = await delete_object(store, pods, "default", "bound", DeleteOptions(grace_period_seconds=0))
    assert deleted and await stored(memory, pods, "bound") is None


async def test_a_finished_or_unbound_pod_has_no_grace_period(store, memory, pods):
    await store.create(pods, "default", pod("never-scheduled", grace=30))
    _, deleted = await delete_object(store, pods, "default", "never-scheduled", DeleteOptions())
    assert deleted


async def test_finalizers_and_propagation_policies_hold_the_object(store, memory, configmaps):
    await store.create(configmaps, "default", cm("held", finalizers=["example.com/keep"]))
    reply, deleted = await delete_object(store, configmaps, "default", "held", DeleteOptions())
    assert deleted is False
    meta = (await stored(memory, configmaps, "held"))["metadata"]  # type: ignore[index]
    assert meta["deletionTimestamp"] == NOW_TEXT and meta["finalizers"] == ["example.com/keep"]
    await store.create(configmaps, "default", cm("orphaned"))
    await delete_object(store, configmaps, "default", "orphaned", DeleteOptions(propagation_policy="Orphan"))
    assert (await stored(memory, configmaps, "orphaned"))["metadata"]["finalizers"] == ["orphan"]  # type: ignore[index]
    await store.create(configmaps, "default", cm("fg"))
    await delete_object(store, configmaps, "default", "fg", DeleteOptions(propagation_policy="Foreground"))
    assert (await stored(memory, configmaps, "fg"))["metadata"]["finalizers"] == ["foregroundDeletion"]  # type: ignore[index]


async def test_preconditions_that_do_not_match_are_409_and_keep_the_object(store, memory, configmaps):
    created = await store.create(configmaps, "default", cm("pre"))
    with pytest.raises(Conflict) as info:
        await delete_object(store, configmaps, "default", "pre", DeleteOptions(precondition_uid="other"))
    assert "the UID in the precondition (other) does not match" in info.value.message
    with pytest.raises(Conflict):
        await delete_object(store, configmaps, "default", "pre", DeleteOptions(precondition_rv="999"))
    assert await stored(memory, configmaps, "pre") is not None
    opts = DeleteOptions(precondition_uid=created["metadata"]["uid"], precondition_rv=created["metadata"]["resourceVersion"])
    _, deleted = await delete_object(store, configmaps, "default", "pre", opts)
    assert deleted


async def test_a_dry_run_changes_nothing(store, memory, configmaps, pods):
    await store.create(configmaps, "default", cm("dry"))
    await store.create(pods, "default", pod("dry-bound", node="n1"))
    revision = await memory.current_revision()
    _, deleted = await delete_object(store, configmaps, "default", "dry", DeleteOptions(dry_run=True))
    assert deleted is True
    reply, deleted = await delete_object(store, pods, "default", "dry-bound", DeleteOptions(dry_run=True))
    assert deleted is False and reply["metadata"]["deletionTimestamp"]
    assert await memory.current_revision() == revision


async def test_a_namespace_with_finalizers_goes_terminating_and_a_second_delete_is_409(store, memory, registry):
    namespaces = registry.get("", "v1", "namespaces")
    await store.create(namespaces, "", {"metadata": {"name": "doomed"}})
    reply, deleted = await delete_object(store, namespaces, "", "doomed", DeleteOptions())
    assert deleted is False
    assert reply["status"]["phase"] == "Terminating"
    assert (await stored(memory, namespaces, "doomed", ""))["metadata"]["deletionTimestamp"] == NOW_TEXT  # type: ignore[index]
    with pytest.raises(Conflict) as info:
        await delete_object(store, namespaces, "", "doomed", DeleteOptions())
    assert "ensuring all content is removed" in info.value.message


class RacingStorage(MemoryStorage):
    """Lands one more write to a key just before the first delete of it."""

    def __init__(self) -> None:
        super().__init__()
        self.raced = False

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        if not self.raced:
            self.raced = True
            current = await self.get(key)
            assert current is not None
            await self.update(key, current.value, expected_revision=current.mod_revision)
        return await super().delete(key, expected_revision=expected_revision)


async def test_a_write_between_the_read_and_the_delete_is_retried(configmaps):
    racing = RacingStorage()
    await racing.start()
    store = ObjectStore(racing, clock=lambda: NOW)
    await store.create(configmaps, "default", cm("contended"))
    _, deleted = await delete_object(store, configmaps, "default", "contended", DeleteOptions())
    assert racing.raced and deleted
    assert await racing.get(configmaps.key("default", "contended")) is None
    await racing.close()


def test_delete_options_come_from_the_body_or_the_query():
    opts = parse_delete_options({"gracePeriodSeconds": 0, "preconditions": {"uid": "u"}, "dryRun": ["All"]}, {})
    assert (opts.grace_period_seconds, opts.precondition_uid, opts.dry_run) == (0, "u", True)
    opts = parse_delete_options(None, {"gracePeriodSeconds": "7", "propagationPolicy": "Foreground"})
    assert (opts.grace_period_seconds, opts.propagation_policy) == (7, "Foreground")
    assert parse_delete_options(None, {"orphanDependents": "true"}).propagation_policy == "Orphan"
    assert parse_delete_options(None, {"orphanDependents": "false"}).propagation_policy == "Background"


@pytest.mark.parametrize(
    ("body", "params", "error"),
    [
        (None, {"gracePeriodSeconds": "soon"}, BadRequest),
        (None, {"propagationPolicy": "Sideways"}, Invalid),
        ({"orphanDependents": True, "propagationPolicy": "Orphan"}, {}, Invalid),
    ],
)
def test_bad_delete_options_are_refused(body, params, error):
    with pytest.raises(error):
        parse_delete_options(body, params)


class TenSecondsGrace(Strategy):
    def grace_period(self, obj: dict[str, Any], requested: int | None) -> int:
        return 10 if requested is None else requested


class KeptUntilCleaned(Strategy):
    def begin_termination(self, obj: dict[str, Any]) -> bool:
        obj["status"] = {"phase": "Cleaning"}
        return True


async def test_grace_and_termination_are_the_strategys_not_the_kinds(store, memory, configmaps):
    graceful = dataclasses.replace(configmaps, plural="graceful", storage_resource="graceful", strategy=TenSecondsGrace())
    await memory.create(graceful.key("default", "g"), orjson.dumps(cm("g")))
    _, deleted = await delete_object(store, graceful, "default", "g", DeleteOptions())
    assert deleted is False
    assert (await stored(memory, graceful, "g"))["metadata"]["deletionGracePeriodSeconds"] == 10  # type: ignore[index]
    _, deleted = await delete_object(store, graceful, "default", "g", DeleteOptions(grace_period_seconds=0))
    assert deleted is True

    kept = dataclasses.replace(configmaps, plural="kept", storage_resource="kept", strategy=KeptUntilCleaned())
    await memory.create(kept.key("default", "k"), orjson.dumps(cm("k")))
    reply, deleted = await delete_object(store, kept, "default", "k", DeleteOptions())
    assert deleted is False and reply["status"] == {"phase": "Cleaning"}
    assert (await stored(memory, kept, "k"))["metadata"]["deletionTimestamp"] == NOW_TEXT  # type: ignore[index]
