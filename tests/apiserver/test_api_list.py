"""List semantics through the official client: pagination, selectors, resourceVersion.

Against a real server in a background thread; compaction is driven through the
server's own store (``apiserver.call``) to test what happens after it.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

NS = "default"


def cm(name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "data": data or {"k": "v"}}


def pod(name: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


def names(result: Any) -> list[str]:
    return [item.metadata.name for item in result.items]


def status_of(err: ApiException) -> dict[str, Any]:
    return json.loads(err.body)


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


# -- pagination ---------------------------------------------------------------


def test_limit_and_continue_page_through_every_object_once_with_remaining_counts(core):
    expected = [f"cm-{i:03d}" for i in range(45)]
    for name in expected:
        core.create_namespaced_config_map(NS, cm(name))
    seen: list[str] = []
    remaining: list[int | None] = []
    rvs: set[str] = set()
    token = None
    for _ in range(10):
        page = core.list_namespaced_config_map(NS, limit=20, _continue=token)
        seen += names(page)
        rvs.add(page.metadata.resource_version)
        remaining.append(page.metadata.remaining_item_count)
        token = page.metadata._continue
        if not token:
            break
    assert [n for n in seen if n.startswith("cm-")] == expected
    assert len(seen) == len(set(seen))
    assert remaining[:2] == [25, 5]
    assert remaining[-1] is None
    assert len(rvs) == 1, "every page reports the snapshot's resourceVersion"


def test_continue_after_writes_still_gives_the_first_pages_snapshot(core):
    for i in range(12):
        core.create_namespaced_config_map(NS, cm(f"s{i:02d}", data={"v": "old"}))
    first = core.list_namespaced_config_map(NS, limit=5)
    assert names(first) == [f"s{i:02d}" for i in range(5)]
    core.create_namespaced_config_map(NS, cm("s99"))
    core.delete_namespaced_config_map("s08", NS)
    core.patch_namespaced_config_map("s10", NS, {"data": {"v": "new"}})
    rest: list[Any] = []
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_config_map(NS, limit=5, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        rest += page.items
        token = page.metadata._continue
    assert [c.metadata.name for c in rest] == [f"s{i:02d}" for i in range(5, 12)]
    assert {c.metadata.name: c.data["v"] for c in rest}["s10"] == "old"
    # a fresh list sees the writes
    assert "s99" in names(core.list_namespaced_config_map(NS)) and "s08" not in names(core.list_namespaced_config_map(NS))


def test_continue_with_a_resource_version_is_refused(core):
    for i in range(3):
        core.create_namespaced_config_map(NS, cm(f"c{i}"))
    token = core.list_namespaced_config_map(NS, limit=1).metadata._continue
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, limit=1, _continue=token, resource_version="5")
    assert err.value.status == 422


def test_a_garbled_continue_token_is_a_400(core):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, limit=1, _continue="not-a-token!")
    assert err.value.status == 400
    assert status_of(err.value)["reason"] == "BadRequest"


# -- label selectors ------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c", "d", "e"]),
        ("app in (web,db)", ["a", "b", "c"]),
        ("app notin (web)", ["c", "d", "e"]),
        ("app", ["a", "b", "c", "d"]),
        ("!app", ["e"]),
        ("app=web,env=prod", ["a"]),
        ("app in (web),env notin (prod)", ["b"]),
    ],
)
def test_label_selectors_equality_and_set_based(core, selector, expected):
    labelled = {
        "a": {"app": "web", "env": "prod"},
        "b": {"app": "web", "env": "dev"},
        "c": {"app": "db"},
        "d": {"app": "cache"},
        "e": {"team": "x"},
    }
    for name, labels in labelled.items():
        core.create_namespaced_config_map(NS, cm(name, labels))
    assert names(core.list_namespaced_config_map(NS, label_selector=selector)) == expected


def test_a_malformed_label_selector_is_a_400(core):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, label_selector="app in (web")
    assert err.value.status == 400


# -- field selectors ------------------------------------------------------------


def test_metadata_field_selectors_on_names_and_namespaces(core):
    core.create_namespace({"metadata": {"name": "other"}})
    core.create_namespaced_config_map(NS, cm("x"))
    core.create_namespaced_config_map(NS, cm("y"))
    core.create_namespaced_config_map("other", cm("x"))
    assert names(core.list_namespaced_config_map(NS, field_selector="metadata.name=x")) == ["x"]
    assert names(core.list_namespaced_config_map(NS, field_selector="metadata.name!=x")) == ["y"]
    everywhere = core.list_config_map_for_all_namespaces(field_selector="metadata.name=x")
    assert sorted((c.metadata.namespace, c.metadata.name) for c in everywhere.items) == [(NS, "x"), ("other", "x")]
    only_other = core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=other")
    assert [(c.metadata.namespace, c.metadata.name) for c in only_other.items] == [("other", "x")]


def test_pod_field_selectors_on_node_name_and_phase(core):
    core.create_namespaced_pod(NS, pod("on-n1", "n1"))
    core.create_namespaced_pod(NS, pod("on-n2", "n2"))
    core.create_namespaced_pod(NS, pod("unbound"))
    running = core.read_namespaced_pod_status("on-n2", NS)
    running.status.phase = "Running"
    core.replace_namespaced_pod_status("on-n2", NS, running)
    assert names(core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")) == ["on-n1"]
    assert names(core.list_namespaced_pod(NS, field_selector="spec.nodeName=")) == ["unbound"]
    assert names(core.list_namespaced_pod(NS, field_selector="status.phase=Running")) == ["on-n2"]
    assert names(core.list_namespaced_pod(NS, field_selector="status.phase!=Running")) == ["on-n1", "unbound"]
    assert names(core.list_namespaced_pod(NS, field_selector="spec.nodeName=n2,status.phase=Running")) == ["on-n2"]


def test_event_field_selectors_on_the_involved_object(core):
    def event(name: str, kind: str, obj: str, uid: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "involvedObject": {"kind": kind, "name": obj, "namespace": NS, "uid": uid},
            "reason": "Test",
            "message": "m",
            "type": "Normal",
        }

    core.create_namespaced_event(NS, event("e1", "Pod", "web", "u1"))
    core.create_namespaced_event(NS, event("e2", "Pod", "db", "u2"))
    core.create_namespaced_event(NS, event("e3", "Deployment", "web", "u3"))
    kubectl_describe = f"involvedObject.name=web,involvedObject.namespace={NS},involvedObject.uid=u1"
    assert names(core.list_namespaced_event(NS, field_selector=kubectl_describe)) == ["e1"]
    assert names(core.list_namespaced_event(NS, field_selector="involvedObject.kind=Deployment")) == ["e3"]
    assert names(core.list_namespaced_event(NS, field_selector="involvedObject.name=web")) == ["e1", "e3"]


def test_an_unsupported_field_selector_is_a_400_naming_the_field(core):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, field_selector="spec.nodeName=n1")
    assert err.value.status == 400
    body = status_of(err.value)
    assert body["reason"] == "BadRequest"
    assert body["message"] == "field label not supported: spec.nodeName"


def test_all_namespaces_lists_include_every_namespace(core):
    for ns in ("team-a", "team-b"):
        core.create_namespace({"metadata": {"name": ns}})
        core.create_namespaced_config_map(ns, cm("settings"))
    everywhere = core.list_config_map_for_all_namespaces()
    pairs = {(c.metadata.namespace, c.metadata.name) for c in everywhere.items}
    assert {("team-a", "settings"), ("team-b", "settings")} <= pairs
    services = core.list_service_for_all_namespaces()
    assert (NS, "kubernetes") in {(s.metadata.namespace, s.metadata.name) for s in services.items}


# -- resourceVersion ----------------------------------------------------------------


def test_list_without_rv_is_a_consistent_read_that_sees_a_create_at_once(core):
    for i in range(20):
        created = core.create_namespaced_config_map(NS, cm(f"rw{i}"))
        listed = core.list_namespaced_config_map(NS, field_selector=f"metadata.name=rw{i}")
        assert names(listed) == [f"rw{i}"]
        assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)


def test_list_rv_is_always_a_decimal_string_that_increases(core):
    rvs = []
    for i in range(3):
        rvs.append(core.list_namespaced_config_map(NS).metadata.resource_version)
        core.create_namespaced_config_map(NS, cm(f"r{i}"))
    rvs.append(core.list_namespaced_config_map(NS, resource_version="0").metadata.resource_version)
    assert all(rv.isdigit() for rv in rvs)
    assert [int(rv) for rv in rvs] == sorted(int(rv) for rv in rvs) and int(rvs[0]) < int(rvs[-1])


def test_list_at_rv_0_serves_the_cache(core):
    core.create_namespaced_config_map(NS, cm("any"))
    listed = core.list_namespaced_config_map(NS, resource_version="0")
    assert int(listed.metadata.resource_version) > 0
    assert "kubernetes" in names(core.list_namespaced_service(NS, resource_version="0"))


def test_not_older_than_a_future_rv_times_out_with_a_504(core):
    current = int(core.list_namespaced_config_map(NS).metadata.resource_version)
    future = current + 1000
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, resource_version=str(future), resource_version_match="NotOlderThan")
    assert err.value.status == 504
    body = status_of(err.value)
    assert body["reason"] == "Timeout"
    assert body["message"].startswith(f"Too large resource version: {future}, current: ")
    assert body["details"]["causes"] == [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]


def test_not_older_than_a_past_rv_answers_with_the_current_state(core):
    rv = core.create_namespaced_config_map(NS, cm("n1")).metadata.resource_version
    core.create_namespaced_config_map(NS, cm("n2"))
    listed = core.list_namespaced_config_map(NS, resource_version=rv, resource_version_match="NotOlderThan")
    assert {"n1", "n2"} <= set(names(listed))
    assert int(listed.metadata.resource_version) > int(rv)


def test_exact_at_an_older_rv_returns_the_state_then(core):
    core.create_namespaced_config_map(NS, cm("e1", data={"v": "1"}))
    then = core.create_namespaced_config_map(NS, cm("e2")).metadata.resource_version
    core.patch_namespaced_config_map("e1", NS, {"data": {"v": "2"}})
    core.delete_namespaced_config_map("e2", NS)
    core.create_namespaced_config_map(NS, cm("e3"))
    old = core.list_namespaced_config_map(NS, resource_version=then, resource_version_match="Exact")
    assert old.metadata.resource_version == then
    assert {c.metadata.name: c.data for c in old.items if c.metadata.name.startswith("e")} == {
        "e1": {"v": "1"},
        "e2": {"k": "v"},
    }
    # paging an Exact list stays at that revision
    first = core.list_namespaced_config_map(NS, resource_version=then, resource_version_match="Exact", limit=1)
    assert first.metadata.resource_version == then
    second = core.list_namespaced_config_map(NS, limit=5, _continue=first.metadata._continue)
    assert second.metadata.resource_version == then
    assert names(first) + names(second) == names(old)


def test_exact_after_compaction_is_a_410(apiserver, core):
    then = core.create_namespaced_config_map(NS, cm("c1")).metadata.resource_version
    latest = core.patch_namespaced_config_map("c1", NS, {"data": {"v": "2"}}).metadata.resource_version
    apiserver.call(apiserver.server.storage.compact(int(latest)))
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, resource_version=then, resource_version_match="Exact")
    assert err.value.status == 410
    body = status_of(err.value)
    assert body["reason"] == "Expired"
    assert body["message"] == "The resourceVersion for the provided list is too old."


def test_resource_version_match_without_a_resource_version_is_refused(core):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, resource_version_match="Exact")
    assert err.value.status == 422
    assert status_of(err.value)["reason"] == "Invalid"


def test_continue_after_compaction_is_a_410_asking_for_a_new_list(apiserver, core):
    for i in range(4):
        core.create_namespaced_config_map(NS, cm(f"p{i}"))
    first = core.list_namespaced_config_map(NS, limit=2)
    latest = core.create_namespaced_config_map(NS, cm("later")).metadata.resource_version
    apiserver.call(apiserver.server.storage.compact(int(latest)))
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS, limit=2, _continue=first.metadata._continue)
    assert err.value.status == 410
    body = status_of(err.value)
    assert body["reason"] == "Expired"
    assert body["message"].startswith("The provided continue parameter is too old to display a consistent list result.")
