"""The admission chain over HTTP: which plugins run, in which order, on which
operations, with which attributes (user, old object inside the update, dry
run, subresource kinds), and what their errors and warnings look like.

A recording plugin (a test probe appended to the real server's chain) sees
what the chain hands every plugin; everything else is the real server,
driven with httpx and the official client.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.admission.chain import AdmissionChain
from k8py.apiserver.admission.plugins import DEFAULT_ON, ORDER, AdmissionConfigError, enabled_names
from k8py.apiserver.admission.builtin import register_builtin_plugins
from tests.support.kube import official_client
from tests.support.servers import ServerThread, sqlite_storage

NS = "default"


class Recorder:
    """Records what each phase is given; optionally warns and mutates."""

    name = "Recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[str, AdmissionAttributes, Any, Any]] = []

    def handles(self, operation: Operation) -> bool:
        return True

    async def admit(self, a: AdmissionAttributes) -> None:
        self.seen.append(("admit", a, _copy(a.object), _copy(a.old_object)))
        if a.operation is Operation.CREATE and a.is_core("configmaps") and a.object is not None:
            a.object.setdefault("metadata", {}).setdefault("labels", {})["admitted"] = "yes"

    async def validate(self, a: AdmissionAttributes) -> None:
        self.seen.append(("validate", a, _copy(a.object), _copy(a.old_object)))
        if a.is_core("configmaps") and a.object is not None and (a.object.get("data") or {}).get("warn"):
            a.add_warning("configmap asked to be warned about")

    def ops(self, resource: str) -> list[tuple[str, str, str, str]]:
        return [(phase, a.operation.value, a.resource.resource, a.subresource) for phase, a, _, _ in self.seen
                if a.resource.resource == resource]


def _copy(obj: Any) -> Any:
    import copy
    return copy.deepcopy(obj)


@pytest.fixture
def server(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as s:
        yield s


@pytest.fixture
def recorder(server) -> Recorder:
    rec = Recorder()
    handlers = server.server.handlers
    handlers.admission = AdmissionChain([*handlers.admission.plugins, rec])
    return rec


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def test_the_default_chain_is_upstreams_defaults_in_upstreams_order(server):
    names = server.server.admission.names
    assert names[:1] == ["NamespaceLifecycle"]
    assert names == [n for n in ORDER if n in DEFAULT_ON and n in names]
    assert names.index("LimitRanger") < names.index("Priority") < names.index("DefaultTolerationSeconds") < names.index("ResourceQuota")
    assert "AlwaysDeny" not in names


def test_flags_pick_plugins_and_bad_names_are_refused_with_what_to_do():
    register_builtin_plugins()
    assert "ResourceQuota" not in enabled_names(disable=["ResourceQuota,Priority"])
    assert "Priority" not in enabled_names(disable=["ResourceQuota,Priority"])
    assert enabled_names(enable=["AlwaysDeny"])[-1] == "AlwaysDeny"  # always last, whatever the flag order
    with pytest.raises(AdmissionConfigError, match="'NoSuchPlugin' is unknown: known plugins are"):
        enabled_names(enable=["NoSuchPlugin"])
    with pytest.raises(AdmissionConfigError, match="overlapped"):
        enabled_names(enable=["AlwaysDeny"], disable=["AlwaysDeny"])
    with pytest.raises(AdmissionConfigError, match="not implemented in k8py"):
        enabled_names(enable=["ImagePolicyWebhook"])


def test_always_deny_refuses_writes_with_upstreams_message(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "d")), enable_admission_plugins=("AlwaysDeny",)) as s:
        r = httpx.post(f"{s.url}/api/v1/namespaces/default/configmaps",
                       json={"metadata": {"name": "x"}, "data": {}}, timeout=30)
        assert r.status_code == 403
        body = r.json()
        assert body["message"] == 'configmaps "x" is forbidden: admission control is denying all modifications'
        assert body["reason"] == "Forbidden" and body["details"] == {"name": "x", "kind": "configmaps"}
        assert httpx.get(f"{s.url}/api/v1/namespaces/default/configmaps/x", timeout=30).status_code == 404


def test_create_runs_mutating_then_validating_with_the_mutated_object_and_the_user(http, recorder):
    r = http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "a"}, "data": {"warn": "1"}})
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["labels"] == {"admitted": "yes"}  # the mutation is stored
    assert "configmap asked to be warned about" in r.headers.get("Warning", "")
    assert recorder.ops("configmaps") == [("admit", "CREATE", "configmaps", ""), ("validate", "CREATE", "configmaps", "")]
    _, attrs, validated, old = recorder.seen[-1]
    assert validated["metadata"]["labels"] == {"admitted": "yes"} and old is None
    assert attrs.user.name == "system:unsecured" and "system:masters" in attrs.user.groups
    assert attrs.kind == ("", "v1", "ConfigMap") and attrs.namespace == "default" and attrs.name == "a"
    assert attrs.options["kind"] == "CreateOptions" and not attrs.dry_run


def test_update_and_patch_see_the_stored_object_as_old(http, recorder):
    created = http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "u"}, "data": {"v": "1"}}).json()
    created["data"]["v"] = "2"
    assert http.put("/api/v1/namespaces/default/configmaps/u", json=created).status_code == 200
    r = http.patch("/api/v1/namespaces/default/configmaps/u", content=b'{"data":{"v":"3"}}',
                   headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    updates = [(phase, a, obj, old) for phase, a, obj, old in recorder.seen if a.operation is Operation.UPDATE]
    assert [(p, obj["data"]["v"], old["data"]["v"]) for p, _, obj, old in updates] == [
        ("admit", "2", "1"), ("validate", "2", "1"), ("admit", "3", "2"), ("validate", "3", "2")]
    assert updates[-1][1].options["kind"] == "PatchOptions"


def test_an_apply_or_put_that_creates_is_a_create(http, recorder):
    r = http.patch("/api/v1/namespaces/default/configmaps/applied?fieldManager=t",
                   content=b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"}}',
                   headers={"Content-Type": "application/apply-patch+yaml"})
    assert r.status_code == 201, r.text
    assert recorder.ops("configmaps")[-1] == ("validate", "CREATE", "configmaps", "")


def test_delete_is_admitted_with_the_object_as_old_and_dry_run_flagged(http, recorder):
    http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "d"}})
    assert http.delete("/api/v1/namespaces/default/configmaps/d?dryRun=All").status_code == 200
    _, attrs, obj, old = recorder.seen[-1]
    assert attrs.operation is Operation.DELETE and attrs.dry_run and obj is None and old["metadata"]["name"] == "d"
    assert attrs.options["kind"] == "DeleteOptions" and attrs.options["dryRun"] == ["All"]
    assert http.delete("/api/v1/namespaces/default/configmaps/d").status_code == 200
    assert recorder.ops("configmaps")[-2:] == [("admit", "DELETE", "configmaps", ""), ("validate", "DELETE", "configmaps", "")]


def test_deletecollection_admits_each_object(http, recorder):
    for n in ("c1", "c2"):
        http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": n, "labels": {"set": "x"}}})
    assert http.delete("/api/v1/namespaces/default/configmaps?labelSelector=set%3Dx").status_code == 200
    deleted = sorted(a.name for phase, a, _, _ in recorder.seen if a.operation is Operation.DELETE and phase == "validate")
    assert deleted == ["c1", "c2"]


def test_subresources_are_admitted_with_their_own_kinds(server, http, recorder):
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    assert http.post("/api/v1/namespaces/default/pods", json=pod).status_code == 201
    status = http.get("/api/v1/namespaces/default/pods/p").json()
    status["status"] = {"phase": "Pending", "message": "x"}
    assert http.put("/api/v1/namespaces/default/pods/p/status", json=status).status_code == 200
    r = http.post("/api/v1/namespaces/default/pods/p/binding",
                  json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}})
    assert r.status_code == 201, r.text
    r = http.post("/api/v1/namespaces/default/pods/p/eviction",
                  json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}})
    assert r.status_code == 201, r.text
    seen = [(a.operation.value, a.subresource, a.kind.kind) for phase, a, _, _ in recorder.seen
            if phase == "validate" and a.resource.resource == "pods"]
    assert seen == [("CREATE", "", "Pod"), ("UPDATE", "status", "Pod"), ("CREATE", "binding", "Binding"),
                    ("CREATE", "eviction", "Eviction")]
    binding = next(obj for phase, a, obj, _ in recorder.seen if a.subresource == "binding")
    assert binding["target"]["name"] == "n1"


def test_scale_is_admitted_as_a_scale_with_the_old_scale(http, recorder):
    dep = {"metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
           "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    assert http.post("/apis/apps/v1/namespaces/default/deployments", json=dep).status_code == 201
    r = http.patch("/apis/apps/v1/namespaces/default/deployments/web/scale", content=b'{"spec":{"replicas":3}}',
                   headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    phase, attrs, obj, old = recorder.seen[-1]
    assert (attrs.operation, attrs.subresource, attrs.kind) == (Operation.UPDATE, "scale", ("autoscaling", "v1", "Scale"))
    assert obj["kind"] == "Scale" and obj["spec"]["replicas"] == 3 and old["spec"]["replicas"] == 1


def test_exec_is_a_connect_with_its_options(http, recorder):
    http.post("/api/v1/namespaces/default/pods", json={"metadata": {"name": "e"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    http.post("/api/v1/namespaces/default/pods/e/exec?command=ls&command=-l&stdout=true&container=c")
    connects = [(a, obj) for phase, a, obj, _ in recorder.seen if a.operation is Operation.CONNECT and phase == "validate"]
    assert connects, "exec was not admitted"
    attrs, obj = connects[-1]
    assert attrs.subresource == "exec" and attrs.kind.kind == "PodExecOptions"
    assert obj == {"kind": "PodExecOptions", "apiVersion": "v1", "stdout": True, "container": "c", "command": ["ls", "-l"]}


def test_a_quota_charge_is_given_back_when_the_write_then_fails(server, http):
    quota = {"metadata": {"name": "q"}, "spec": {"hard": {"configmaps": "5"}}}
    assert http.post("/api/v1/namespaces/default/resourcequotas", json=quota).status_code == 201
    q = http.get("/api/v1/namespaces/default/resourcequotas/q").json()
    q["status"] = {"hard": {"configmaps": "5"}, "used": {"configmaps": "0"}}
    assert http.put("/api/v1/namespaces/default/resourcequotas/q/status", json=q).status_code == 200
    assert http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "one"}}).status_code == 201
    # the same name again: charged, then AlreadyExists, then given back
    assert http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "one"}}).status_code == 409
    used = http.get("/api/v1/namespaces/default/resourcequotas/q").json()["status"]["used"]
    assert used == {"configmaps": "1"}


def test_quota_is_checked_on_update_for_what_grows(server, http):
    quota = {"metadata": {"name": "lb"}, "spec": {"hard": {"services.loadbalancers": "0"}}}
    assert http.post("/api/v1/namespaces/default/resourcequotas", json=quota).status_code == 201
    q = http.get("/api/v1/namespaces/default/resourcequotas/lb").json()
    q["status"] = {"hard": {"services.loadbalancers": "0"}, "used": {"services.loadbalancers": "0"}}
    assert http.put("/api/v1/namespaces/default/resourcequotas/lb/status", json=q).status_code == 200
    svc = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
    assert http.post("/api/v1/namespaces/default/services", json=svc).status_code == 201
    r = http.patch("/api/v1/namespaces/default/services/s", content=b'{"spec":{"type":"LoadBalancer"}}',
                   headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 403, r.text
    assert r.json()["message"] == ('services "s" is forbidden: exceeded quota: lb, requested: services.loadbalancers=1, '
                                   'used: services.loadbalancers=0, limited: services.loadbalancers=0')
    assert http.get("/api/v1/namespaces/default/services/s").json()["spec"]["type"] == "ClusterIP"


def test_namespace_lifecycle_guards_creates_and_immortal_namespaces(http):
    r = http.post("/api/v1/namespaces/nowhere/configmaps", json={"metadata": {"name": "x"}})
    assert r.status_code == 404 and r.json()["message"] == 'namespaces "nowhere" not found'
    r = http.delete("/api/v1/namespaces/kube-system")
    assert r.status_code == 403 and r.json()["message"] == 'namespaces "kube-system" is forbidden: this namespace may not be deleted'
    assert http.post("/api/v1/namespaces", json={"metadata": {"name": "going"}}).status_code == 201
    assert http.delete("/api/v1/namespaces/going").status_code in (200, 202)  # Terminating
    r = http.post("/api/v1/namespaces/going/configmaps", json={"metadata": {"name": "late"}})
    assert r.status_code == 403
    body = r.json()
    assert body["message"] == 'configmaps "late" is forbidden: unable to create new content in namespace going because it is being terminated'
    assert body["details"]["causes"] == [{"reason": "NamespaceTerminating", "message": "namespace going is being terminated",
                                          "field": "metadata.namespace"}]


def test_disabled_plugins_do_not_run(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "d")), disable_admission_plugins=("NamespaceLifecycle",)) as s:
        assert "NamespaceLifecycle" not in s.server.admission.names
        r = httpx.delete(f"{s.url}/api/v1/namespaces/kube-public", timeout=30)
        assert r.status_code == 202  # Terminating: nothing guards the immortal namespaces any more, as upstream


def test_the_cli_refuses_to_start_on_an_unknown_plugin(tmp_path):
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-m", "k8py", "apiserver", "--data-dir", str(tmp_path), "--port", "0",
                             "--enable-admission-plugins", "NoSuch"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "admission plugin 'NoSuch' is unknown: known plugins are" in result.stderr
