"""ServiceAccount, TaintNodesByCondition and PodSecurity admission over HTTP,
against a real API server, with upstream's shapes and messages; PodSecurity's
enforce message also through the real kubectl."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage

POD = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def server(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), enable_admission_plugins=("TaintNodesByCondition",)) as s:
        yield s


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def make_ns(http, name: str, labels: dict | None = None) -> None:
    r = http.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": labels or {}}})
    assert r.status_code == 201, r.text


# -- ServiceAccount --------------------------------------------------------------------------------


def test_a_pod_gets_the_default_account_and_the_projected_token_volume_as_upstream(http):
    make_ns(http, "sa")
    assert http.post("/api/v1/namespaces/sa/serviceaccounts", json={"metadata": {"name": "default"}}).status_code == 201
    http.post("/api/v1/namespaces/sa/configmaps", json={"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "x"}})
    body = pod("p", initContainers=[{"name": "i", "image": "busybox"}])
    r = http.post("/api/v1/namespaces/sa/pods", json=body)
    assert r.status_code == 201, r.text
    spec = r.json()["spec"]
    assert spec["serviceAccountName"] == "default"
    (volume,) = spec["volumes"]
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", volume["name"])
    assert volume["projected"] == {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
        "defaultMode": 420,
    }
    mount = {"name": volume["name"], "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    assert spec["containers"][0]["volumeMounts"] == [mount]
    assert spec["initContainers"][0]["volumeMounts"] == [mount]


def test_automount_false_and_an_own_mount_at_the_path_are_respected(http):
    make_ns(http, "auto")
    http.post("/api/v1/namespaces/auto/serviceaccounts",
              json={"metadata": {"name": "default"}, "automountServiceAccountToken": False,
                    "imagePullSecrets": [{"name": "regcred"}]})
    r = http.post("/api/v1/namespaces/auto/pods", json=pod("off"))
    spec = r.json()["spec"]
    assert "volumes" not in spec and "volumeMounts" not in spec["containers"][0]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    r = http.post("/api/v1/namespaces/auto/pods", json=pod("on", automountServiceAccountToken=True))
    assert r.json()["spec"]["volumes"][0]["name"].startswith("kube-api-access-")
    own = pod("own", automountServiceAccountToken=True, volumes=[{"name": "mine", "emptyDir": {}}])
    own["spec"]["containers"][0]["volumeMounts"] = [{"name": "mine", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
    spec = http.post("/api/v1/namespaces/auto/pods", json=own).json()["spec"]
    assert [v["name"] for v in spec["volumes"]] == ["mine"]


def test_a_missing_named_account_is_refused_with_upstreams_message(http):
    r = http.post("/api/v1/namespaces/default/pods", json=pod("x", serviceAccountName="robot"))
    assert r.status_code == 403
    assert r.json()["message"] == 'pods "x" is forbidden: error looking up service account default/robot: serviceaccount "robot" not found'


def test_without_a_default_account_the_pod_is_admitted_without_a_token(http):
    r = http.post("/api/v1/namespaces/default/pods", json=pod("bare"))
    assert r.status_code == 201
    assert r.json()["spec"]["serviceAccountName"] == "default" and "volumes" not in r.json()["spec"]


def test_without_the_root_ca_configmap_the_ca_projection_is_optional(http):
    make_ns(http, "noca")
    http.post("/api/v1/namespaces/noca/serviceaccounts", json={"metadata": {"name": "default"}})
    spec = http.post("/api/v1/namespaces/noca/pods", json=pod("p")).json()["spec"]
    assert spec["volumes"][0]["projected"]["sources"][1]["configMap"]["optional"] is True


# -- TaintNodesByCondition -------------------------------------------------------------------------


def test_a_new_node_is_tainted_not_ready_once(http):
    r = http.post("/api/v1/nodes", json={"metadata": {"name": "n1"}})
    assert r.json()["spec"]["taints"] == [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    r = http.post("/api/v1/nodes", json={"metadata": {"name": "n2"}, "spec": {"taints": [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}, {"key": "a", "value": "b", "effect": "NoExecute"}]}})
    assert len(r.json()["spec"]["taints"]) == 2


# -- PodSecurity -----------------------------------------------------------------------------------

PRIVILEGED = {"metadata": {"name": "priv"}, "spec": {"hostNetwork": True, "containers": [
    {"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]}}


def test_baseline_enforce_refuses_a_privileged_pod_with_upstreams_message(server, http, tmp_path):
    make_ns(http, "base", {"pod-security.kubernetes.io/enforce": "baseline"})
    r = http.post("/api/v1/namespaces/base/pods", json=PRIVILEGED)
    assert r.status_code == 403
    assert r.json()["message"] == ('pods "priv" is forbidden: violates PodSecurity "baseline:latest": host namespaces '
                                   '(hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true)')
    assert http.post("/api/v1/namespaces/base/pods", json=pod("ok")).status_code == 201
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    out = kubectl.run("run", "priv", "-n", "base", "--image=busybox", "--privileged", check=False)
    assert out.returncode != 0
    assert ('Error from server (Forbidden): pods "priv" is forbidden: violates PodSecurity "baseline:latest": '
            'privileged (container "priv" must not set securityContext.privileged=true)') in out.stderr


def test_restricted_warns_and_lists_every_failed_check_in_upstreams_order(http):
    make_ns(http, "warned", {"pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "v1.32"})
    r = http.post("/api/v1/namespaces/warned/pods", json=pod("w"))
    assert r.status_code == 201
    warning = r.headers["Warning"]
    assert warning == ('299 - "would violate PodSecurity \\"restricted:v1.32\\": allowPrivilegeEscalation != false '
                       '(container \\"c\\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities '
                       '(container \\"c\\" must set securityContext.capabilities.drop=[\\"ALL\\"]), runAsNonRoot != true '
                       '(pod or container \\"c\\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container '
                       '\\"c\\" must set securityContext.seccompProfile.type to \\"RuntimeDefault\\" or \\"Localhost\\")"')


def test_a_restricted_compliant_pod_passes(http):
    make_ns(http, "strict", {"pod-security.kubernetes.io/enforce": "restricted"})
    good = pod("good", securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}})
    good["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    r = http.post("/api/v1/namespaces/strict/pods", json=good)
    assert r.status_code == 201, r.text
    assert "Warning" not in r.headers
    bad = pod("bad", volumes=[{"name": "h", "hostPath": {"path": "/"}}], securityContext={"runAsUser": 0})
    r = http.post("/api/v1/namespaces/strict/pods", json=bad)
    assert r.status_code == 403
    msg = r.json()["message"]
    assert 'restricted volume types (volume "h" uses restricted volume type "hostPath")' in msg
    assert "runAsUser=0 (pod must not set runAsUser=0)" in msg
    assert "hostPath volumes" not in msg  # replaced by the restricted check


def test_enforce_version_applies_the_checks_of_that_release(http):
    """runAsUser joined restricted in v1.23 and capabilities_restricted in v1.22; safe sysctls grew in v1.27/29/32."""
    root = pod("root", securityContext={"runAsNonRoot": True, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}})
    root["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    for version, allowed in (("v1.22", True), ("v1.23", False), ("latest", False)):
        name = f"r{version.replace('.', '-')}"
        make_ns(http, name, {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": version})
        r = http.post(f"/api/v1/namespaces/{name}/pods", json=root)
        assert (r.status_code == 201) is allowed, (version, r.text)
        if not allowed:
            assert r.json()["message"] == (f'pods "root" is forbidden: violates PodSecurity "restricted:{version}": '
                                           'runAsUser=0 (pod must not set runAsUser=0)')
    # before v1.22 a container need not drop ALL, but added capabilities are checked as baseline does
    make_ns(http, "caps21", {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.21"})
    lax = pod("lax", securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}})
    lax["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False}
    assert http.post("/api/v1/namespaces/caps21/pods", json=lax).status_code == 201
    lax["metadata"]["name"] = "raw"
    lax["spec"]["containers"][0]["securityContext"]["capabilities"] = {"add": ["NET_RAW"]}
    r = http.post("/api/v1/namespaces/caps21/pods", json=lax)
    assert r.status_code == 403 and 'non-default capabilities (container "c" must not include "NET_RAW"' in r.json()["message"]
    tuned = pod("tuned", securityContext={"sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}]})
    for version, allowed in (("v1.31", False), ("v1.32", True), ("v1.40", True)):  # a release past this server's is latest
        name = f"s{version.replace('.', '-')}"
        make_ns(http, name, {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": version})
        r = http.post(f"/api/v1/namespaces/{name}/pods", json=tuned)
        assert (r.status_code == 201) is allowed, (version, r.text)
    assert r.status_code == 201
    make_ns(http, "s1-26", {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "v1.26"})
    reserved = pod("reserved", securityContext={"sysctls": [{"name": "net.ipv4.ip_local_reserved_ports", "value": "30000"}]})
    r = http.post("/api/v1/namespaces/s1-26/pods", json=reserved)
    assert r.status_code == 403 and r.json()["message"].endswith(
        'violates PodSecurity "baseline:v1.26": forbidden sysctls (net.ipv4.ip_local_reserved_ports)')


def test_workloads_are_warned_about_never_refused(http):
    make_ns(http, "wl", {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "baseline"})
    dep = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
        "metadata": {"labels": {"a": "b"}}, "spec": PRIVILEGED["spec"]}}}
    r = http.post("/apis/apps/v1/namespaces/wl/deployments", json=dep)
    assert r.status_code == 201
    assert 'would violate PodSecurity \\"baseline:latest\\": host namespaces' in r.headers["Warning"]


def test_invalid_labels_are_refused_and_raising_enforce_warns_about_existing_pods(http):
    r = http.post("/api/v1/namespaces", json={"metadata": {"name": "bad", "labels": {"pod-security.kubernetes.io/enforce": "strict"}}})
    assert r.status_code == 422
    assert 'Invalid value: "strict": must be one of privileged, baseline, restricted' in r.json()["message"]
    make_ns(http, "grow")
    assert http.post("/api/v1/namespaces/grow/pods", json=PRIVILEGED).status_code == 201
    r = http.patch("/api/v1/namespaces/grow", content=b'{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"baseline"}}}',
                   headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200
    warnings = r.headers.get_list("Warning")
    assert warnings == ['299 - "existing pods in namespace \\"grow\\" violate the new PodSecurity enforce level \\"baseline:latest\\""',
                        '299 - "priv: host namespaces, privileged"']


def test_exemptions_and_defaults_from_the_admission_configuration(tmp_path):
    config = {"PodSecurity": {"apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
                              "defaults": {"enforce": "baseline"}, "exemptions": {"namespaces": ["kube-system"]}}}
    with ServerThread(sqlite_storage(str(tmp_path / "d")), admission_plugin_config=config) as s:
        r = httpx.post(f"{s.url}/api/v1/namespaces/default/pods", json=PRIVILEGED, timeout=30)
        assert r.status_code == 403 and 'violates PodSecurity "baseline:latest"' in r.json()["message"]
        r = httpx.post(f"{s.url}/api/v1/namespaces/kube-system/pods", json=PRIVILEGED, timeout=30)
        assert r.status_code == 201
