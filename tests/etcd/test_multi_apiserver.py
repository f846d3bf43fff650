"""Two API server processes on one etcd, sharing one key prefix.

Each server has its own watch cache, fed by its own etcd watch. What the
issue asks of them, checked through the official client:

- a consistent list through B right after a create through A holds the
  object, at a resourceVersion no older than the create's;
- a watch through B sees a write through A with the same resourceVersion
  (etcd's mod_revision, the same number on every server);
- both servers report the same object (same uid, same resourceVersion) and
  deliver the same event stream to a watch from the same resourceVersion.
"""

from __future__ import annotations

import queue
import threading
import uuid
from typing import Any, Iterator

import kubernetes
import pytest

from tests.support.etcd import etcd_installed, fresh_prefix, session_etcd
from tests.support.kube import official_client
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.etcd, pytest.mark.skipif(not etcd_installed(), reason="etcd not installed")]

NS = "default"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[kubernetes.client.CoreV1Api, kubernetes.client.CoreV1Api]]:
    etcd = session_etcd()
    prefix = fresh_prefix()
    procs = [
        ServerProcess.on_etcd(str(tmp_path_factory.mktemp(name)), etcd.etcd_servers, prefix, "--watch-bookmark-interval", "1")
        for name in ("a", "b")
    ]
    clients = []
    try:
        for p in procs:
            p.start()
            clients.append(official_client(p.url))
        yield kubernetes.client.CoreV1Api(clients[0]), kubernetes.client.CoreV1Api(clients[1])
    finally:
        for c in clients:
            c.close()
        for p in procs:
            p.kill()


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"test": "multi"}}, "data": data}


class WatchThread:
    """An official-client watch in a thread; events land in ``events``."""

    def __init__(self, core: kubernetes.client.CoreV1Api, **kwargs: Any) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._watch = kubernetes.watch.Watch()
        self._kwargs = {"timeout_seconds": 20, **kwargs}
        self._core = core
        self._thread = threading.Thread(target=self._run, name="multi-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._watch.stream(self._core.list_namespaced_config_map, NS, **self._kwargs):
                self.events.put(event)
        except Exception:  # the server went away at teardown; take() reports missing events
            pass

    def take(self, n: int, *, name: str = "", timeout: float = 10.0) -> list[dict[str, Any]]:
        """The next ``n`` events about objects whose name starts with ``name``;
        fails on a timeout."""
        out: list[dict[str, Any]] = []
        while len(out) < n:
            event = self.events.get(timeout=timeout)
            if event["object"].metadata.name.startswith(name):
                out.append(event)
        return out

    def stop(self) -> None:
        self._watch.stop()


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    return [
        (e["type"], e["object"].metadata.name, e["object"].metadata.uid, e["object"].metadata.resource_version)
        for e in events
    ]


def test_a_create_through_one_server_is_in_a_consistent_list_through_the_other(servers):
    a, b = servers
    for i in range(5):
        created = a.create_namespaced_config_map(NS, cm(f"list-{i}-{uuid.uuid4().hex[:6]}"))
        listed = b.list_namespaced_config_map(NS)
        names = {o.metadata.name: o for o in listed.items}
        assert created.metadata.name in names
        assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
        assert names[created.metadata.name].metadata.uid == created.metadata.uid
        assert names[created.metadata.name].metadata.resource_version == created.metadata.resource_version


def test_both_servers_report_the_same_object_uid_and_resource_version(servers):
    a, b = servers
    created = b.create_namespaced_config_map(NS, cm("same-object", k="v"))
    from_a = a.read_namespaced_config_map("same-object", NS)
    from_b = b.read_namespaced_config_map("same-object", NS)
    assert from_a.metadata.uid == from_b.metadata.uid == created.metadata.uid
    assert from_a.metadata.resource_version == from_b.metadata.resource_version == created.metadata.resource_version
    assert from_a.data == from_b.data == {"k": "v"}


def test_a_write_through_one_server_is_seen_in_a_watch_through_the_other_with_the_same_resource_version(servers):
    a, b = servers
    start = b.list_namespaced_config_map(NS).metadata.resource_version
    watch = WatchThread(b, resource_version=start)
    try:
        created = a.create_namespaced_config_map(NS, cm("watched", k="1"))
        updated = a.patch_namespaced_config_map("watched", NS, {"data": {"k": "2"}})
        a.delete_namespaced_config_map("watched", NS)
        events = watch.take(3, name="watched")
    finally:
        watch.stop()
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[0]["object"].metadata.resource_version == created.metadata.resource_version
    assert events[1]["object"].metadata.resource_version == updated.metadata.resource_version
    assert events[1]["object"].data == {"k": "2"}
    assert {e["object"].metadata.uid for e in events} == {created.metadata.uid}
    assert int(events[2]["object"].metadata.resource_version) > int(updated.metadata.resource_version)


def test_watches_through_both_servers_from_one_resource_version_deliver_the_same_events(servers):
    a, b = servers
    start = a.list_namespaced_config_map(NS).metadata.resource_version
    watches = [WatchThread(a, resource_version=start), WatchThread(b, resource_version=start)]
    try:
        names = [f"both-{i}" for i in range(6)]
        for i, name in enumerate(names):
            (a if i % 2 else b).create_namespaced_config_map(NS, cm(name))
        for i, name in enumerate(names[:3]):
            (b if i % 2 else a).delete_namespaced_config_map(name, NS)
        seen = [w.take(9, name="both-") for w in watches]
    finally:
        for w in watches:
            w.stop()
    assert summary(seen[0]) == summary(seen[1])
    assert [e["type"] for e in seen[0]] == ["ADDED"] * 6 + ["DELETED"] * 3
    rvs = [int(e["object"].metadata.resource_version) for e in seen[0]]
    assert rvs == sorted(rvs) and int(start) < rvs[0]
