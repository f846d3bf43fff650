"""``kubectl patch`` (strategic, merge, json), ``label``, ``annotate``, ``scale``, ``set image``.

kubectl sends each of these as a PATCH with its own content type
(kubectl-wire.md, "PATCH Content-Types"); the assertions are on kubectl's
output and on the stored object read back through the official client.
"""

from __future__ import annotations

import json

import kubernetes
import pytest

from tests.e2e.conftest import NS, deployment, pod, rows


@pytest.fixture
def apps(sqlite_k8s) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(sqlite_k8s)


@pytest.fixture
def core(sqlite_k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(sqlite_k8s)


def two_container_deployment(apps: kubernetes.client.AppsV1Api) -> None:
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"] = [
        {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
        {"name": "side", "image": "busybox:1.36", "args": ["sleep", "1d"]},
    ]
    apps.create_namespaced_deployment(NS, body)


def test_strategic_patch_merges_containers_by_name(sqlite_kubectl, apps):
    two_container_deployment(apps)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox:1.37"}]}}}}
    out = sqlite_kubectl.run("patch", "deployment", "web", "-p", json.dumps(patch))
    assert out.stdout == "deployment.apps/web patched\n"
    containers = apps.read_namespaced_deployment("web", NS).spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [("web", "nginx:1.27"), ("side", "busybox:1.37")]
    assert containers[1].args == ["sleep", "1d"]
    assert containers[0].ports[0].container_port == 80

    same = sqlite_kubectl.run("patch", "deployment", "web", "-p", json.dumps(patch))
    assert same.stdout == "deployment.apps/web patched (no change)\n"

    delete = {"spec": {"template": {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}}}
    sqlite_kubectl.run("patch", "deployment", "web", "-p", json.dumps(delete))
    containers = apps.read_namespaced_deployment("web", NS).spec.template.spec.containers
    assert [c.name for c in containers] == ["web"]


def test_strategic_patch_merges_service_ports_by_port(sqlite_kubectl, core):
    core.create_namespaced_service(
        NS,
        {
            "metadata": {"name": "svc"},
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443}],
            },
        },
    )
    patch = {"spec": {"ports": [{"port": 443, "targetPort": 8443}, {"name": "metrics", "port": 9090}]}}
    assert sqlite_kubectl.run("patch", "service", "svc", "-p", json.dumps(patch)).stdout == "service/svc patched\n"
    ports = core.read_namespaced_service("svc", NS).spec.ports
    by_port = {p.port: (p.name, p.target_port, p.protocol) for p in ports}
    assert by_port == {80: ("http", 8080, "TCP"), 443: ("https", 8443, "TCP"), 9090: ("metrics", 9090, "TCP")}
    table = rows(sqlite_kubectl.run("get", "service", "svc").stdout)
    assert table[1][4] == "80/TCP,443/TCP,9090/TCP"


def test_merge_patch_replaces_lists_and_deletes_with_null(sqlite_kubectl, apps):
    two_container_deployment(apps)
    patch = {
        "metadata": {"labels": {"app": None, "tier": "front"}},
        "spec": {"template": {"spec": {"containers": [{"name": "only", "image": "nginx:1.28"}]}}},
    }
    out = sqlite_kubectl.run("patch", "deployment", "web", "--type=merge", "-p", json.dumps(patch))
    assert out.stdout == "deployment.apps/web patched\n"
    stored = apps.read_namespaced_deployment("web", NS)
    assert stored.metadata.labels == {"tier": "front"}
    # merge patch replaces the whole list (no merge keys)
    assert [(c.name, c.image) for c in stored.spec.template.spec.containers] == [("only", "nginx:1.28")]


def test_json_patch_applies_operations_and_a_failing_test_changes_nothing(sqlite_kubectl, apps):
    two_container_deployment(apps)
    ops = [
        {"op": "test", "path": "/spec/replicas", "value": 1},
        {"op": "replace", "path": "/spec/replicas", "value": 2},
        {"op": "add", "path": "/spec/template/spec/containers/1/args/-", "value": "--verbose"},
        {"op": "remove", "path": "/spec/template/spec/containers/0/ports"},
    ]
    out = sqlite_kubectl.run("patch", "deployment", "web", "--type=json", "-p", json.dumps(ops))
    assert out.stdout == "deployment.apps/web patched\n"
    stored = apps.read_namespaced_deployment("web", NS)
    assert stored.spec.replicas == 2
    assert stored.spec.template.spec.containers[1].args == ["sleep", "1d", "--verbose"]
    assert stored.spec.template.spec.containers[0].ports is None

    failing = [{"op": "test", "path": "/spec/replicas", "value": 5}, {"op": "replace", "path": "/spec/replicas", "value": 9}]
    result = sqlite_kubectl.run("patch", "deployment", "web", "--type=json", "-p", json.dumps(failing), check=False)
    assert result.returncode == 1
    # upstream's 422 carries no causes, so kubectl prints "The request is invalid: the server rejected our
    # request due to an error in our request"; k8py keeps the engine's reason as a cause (patch_errors.py)
    assert result.stderr == "The request is invalid: : testing value /spec/replicas failed: test failed\n"
    after = apps.read_namespaced_deployment("web", NS)
    assert after.metadata.resource_version == stored.metadata.resource_version
    assert after.spec.replicas == 2


