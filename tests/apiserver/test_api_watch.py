"""Watch semantics through the official client, checked on the wire.

Each test opens watches with ``_preload_content=False`` (so the raw chunked
bytes are visible) or through ``kubernetes.watch.Watch`` (what client code
does), against a real server in a background thread
(``bookmark_interval=1.0``). Expected behaviours come from
shared/reference/client-behaviours.md and upstream's watch cache.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from typing import Any, Callable

import kubernetes
import orjson
import pytest
from kubernetes.client.exceptions import ApiException

from k8py.apiserver.watch.clock import ManualClock
from tests.support.kube import official_client
from tests.support.servers import ServerThread, sqlite_storage

NS = "default"


class RawWatch:
    """A watch opened through the official client; a thread collects the raw bytes."""

    def __init__(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("timeout_seconds", 20)
        self.response = call(*args, watch=True, _preload_content=False, **kwargs)
        self.status = self.response.status
        self._data = bytearray()
        self._cond = threading.Condition()
        self.ended = False
        self._thread = threading.Thread(target=self._read, name="raw-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for chunk in self.response.stream(None):
                with self._cond:
                    self._data += chunk
                    self._cond.notify_all()
        except Exception:  # the connection was shut down by close()
            pass
        finally:
            with self._cond:
                self.ended = True
                self._cond.notify_all()

    @property
    def raw(self) -> bytes:
        with self._cond:
            return bytes(self._data)

    def lines(self) -> list[bytes]:
        raw = self.raw
        return raw[: raw.rfind(b"\n") + 1].splitlines(keepends=True)

    def events(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.lines()]

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 5.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                events = self.events()
                if predicate(events):
                    return events
                left = deadline - time.monotonic()
                if left <= 0 or self.ended:
                    raise AssertionError(f"watch condition not met within {timeout}s; got {events}")
                self._cond.wait(left)

    def wait_events(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        return self.wait_for(lambda evs: len(evs) >= n, timeout)

    def wait_end(self, timeout: float = 5.0) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        try:
            self.response.shutdown()
        except Exception:
            pass
        self.response.release_conn()
        self._thread.join(5)

    def __enter__(self) -> "RawWatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def cm(name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "data": data or {"k": "v"}}


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


def bind(core: kubernetes.client.CoreV1Api, name: str, node: str) -> None:
    core.create_namespaced_pod_binding(
        name,
        NS,
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
        _preload_content=False,
    )


# -- start -----------------------------------------------------------------


@pytest.mark.parametrize("rv", [None, "0"], ids=["no-rv", "rv-0"])
def test_watch_without_rv_starts_with_synthetic_added_then_goes_live(core, rv):
    for name in ("a", "b", "c"):
        core.create_namespaced_config_map(NS, cm(name))
    kwargs = {"resource_version": rv} if rv else {}
    with RawWatch(core.list_namespaced_config_map, NS, **kwargs) as w:
        initial = w.wait_events(3)
        assert sorted(summary(initial)) == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]
        core.patch_namespaced_config_map("b", NS, {"data": {"k": "changed"}})
        core.delete_namespaced_config_map("c", NS)
        core.create_namespaced_config_map(NS, cm("d"))
        events = w.wait_events(6)
    assert summary(events[3:]) == [("MODIFIED", "b"), ("DELETED", "c"), ("ADDED", "d")]
    assert events[3]["object"]["data"] == {"k": "changed"}


def test_watch_from_an_rv_replays_exactly_the_later_changes(core):
    core.create_namespaced_config_map(NS, cm("before"))
    start = core.create_namespaced_config_map(NS, cm("a")).metadata.resource_version
    core.create_namespaced_config_map(NS, cm("b"))
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "2"}})
    core.delete_namespaced_config_map("b", NS)
    with RawWatch(core.list_namespaced_config_map, NS, resource_version=start) as w:
        events = w.wait_events(3)
        time.sleep(0.2)  # nothing else may follow
        assert len(w.events()) == 3
    assert summary(events) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(start)


def test_official_watch_resumes_from_a_list_rv_and_sees_only_later_changes(core):
    core.create_namespaced_config_map(NS, cm("old"))
    list_rv = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, cm("new"))
    core.delete_namespaced_config_map("old", NS)
    w = kubernetes.watch.Watch()
    seen = []
    for event in w.stream(core.list_namespaced_config_map, NS, resource_version=list_rv, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "new"), ("DELETED", "old")]


# -- 410 ---------------------------------------------------------------------


@pytest.fixture
def small_ring_server(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0, watch_cache_capacity=4) as server:
        client = official_client(server.url)
        yield kubernetes.client.CoreV1Api(client)
        client.close()


def test_watch_from_an_rv_older_than_the_ring_gets_http_200_and_one_410_error_event(small_ring_server):
    core = small_ring_server
    first = int(core.create_namespaced_config_map(NS, cm("x0")).metadata.resource_version)
    for i in range(1, 10):
        core.create_namespaced_config_map(NS, cm(f"x{i}"))
    with RawWatch(core.list_namespaced_config_map, NS, resource_version=str(first)) as w:
        assert w.status == 200
        assert w.wait_end(5), "the stream must close after the error"
        raw = w.raw
    line = raw.decode()
    assert line.count("\n") == 1 and line.endswith("\n")
    event = orjson.loads(raw)
    oldest = int(event["object"]["message"].rsplit("(", 1)[1].rstrip(")"))
    assert raw == (
        b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"too old resource version: %d (%d)","reason":"Expired","code":410}}\n' % (first, oldest)
    )
    # the RV in parentheses is the oldest one a watch can still start from
    with RawWatch(core.list_namespaced_config_map, NS, resource_version=str(oldest)) as w:
        events = w.wait_events(1)
        assert events[0]["type"] != "ERROR"
    with RawWatch(core.list_namespaced_config_map, NS, resource_version=str(oldest - 1)) as w:
        assert w.wait_end(5)
        assert w.events()[0]["type"] == "ERROR"


def test_official_watch_raises_410_after_its_one_retry_on_an_expired_rv(small_ring_server):
    core = small_ring_server
    first = core.create_namespaced_config_map(NS, cm("y0")).metadata.resource_version
    for i in range(1, 8):
        core.create_namespaced_config_map(NS, cm(f"y{i}"))
    w = kubernetes.watch.Watch()
    with pytest.raises(ApiException) as err:
        for _ in w.stream(core.list_namespaced_config_map, NS, resource_version=first, timeout_seconds=5):
            pass
    assert err.value.status == 410


# -- bookmarks and initial events ---------------------------------------------


@pytest.fixture
def clocked(tmp_path):
    """A server whose watches keep time by a ManualClock: time passes only when the test says."""
    clock = ManualClock()
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0, watch_clock=clock) as server:
        client = official_client(server.url)
        yield server, clock, kubernetes.client.CoreV1Api(client)
        client.close()


def _advance(server: ServerThread, clock: ManualClock, seconds: float) -> None:
    async def step() -> None:
        clock.advance(seconds)

    server.call(step())


def _wait_watchers(server: ServerThread, count: int) -> None:
    """Until the server has registered ``count`` configmap watches (their clocks are set from then)."""
    deadline = time.monotonic() + 30
    while True:
        with urllib.request.urlopen(f"{server.url}/metrics") as resp:
            text = resp.read().decode()
        line = next((ln for ln in text.splitlines() if ln.startswith('apiserver_registered_watchers{resource="configmaps"}')), "")
        if line and float(line.split()[-1]) >= count:
            return
        assert time.monotonic() < deadline, "the watches never opened"
        time.sleep(0.02)


def _bookmarks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "BOOKMARK"]


def test_bookmarks_come_every_interval_only_when_allowed(clocked):
    server, clock, core = clocked
    rv = core.create_namespaced_config_map(NS, cm("a")).metadata.resource_version
    with RawWatch(core.list_namespaced_config_map, NS, resource_version=rv, allow_watch_bookmarks=True) as with_bm, RawWatch(
        core.list_namespaced_config_map, NS, resource_version=rv
    ) as without_bm:
        _wait_watchers(server, 2)
        _advance(server, clock, 0.5)  # half an interval: nothing due yet
        core.create_namespaced_config_map(NS, cm("b"))
        before = with_bm.wait_for(lambda evs: ("ADDED", "b") in summary(evs), timeout=30)
        assert _bookmarks(before) == []
        _advance(server, clock, 0.5)  # one interval since the watch opened
        with_bm.wait_for(lambda evs: len(_bookmarks(evs)) == 1, timeout=30)
        _advance(server, clock, 1.0)
        events = with_bm.wait_for(lambda evs: len(_bookmarks(evs)) == 2, timeout=30)
        core.create_namespaced_config_map(NS, cm("c"))
        plain = without_bm.wait_for(lambda evs: ("ADDED", "c") in summary(evs), timeout=30)
        assert _bookmarks(plain) == []
    for bm in _bookmarks(events):
        assert bm["object"] == {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": bm["object"]["metadata"]["resourceVersion"]}}
        assert int(bm["object"]["metadata"]["resourceVersion"]) >= int(rv)


def test_bookmark_rv_reaches_the_latest_change_of_other_resources(core):
    rv = core.create_namespaced_config_map(NS, cm("a")).metadata.resource_version
    with RawWatch(core.list_namespaced_config_map, NS, resource_version=rv, allow_watch_bookmarks=True) as w:
        later = core.create_namespaced_secret(NS, {"metadata": {"name": "s"}}).metadata.resource_version
        events = w.wait_for(
            lambda evs: any(e["type"] == "BOOKMARK" and int(e["object"]["metadata"]["resourceVersion"]) >= int(later) for e in evs),
            timeout=4,
        )
    assert all(e["type"] == "BOOKMARK" for e in events)


def test_send_initial_events_ends_with_an_annotated_bookmark(core):
    for name in ("a", "b"):
        core.create_namespaced_config_map(NS, cm(name))
    with RawWatch(
        core.list_namespaced_config_map,
        NS,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
    ) as w:
        events = w.wait_events(3)
        list_rv = core.list_namespaced_config_map(NS).metadata.resource_version
        core.create_namespaced_config_map(NS, cm("c"))
        live = w.wait_for(lambda evs: ("ADDED", "c") in summary(evs))
    assert sorted(summary(events[:2])) == [("ADDED", "a"), ("ADDED", "b")]
    end = events[2]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["kind"] == "ConfigMap" and end["object"]["apiVersion"] == "v1"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    # the bookmark is at the revision the initial events were taken at: at least the last item's,
    # at most a later list's (the server may have written something else in between)
    item_rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events[:2]]
    assert max(item_rvs) <= int(end["object"]["metadata"]["resourceVersion"]) <= int(list_rv)
    assert [e for e in live[3:] if e["type"] != "BOOKMARK"][0]["object"]["metadata"]["name"] == "c"


def test_send_initial_events_requires_not_older_than_and_bookmarks(core):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, watch=True, send_initial_events=True, allow_watch_bookmarks=True, _preload_content=False)
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(
            NS, watch=True, send_initial_events=True, resource_version_match="NotOlderThan", _preload_content=False
        )
    assert err.value.status == 422


def test_timeout_seconds_closes_the_stream_on_time_without_an_error(clocked):
    server, clock, core = clocked
    with RawWatch(core.list_namespaced_config_map, NS, resource_version="0", timeout_seconds=1) as w:
        _wait_watchers(server, 1)
        _advance(server, clock, 0.9)
        assert not w.wait_end(0.3), "ended before its timeoutSeconds"
        _advance(server, clock, 0.1)
        assert w.wait_end(30), "still open after its timeoutSeconds"
        events = w.events()
    assert all(e["type"] == "ADDED" for e in events)


# -- selectors ----------------------------------------------------------------


def test_label_selector_watch_turns_transitions_into_added_and_deleted(core):
    with RawWatch(core.list_namespaced_config_map, NS, label_selector="app=web") as w:
        core.create_namespaced_config_map(NS, cm("a", {"app": "web"}))
        core.create_namespaced_config_map(NS, cm("other", {"app": "db"}))
        moved = core.patch_namespaced_config_map("a", NS, {"metadata": {"labels": {"app": "db"}}})
        core.patch_namespaced_config_map("a", NS, {"data": {"k": "while-unmatched"}})
        core.patch_namespaced_config_map("a", NS, {"metadata": {"labels": {"app": "web"}}})
        core.patch_namespaced_config_map("a", NS, {"data": {"k": "matched-again"}})
        core.delete_namespaced_config_map("a", NS)
        core.delete_namespaced_config_map("other", NS)
        events = w.wait_events(5)
        time.sleep(0.2)
        assert len(w.events()) == 5
    assert summary(events) == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    gone = events[1]["object"]
    assert gone["metadata"]["labels"] == {"app": "web"}  # the previous state ...
    assert gone["metadata"]["resourceVersion"] == moved.metadata.resource_version  # ... at the change's RV
    assert events[2]["object"]["data"] == {"k": "while-unmatched"}


def test_set_based_label_selector_filters_watch_events(core):
    with RawWatch(core.list_namespaced_config_map, NS, label_selector="tier in (fe,be),!canary") as w:
        core.create_namespaced_config_map(NS, cm("fe", {"tier": "fe"}))
        core.create_namespaced_config_map(NS, cm("canary", {"tier": "fe", "canary": "1"}))
        core.create_namespaced_config_map(NS, cm("db", {"tier": "db"}))
        core.create_namespaced_config_map(NS, cm("be", {"tier": "be"}))
        events = w.wait_events(2)
        time.sleep(0.2)
        assert len(w.events()) == 2
    assert summary(events) == [("ADDED", "fe"), ("ADDED", "be")]


def test_node_name_field_selector_watch_sees_pods_as_they_are_bound_to_the_node(core):
    core.create_namespaced_pod(NS, pod("early"))
    bind(core, "early", "n1")
    with RawWatch(core.list_pod_for_all_namespaces, field_selector="spec.nodeName=n1") as w:
        assert summary(w.wait_events(1)) == [("ADDED", "early")]
        core.create_namespaced_pod(NS, pod("p1"))
        core.create_namespaced_pod(NS, pod("p2"))
        bind(core, "p2", "n2")
        bind(core, "p1", "n1")
        core.patch_namespaced_pod("p2", NS, {"metadata": {"labels": {"x": "y"}}})
        core.delete_namespaced_pod("p1", NS, grace_period_seconds=0)
        events = w.wait_events(3)
        time.sleep(0.2)
        assert len(w.events()) == 3
    assert summary(events) == [("ADDED", "early"), ("ADDED", "p1"), ("DELETED", "p1")]
    assert events[1]["object"]["spec"]["nodeName"] == "n1"


def test_metadata_name_field_selector_watch_follows_one_object(core):
    with RawWatch(core.list_namespaced_config_map, NS, field_selector="metadata.name=target") as w:
        core.create_namespaced_config_map(NS, cm("decoy"))
        core.create_namespaced_config_map(NS, cm("target"))
        core.delete_namespaced_config_map("decoy", NS)
        core.delete_namespaced_config_map("target", NS)
        events = w.wait_events(2)
    assert summary(events) == [("ADDED", "target"), ("DELETED", "target")]


def test_deletecollection_emits_one_deleted_per_object_with_its_last_state(core):
    for i in range(5):
        core.create_namespaced_config_map(NS, cm(f"gc{i}", {"batch": "1"}, {"i": str(i)}))
    core.create_namespaced_config_map(NS, cm("keep", {"batch": "2"}))
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    with RawWatch(core.list_namespaced_config_map, NS, resource_version=rv) as w:
        core.delete_collection_namespaced_config_map(NS, label_selector="batch=1")
        events = w.wait_events(5)
        time.sleep(0.2)
        assert len(w.events()) == 5
    assert sorted(summary(events)) == [("DELETED", f"gc{i}") for i in range(5)]
    for e in events:
        assert e["object"]["data"]["i"] == e["object"]["metadata"]["name"][2:]
    assert [c.metadata.name for c in core.list_namespaced_config_map(NS).items] == ["keep"]


# -- wire format ---------------------------------------------------------------


def test_watch_wire_format_is_one_newline_terminated_json_object_per_line(core):
    rv = core.create_namespaced_config_map(NS, cm("w0")).metadata.resource_version
    with RawWatch(core.list_namespaced_config_map, NS, resource_version="0", allow_watch_bookmarks=True) as w:
        for i in range(1, 6):
            core.create_namespaced_config_map(NS, cm(f"w{i}"))
            core.patch_namespaced_config_map(f"w{i}", NS, {"data": {"k": str(i)}})
        w.wait_for(lambda evs: len([e for e in evs if e["type"] != "BOOKMARK"]) >= 11 and evs[-1]["type"] == "BOOKMARK", timeout=4)
        raw = w.raw
    assert w.response.headers["Content-Type"] == "application/json"
    assert w.response.headers["Transfer-Encoding"] == "chunked"
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert all(line.strip() for line in lines), "no blank keep-alive lines"
    events = [orjson.loads(line) for line in lines]
    assert all(list(e) == ["type", "object"] for e in events)
    rvs = [e["object"]["metadata"]["resourceVersion"] for e in events if e["type"] in ("ADDED", "MODIFIED")]
    assert all(isinstance(v, str) and v.isdigit() for v in rvs)
    live = [int(v) for v in rvs[1:]]
    assert live == sorted(set(live)) and live[0] > int(rv)


def test_field_selector_transitions_turn_a_phase_change_into_deleted_for_the_old_phase(core):
    core.create_namespaced_pod(NS, pod("ph"))
    with RawWatch(core.list_namespaced_pod, NS, field_selector="status.phase=Pending") as pending, RawWatch(
        core.list_namespaced_pod, NS, field_selector="status.phase=Running"
    ) as running:
        assert summary(pending.wait_events(1)) == [("ADDED", "ph")]
        core.patch_namespaced_pod_status("ph", NS, {"status": {"phase": "Running"}})
        left = pending.wait_events(2)
        joined = running.wait_events(1)
    assert summary(left) == [("ADDED", "ph"), ("DELETED", "ph")]
    assert left[1]["object"]["status"]["phase"] == "Pending"
    assert summary(joined) == [("ADDED", "ph")] and joined[0]["object"]["status"]["phase"] == "Running"


def test_a_namespace_watch_sees_only_its_namespace_and_a_cluster_watch_sees_all(core):
    core.create_namespace({"metadata": {"name": "other"}})
    with RawWatch(core.list_namespaced_config_map, "other", resource_version="0") as scoped, RawWatch(
        core.list_config_map_for_all_namespaces, resource_version="0"
    ) as everywhere:
        core.create_namespaced_config_map(NS, cm("here"))
        core.create_namespaced_config_map("other", cm("there"))
        # the cluster watch from rv 0 also starts with what the server keeps in kube-system
        # (the front-proxy ConfigMap, extension-apiserver-authentication)
        ours = lambda evs: [e for e in evs if e["object"]["metadata"]["namespace"] != "kube-system"]  # noqa: E731
        all_events = ours(everywhere.wait_for(lambda evs: len(ours(evs)) >= 2, 5.0))
        scoped_events = scoped.wait_events(1)
        time.sleep(0.2)
        assert len(scoped.events()) == 1
    assert [(e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"]) for e in all_events] == [(NS, "here"), ("other", "there")]
    assert summary(scoped_events) == [("ADDED", "there")]


def test_an_idle_watch_whose_client_hung_up_is_ended_by_the_liveness_sweep(clocked):
    """Nothing is written to an idle watch without bookmarks: only the cacher's
    shared sweep (every 5 s of the watch clock) can notice its client left."""
    server, clock, _ = clocked
    cacher = server.server.cacher
    resp = urllib.request.urlopen(f"{server.url}/api/v1/namespaces/{NS}/configmaps?watch=true&resourceVersion=0",
                                  timeout=60)
    _wait_watchers(server, 1)
    deadline = time.monotonic() + 30
    while len(cacher.liveness) < 1:  # registered once its initial events are out
        assert time.monotonic() < deadline, "the watch never registered with the sweep"
        time.sleep(0.02)
    resp.close()
    deadline = time.monotonic() + 60
    while True:
        _advance(server, clock, 5.0)
        with urllib.request.urlopen(f"{server.url}/metrics") as m:
            text = m.read().decode()
        line = next((ln for ln in text.splitlines()
                     if ln.startswith('apiserver_registered_watchers{resource="configmaps"}')), "")
        if line and float(line.split()[-1]) == 0 and len(cacher.liveness) == 0:
            break
        assert time.monotonic() < deadline, "the gone client's watch was never ended"
        time.sleep(0.05)
    assert cacher.liveness.sweeps >= 1
