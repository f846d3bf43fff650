"""``kubectl apply`` (client-side and server-side), ``diff`` and ``create`` field validation.

Each test drives the real kubectl against a k8py API server and asserts what
kubectl prints, then reads the stored object back through the official client.
"""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes
import pytest
import yaml

from tests.e2e.conftest import NS, deployment

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def write(tmp_path: Path, name: str, obj: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj))
    return str(path)


@pytest.fixture
def apps(k8s) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(k8s)


def test_client_side_apply_creates_configures_then_is_unchanged(kubectl, apps, tmp_path):
    manifest = deployment("web", replicas=2)
    path = write(tmp_path, "web.yaml", manifest)
    assert kubectl.run("apply", "-f", path).stdout == "deployment.apps/web created\n"
    created = apps.read_namespaced_deployment("web", NS)
    assert json.loads(created.metadata.annotations[LAST_APPLIED])["spec"]["replicas"] == 2

    manifest["spec"]["replicas"] = 3
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    manifest["metadata"]["labels"]["tier"] = "front"
    write(tmp_path, "web.yaml", manifest)
    assert kubectl.run("apply", "-f", path).stdout == "deployment.apps/web configured\n"
    configured = apps.read_namespaced_deployment("web", NS)
    assert configured.spec.replicas == 3
    assert configured.metadata.labels == {"app": "web", "tier": "front"}
    container = configured.spec.template.spec.containers[0]
    assert (container.name, container.image, container.ports[0].container_port) == ("web", "nginx:1.28", 80)
    last_applied = json.loads(configured.metadata.annotations[LAST_APPLIED])
    # kubectl itself leaves an empty annotations map in the annotation
    assert last_applied == {**manifest, "metadata": {**manifest["metadata"], "annotations": {}, "namespace": NS}}
    assert configured.metadata.generation == created.metadata.generation + 1

    unchanged = kubectl.run("apply", "-f", path)
    assert unchanged.stdout == "deployment.apps/web unchanged\n"
    again = apps.read_namespaced_deployment("web", NS)
    assert again.metadata.resource_version == configured.metadata.resource_version


