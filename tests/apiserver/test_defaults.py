"""Upstream defaulting: what a real API server stores for minimal manifests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from k8py.apiserver.defaults import apply_defaults, image_pull_policy


def _defaulted(group: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    apply_defaults(group, "v1", kind, out)
    return out


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.27", "IfNotPresent"),
        ("localhost:5000/nginx", "Always"),
        ("localhost:5000/nginx:1.0", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
        ("registry.k8s.io/pause:3.9", "IfNotPresent"),
    ],
)
def test_image_pull_policy_depends_on_the_tag(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


def test_minimal_pod_gets_the_spec_defaults_a_real_cluster_stores() -> None:
    spec = _defaulted("", "Pod", _pod())["spec"]
    assert spec == {
        "containers": [{
            "name": "c", "image": "nginx", "imagePullPolicy": "Always",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "resources": {},
        }],
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
    }
    # priority and preemptionPolicy come from the Priority admission step on create
    # (tests/scheduler/test_integration_preemption.py), not from defaulting


def test_pod_defaults_never_override_what_the_user_set() -> None:
    pod = _pod(restartPolicy="Never", terminationGracePeriodSeconds=0, enableServiceLinks=False,
               dnsPolicy="Default")
    pod["spec"]["containers"][0]["imagePullPolicy"] = "Never"
    spec = _defaulted("", "Pod", pod)["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["terminationGracePeriodSeconds"] == 0
    assert spec["enableServiceLinks"] is False
    assert spec["dnsPolicy"] == "Default"
    assert spec["containers"][0]["imagePullPolicy"] == "Never"


def test_container_ports_probes_and_env_field_refs_are_defaulted() -> None:
    pod = _pod()
    pod["spec"]["containers"][0].update({
        "ports": [{"containerPort": 80}],
        "livenessProbe": {"httpGet": {"port": 80}},
        "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
        "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
    })
    c = _defaulted("", "Pod", pod)["spec"]["containers"][0]
    assert c["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert c["livenessProbe"] == {
        "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3,
    }
    assert c["readinessProbe"]["periodSeconds"] == 5
    assert c["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "spec.nodeName", "apiVersion": "v1"}


def test_host_network_pods_publish_container_ports_on_the_host() -> None:
    pod = _pod(hostNetwork=True)
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    port = _defaulted("", "Pod", pod)["spec"]["containers"][0]["ports"][0]
    assert port == {"containerPort": 8080, "protocol": "TCP", "hostPort": 8080}


def test_volumes_get_default_modes_and_an_empty_dir_when_sourceless() -> None:
    pod = _pod(volumes=[
        {"name": "a"},
        {"name": "b", "configMap": {"name": "cm"}},
        {"name": "c", "secret": {"secretName": "s", "defaultMode": 256}},
        {"name": "d", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
    ])
    volumes = _defaulted("", "Pod", pod)["spec"]["volumes"]
    assert volumes[0] == {"name": "a", "emptyDir": {}}
    assert volumes[1]["configMap"] == {"name": "cm", "defaultMode": 420}
    assert volumes[2]["secret"]["defaultMode"] == 256
    assert volumes[3]["projected"] == {
        "sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 3600}}],
        "defaultMode": 420,
    }


def test_requests_default_to_limits_on_pods_but_not_on_templates() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"},
                                                 "requests": {"cpu": "500m"}}
    resources = _defaulted("", "Pod", pod)["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "500m", "memory": "1Gi"}
    deploy = {"spec": {"template": {"spec": copy.deepcopy(pod["spec"])}}}
    del deploy["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    template = _defaulted("apps", "Deployment", deploy)["spec"]["template"]["spec"]
    assert "requests" not in template["containers"][0]["resources"]
    assert "enableServiceLinks" not in template
    assert "priority" not in template


def test_deployment_defaults() -> None:
    d = _defaulted("apps", "Deployment", {"spec": {"selector": {"matchLabels": {"a": "b"}},
                   "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}})
    spec = d["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    tspec = spec["template"]["spec"]
    assert tspec["restartPolicy"] == "Always"
    assert tspec["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_recreate_deployment_gets_no_rolling_update_block() -> None:
    spec = _defaulted("apps", "Deployment", {"spec": {"strategy": {"type": "Recreate"}, "replicas": 0}})["spec"]
    assert spec["strategy"] == {"type": "Recreate"}
    assert spec["replicas"] == 0


@pytest.mark.parametrize(
    ("group", "kind", "expected"),
    [
        ("apps", "ReplicaSet", {"replicas": 1}),
        ("apps", "DaemonSet", {
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "revisionHistoryLimit": 10,
        }),
        ("apps", "StatefulSet", {
            "replicas": 1, "podManagementPolicy": "OrderedReady", "revisionHistoryLimit": 10,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
        }),
        ("batch", "Job", {
            "completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
            "suspend": False, "podReplacementPolicy": "TerminatingOrFailed",
        }),
        ("batch", "CronJob", {
            "concurrencyPolicy": "Allow", "suspend": False,
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
        }),
    ],
)
def test_workload_spec_defaults(group: str, kind: str, expected: dict[str, Any]) -> None:
    spec = _defaulted(group, kind, {"spec": {}})["spec"]
    assert spec == expected


def test_job_with_parallelism_only_keeps_completions_unset() -> None:
    spec = _defaulted("batch", "Job", {"spec": {"parallelism": 3}})["spec"]
    assert "completions" not in spec
    assert spec["parallelism"] == 3


def test_job_with_pod_failure_policy_replaces_only_failed_pods() -> None:
    spec = _defaulted("batch", "Job", {"spec": {"podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}})["spec"]
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


def test_job_copies_template_labels_when_it_has_none() -> None:
    job = {"metadata": {"name": "j"}, "spec": {"template": {"metadata": {"labels": {"app": "x"}},
           "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}}
    out = _defaulted("batch", "Job", job)
    assert out["metadata"]["labels"] == {"app": "x"}
    assert out["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert out["spec"]["template"]["spec"]["dnsPolicy"] == "ClusterFirst"


def test_cron_job_template_pod_spec_is_defaulted_but_not_job_fields() -> None:
    cron = {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}}
    job_spec = _defaulted("batch", "CronJob", cron)["spec"]["jobTemplate"]["spec"]
    assert "backoffLimit" not in job_spec
    assert job_spec["template"]["spec"]["schedulerName"] == "default-scheduler"


def test_service_defaults() -> None:
    svc = {"spec": {"selector": {"app": "x"}, "ports": [{"port": 80}, {"port": 443, "targetPort": "https"}]}}
    spec = _defaulted("", "Service", svc)["spec"]
    assert spec == {
        "selector": {"app": "x"},
        "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                  {"port": 443, "targetPort": "https", "protocol": "TCP"}],
        "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy": "Cluster",
        "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
    }


def test_load_balancer_and_external_name_services() -> None:
    lb = _defaulted("", "Service", {"spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                    "sessionAffinity": "ClientIP"}})["spec"]
    assert lb["externalTrafficPolicy"] == "Cluster"
    assert lb["allocateLoadBalancerNodePorts"] is True
    assert lb["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    ext = _defaulted("", "Service", {"spec": {"type": "ExternalName", "externalName": "a.b"}})["spec"]
    assert "ipFamilies" not in ext and "internalTrafficPolicy" not in ext


def test_namespace_gets_its_name_label_and_active_phase() -> None:
    ns = _defaulted("", "Namespace", {"metadata": {"name": "team-a", "labels": {"x": "y"}}})
    assert ns["metadata"]["labels"] == {"x": "y", "kubernetes.io/metadata.name": "team-a"}
    assert ns["status"] == {"phase": "Active"}


def test_secret_type_defaults_to_opaque_and_endpoint_slice_ports_to_tcp() -> None:
    assert _defaulted("", "Secret", {"data": {}})["type"] == "Opaque"
    assert _defaulted("", "Secret", {"type": "kubernetes.io/tls"})["type"] == "kubernetes.io/tls"
    slice_ = _defaulted("discovery.k8s.io", "EndpointSlice", {"ports": [{"port": 80}]})
    assert slice_["ports"] == [{"port": 80, "name": "", "protocol": "TCP"}]


def test_unknown_kinds_and_malformed_objects_are_left_alone() -> None:
    cr = {"spec": {"x": 1}}
    assert _defaulted("stable.example.com", "CronTab", cr) == cr
    bad = {"spec": {"containers": "not-a-list", "volumes": [1, "x"]}}
    out = _defaulted("", "Pod", bad)
    assert out["spec"]["containers"] == "not-a-list"
    assert _defaulted("apps", "Deployment", {"spec": "oops"}) == {"spec": "oops"}