def test_label_overwrite_and_removal(sqlite_kubectl, core):
    core.create_namespaced_pod(NS, pod("p1", {"app": "web"}))
    assert sqlite_kubectl.run("label", "pod", "p1", "tier=front").stdout == "pod/p1 labeled\n"
    refused = sqlite_kubectl.run("label", "pod", "p1", "app=db", check=False)
    assert refused.returncode == 1
    assert refused.stderr == "error: 'app' already has a value (web), and --overwrite is false\n"
    assert sqlite_kubectl.run("label", "pod", "p1", "app=db", "--overwrite").stdout == "pod/p1 labeled\n"
    assert core.read_namespaced_pod("p1", NS).metadata.labels == {"app": "db", "tier": "front"}
    assert sqlite_kubectl.run("label", "pod", "p1", "tier-").stdout == "pod/p1 unlabeled\n"
    assert core.read_namespaced_pod("p1", NS).metadata.labels == {"app": "db"}
    shown = rows(sqlite_kubectl.run("get", "pods", "--show-labels").stdout)
    assert shown[1][0] == "p1" and shown[1][-1] == "app=db"


def test_annotate_overwrite_and_removal(sqlite_kubectl, core):
    core.create_namespaced_pod(NS, pod("p1"))
    assert sqlite_kubectl.run("annotate", "pod", "p1", "team=blue", "note=hello world").stdout == "pod/p1 annotated\n"
    assert core.read_namespaced_pod("p1", NS).metadata.annotations == {"team": "blue", "note": "hello world"}
    refused = sqlite_kubectl.run("annotate", "pod", "p1", "team=red", check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        "error: --overwrite is false but found the following declared annotation(s): 'team' already has a value (blue)\n"
    )
    sqlite_kubectl.run("annotate", "pod", "p1", "team=red", "--overwrite")
    assert sqlite_kubectl.run("annotate", "pod", "p1", "note-").stdout == "pod/p1 annotated\n"
    assert core.read_namespaced_pod("p1", NS).metadata.annotations == {"team": "red"}


def test_scale_deployment_replicaset_and_statefulset(sqlite_kubectl, apps):
    apps.create_namespaced_deployment(NS, deployment("web"))
    rs = deployment("rs")
    rs.update(kind="ReplicaSet")
    del rs["spec"]["replicas"]
    apps.create_namespaced_replica_set(NS, rs)
    sts = deployment("db")
    sts.update(kind="StatefulSet")
    sts["spec"]["serviceName"] = "db"
    apps.create_namespaced_stateful_set(NS, sts)

    assert sqlite_kubectl.run("scale", "deployment", "web", "--replicas=3").stdout == "deployment.apps/web scaled\n"
    assert sqlite_kubectl.run("scale", "replicaset", "rs", "--replicas=2").stdout == "replicaset.apps/rs scaled\n"
    assert sqlite_kubectl.run("scale", "statefulset", "db", "--replicas=4").stdout == "statefulset.apps/db scaled\n"
    assert apps.read_namespaced_deployment("web", NS).spec.replicas == 3
    assert apps.read_namespaced_replica_set("rs", NS).spec.replicas == 2
    assert apps.read_namespaced_stateful_set("db", NS).spec.replicas == 4

    table = rows(sqlite_kubectl.run("get", "deploy").stdout)
    assert table[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1][:4] == ["web", "0/3", "0", "0"]
    assert rows(sqlite_kubectl.run("get", "rs", "rs").stdout)[1][:4] == ["rs", "2", "0", "0"]
    assert rows(sqlite_kubectl.run("get", "sts", "db").stdout)[1][:2] == ["db", "0/4"]

    # --current-replicas is a precondition kubectl checks against the Scale
    wrong = sqlite_kubectl.run("scale", "deployment", "web", "--current-replicas=7", "--replicas=1", check=False)
    assert wrong.returncode == 1
    assert wrong.stderr == "error: Expected replicas to be 7, was 3\n"
    assert apps.read_namespaced_deployment("web", NS).spec.replicas == 3


def test_set_image_changes_one_container(sqlite_kubectl, apps):
    two_container_deployment(apps)
    out = sqlite_kubectl.run("set", "image", "deployment/web", "web=nginx:1.29")
    assert out.stdout == "deployment.apps/web image updated\n"
    stored = apps.read_namespaced_deployment("web", NS)
    assert [(c.name, c.image) for c in stored.spec.template.spec.containers] == [
        ("web", "nginx:1.29"),
        ("side", "busybox:1.36"),
    ]
    assert stored.metadata.generation == 2
    missing = sqlite_kubectl.run("set", "image", "deployment/web", "nope=x", check=False)
    assert missing.returncode == 1
    assert missing.stderr == 'error: unable to find container named "nope"\n'