def test_client_side_apply_removes_a_field_dropped_from_the_file(kubectl, apps, tmp_path):
    manifest = deployment("web")
    manifest["metadata"]["annotations"] = {"team": "blue", "keep": "yes"}
    path = write(tmp_path, "web.yaml", manifest)
    kubectl.run("apply", "-f", path)
    del manifest["metadata"]["annotations"]["team"]
    manifest["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    write(tmp_path, "web.yaml", manifest)
    assert kubectl.run("apply", "-f", path).stdout == "deployment.apps/web configured\n"
    stored = apps.read_namespaced_deployment("web", NS)
    assert "team" not in stored.metadata.annotations
    assert stored.metadata.annotations["keep"] == "yes"
    assert [c.name for c in stored.spec.template.spec.containers] == ["web", "side"]


def test_server_side_apply_twice_then_conflict_after_scale_and_force(kubectl, apps, tmp_path):
    manifest = deployment("ssa", replicas=2)
    path = write(tmp_path, "ssa.yaml", manifest)
    assert kubectl.run("apply", "--server-side", "-f", path).stdout == "deployment.apps/ssa serverside-applied\n"
    assert kubectl.run("apply", "--server-side", "-f", path).stdout == "deployment.apps/ssa serverside-applied\n"
    stored = apps.read_namespaced_deployment("ssa", NS)
    managers = {(m.manager, m.operation) for m in stored.metadata.managed_fields}
    assert ("kubectl", "Apply") in managers
    assert LAST_APPLIED not in (stored.metadata.annotations or {})

    assert kubectl.run("scale", "deployment", "ssa", "--replicas=5").stdout == "deployment.apps/ssa scaled\n"
    scaled = apps.read_namespaced_deployment("ssa", NS)
    entries = {(m.manager, m.operation, m.subresource): m for m in scaled.metadata.managed_fields}
    assert entries[("kubectl", "Update", "scale")].fields_v1 == {"f:spec": {"f:replicas": {}}}
    assert entries[("kubectl", "Update", "scale")].api_version == "apps/v1"
    manifest["spec"]["replicas"] = 3
    write(tmp_path, "ssa.yaml", manifest)
    conflict = kubectl.run("apply", "--server-side", "-f", path, check=False)
    assert conflict.returncode == 1
    assert conflict.stdout == ""
    assert conflict.stderr.startswith(
        'error: Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas\n'
    ), conflict.stderr
    assert "--force-conflicts" in conflict.stderr
    assert apps.read_namespaced_deployment("ssa", NS).spec.replicas == 5

    forced = kubectl.run("apply", "--server-side", "--force-conflicts", "-f", path)
    assert forced.stdout == "deployment.apps/ssa serverside-applied\n"
    forced_obj = apps.read_namespaced_deployment("ssa", NS)
    assert forced_obj.spec.replicas == 3
    # the scale entry owned only .spec.replicas: it is gone
    assert {(m.manager, m.operation, m.subresource) for m in forced_obj.metadata.managed_fields} == {
        ("kubectl", "Apply", None)
    }


def test_apply_dry_run_server_stores_nothing(kubectl, apps, tmp_path):
    path = write(tmp_path, "dry.yaml", deployment("dry"))
    assert kubectl.run("apply", "--dry-run=server", "-f", path).stdout == "deployment.apps/dry created (server dry run)\n"
    assert apps.list_namespaced_deployment(NS).items == []
    kubectl.run("apply", "-f", path)
    before = apps.read_namespaced_deployment("dry", NS)
    changed = deployment("dry", replicas=4)
    write(tmp_path, "dry.yaml", changed)
    assert (
        kubectl.run("apply", "--dry-run=server", "-f", path).stdout
        == "deployment.apps/dry configured (server dry run)\n"
    )
    after = apps.read_namespaced_deployment("dry", NS)
    assert after.metadata.resource_version == before.metadata.resource_version
    assert after.spec.replicas == 1


def test_diff_exits_zero_when_equal_and_one_with_a_diff(kubectl, tmp_path):
    manifest = deployment("d")
    path = write(tmp_path, "d.yaml", manifest)
    kubectl.run("apply", "-f", path)
    same = kubectl.run("diff", "-f", path, check=False)
    assert (same.returncode, same.stdout) == (0, ""), same.stderr
    manifest["spec"]["replicas"] = 7
    write(tmp_path, "d.yaml", manifest)
    differs = kubectl.run("diff", "-f", path, check=False)
    assert differs.returncode == 1, differs.stderr
    changed = [line for line in differs.stdout.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert "-  replicas: 1" in changed and "+  replicas: 7" in changed
    # generation is bumped in the dry-run result, as upstream
    assert "-  generation: 1" in changed and "+  generation: 2" in changed


def test_create_with_an_unknown_field_is_the_strict_decoding_error(kubectl, k8s, tmp_path):
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "strict"},
        "spec": {"containers": [{"name": "main", "image": "busybox", "bogusField": 1}]},
    }
    path = write(tmp_path, "pod.yaml", manifest)
    result = kubectl.run("create", "-f", path, check=False)
    assert result.returncode == 1
    assert result.stderr == (
        f'Error from server (BadRequest): error when creating "{path}": Pod in version "v1" cannot be handled as a Pod: '
        'strict decoding error: unknown field "spec.containers[0].bogusField"\n'
    )
    assert kubernetes.client.CoreV1Api(k8s).list_namespaced_pod(NS).items == []


def test_create_validate_warn_prints_the_warning_and_validate_false_is_silent(kubectl, k8s, tmp_path):
    core = kubernetes.client.CoreV1Api(k8s)
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "warned"},
        "spec": {"containers": [{"name": "main", "image": "busybox", "bogusField": 1}]},
    }
    path = write(tmp_path, "pod.yaml", manifest)
    warned = kubectl.run("create", "--validate=warn", "-f", path)
    assert warned.stdout == "pod/warned created\n"
    assert warned.stderr == 'Warning: unknown field "spec.containers[0].bogusField"\n'
    manifest["metadata"]["name"] = "ignored"
    write(tmp_path, "pod.yaml", manifest)
    ignored = kubectl.run("create", "--validate=false", "-f", path)
    assert (ignored.stdout, ignored.stderr) == ("pod/ignored created\n", "")
    assert sorted(p.metadata.name for p in core.list_namespaced_pod(NS).items) == ["ignored", "warned"]
    assert core.read_namespaced_pod("warned", NS).spec.containers[0].image == "busybox"
