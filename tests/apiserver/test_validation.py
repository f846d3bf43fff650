"""Semantic validation: upstream field paths and messages for the kinds clients use."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from k8py.api.errors import Invalid
from k8py.apiserver.defaults import apply_defaults
from k8py.apiserver.validation import validate
from k8py.apiserver.validation.batch import schedule_errors

Obj = dict[str, Any]


def _pod() -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}


def _template(labels: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"labels": labels if labels is not None else {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}


def _deployment() -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": _template()}}


def _job() -> Obj:
    t = _template({"job": "x"})
    t["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": t}}


def _service() -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}


def _cron() -> Obj:
    job = _job()["spec"]
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": job}}}


_GROUPS = {"Pod": "", "Service": "", "ConfigMap": "", "Secret": "", "Deployment": "apps",
           "ReplicaSet": "apps", "DaemonSet": "apps", "StatefulSet": "apps", "ControllerRevision": "apps", "Job": "batch",
           "CronJob": "batch"}


def _errors(obj: Obj, old: Obj | None = None) -> list[str]:
    kind = obj["kind"]
    group = _GROUPS[kind]
    obj = copy.deepcopy(obj)
    apply_defaults(group, "v1", kind, obj)
    return [f"{c.field}: {c.message}" if c.field else c.message for c in validate(group, kind, obj, old)]


def _edit(make: Callable[[], Obj], change: Callable[[Obj], Any]) -> Obj:
    obj = make()
    change(obj)
    return obj


@pytest.mark.parametrize("make", [_pod, _deployment, _job, _service, _cron])
def test_minimal_valid_objects_have_no_errors(make: Callable[[], Obj]) -> None:
    assert _errors(make()) == []


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (_edit(_pod, lambda p: p["spec"].update(containers=[])), ["spec.containers: Required value"]),
        (_edit(_pod, lambda p: p["spec"]["containers"][0].pop("image")),
         ["spec.containers[0].image: Required value"]),
        (_edit(_pod, lambda p: p["spec"]["containers"][0].update(name="")),
         ["spec.containers[0].name: Required value"]),
        (_edit(_pod, lambda p: p["spec"]["containers"][0].update(name="Web")),
         ["spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label must consist of "
          "lower case alphanumeric characters or '-', and must start and end with an alphanumeric "
          "character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
        (_edit(_pod, lambda p: p["spec"]["containers"].append({"name": "c", "image": "x"})),
         ['spec.containers[1].name: Duplicate value: "c"']),
        (_edit(_pod, lambda p: p["spec"].update(restartPolicy="Sometimes")),
         ['spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"']),
        (_edit(_pod, lambda p: p["spec"]["containers"][0].update(ports=[{"containerPort": 70000, "protocol": "HTTP"}])),
         ["spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
          'spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"']),
        (_edit(_pod, lambda p: p["spec"]["containers"][0].update(imagePullPolicy="Sometimes")),
         ['spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"']),
        (_edit(_pod, lambda p: p["spec"]["containers"][0].update(volumeMounts=[{"name": "data", "mountPath": "/d"}])),
         ['spec.containers[0].volumeMounts[0].name: Not found: "data"']),
        (_edit(_pod, lambda p: p["spec"].update(volumes=[{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}])),
         ['spec.volumes[1].name: Duplicate value: "v"']),
        (_edit(_pod, lambda p: p["spec"].update(activeDeadlineSeconds=0)),
         ["spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"]),
    ],
)
def test_pod_spec_errors(obj: Obj, expected: list[str]) -> None:
    assert _errors(obj) == expected


def test_invalid_error_message_joins_causes_like_upstream() -> None:
    pod = _edit(_pod, lambda p: p["spec"].update(containers=[{"name": "", "image": ""}]))
    obj = copy.deepcopy(pod)
    apply_defaults("", "v1", "Pod", obj)
    err = Invalid.for_object("Pod", "p", validate("", "Pod", obj))
    assert err.message == (
        'Pod "p" is invalid: [spec.containers[0].name: Required value, '
        "spec.containers[0].image: Required value]"
    )


def _running(pod: Obj) -> Obj:
    apply_defaults("", "v1", "Pod", pod)
    return pod


def test_pod_update_may_change_images_and_lower_the_deadline() -> None:
    old = _running(_edit(_pod, lambda p: p["spec"].update(activeDeadlineSeconds=100)))
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "nginx:1.28"
    new["spec"]["activeDeadlineSeconds"] = 50
    new["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    assert _errors(new, old) == []


def test_pod_update_of_other_spec_fields_is_forbidden() -> None:
    old = _running(_pod())
    new = copy.deepcopy(old)
    new["spec"]["restartPolicy"] = "Never"
    [error] = _errors(new, old)
    assert error.startswith(
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
        "to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
        "previously negative)\n"
    )
    assert '- spec.restartPolicy: "Always"\n+ spec.restartPolicy: "Never"' in error


def test_pod_update_may_not_raise_the_deadline_or_change_tolerations() -> None:
    old = _running(_edit(_pod, lambda p: p["spec"].update(
        activeDeadlineSeconds=10, tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}])))
    raised = copy.deepcopy(old)
    raised["spec"]["activeDeadlineSeconds"] = 20
    assert _errors(raised, old) == [
        "spec.activeDeadlineSeconds: Invalid value: 20: must be less than or equal to previous value"]
    changed = copy.deepcopy(old)
    changed["spec"]["tolerations"] = [{"key": "other", "operator": "Exists"}]
    assert _errors(changed, old) == [
        "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (_edit(_deployment, lambda d: d["spec"].pop("selector")),
         ["spec.selector: Required value",
          'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: `selector` does not match template `labels`']),
        (_edit(_deployment, lambda d: d["spec"].update(selector={"matchLabels": {"app": "other"}})),
         ['spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: `selector` does not match template `labels`']),
        (_edit(_deployment, lambda d: d["spec"].update(selector={})),
         ["spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
          "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"]),
        (_edit(_deployment, lambda d: d["spec"].update(replicas=-1)),
         ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]),
        (_edit(_deployment, lambda d: d["spec"]["template"]["spec"].update(restartPolicy="Never")),
         ['spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"']),
        (_edit(_deployment, lambda d: d["spec"].update(strategy={"type": "Recreate", "rollingUpdate": {}})),
         ["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]),
        (_edit(_deployment, lambda d: d["spec"].update(strategy={"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}})),
         ["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"]),
        (_edit(_deployment, lambda d: d["spec"].update(strategy={"rollingUpdate": {"maxUnavailable": "150%"}})),
         ["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 150%: must not be greater than 100%"]),
        (_edit(_deployment, lambda d: d["spec"].update(minReadySeconds=30, progressDeadlineSeconds=10)),
         ["spec.progressDeadlineSeconds: Invalid value: 10: must be greater than minReadySeconds"]),
        (_edit(_deployment, lambda d: d["spec"]["selector"].update(matchExpressions=[{"key": "tier", "operator": "In"}])),
         ["spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"]),
    ],
)
def test_deployment_errors(obj: Obj, expected: list[str]) -> None:
    assert _errors(obj) == expected


def test_deployment_selector_is_immutable() -> None:
    old = _deployment()
    apply_defaults("apps", "v1", "Deployment", old)
    new = copy.deepcopy(old)
    new["spec"]["selector"] = {"matchLabels": {"app": "web", "v": "2"}}
    new["spec"]["template"]["metadata"]["labels"]["v"] = "2"
    assert _errors(new, old) == [
        'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web", "v":"2"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
    ]
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 5
    assert _errors(scaled, old) == []


def test_daemon_set_and_stateful_set_rules() -> None:
    ds = {"kind": "DaemonSet", "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": _template(),
          "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}}}}
    assert _errors(ds) == [
        "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero"]
    sts = {"kind": "StatefulSet", "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": _template(),
           "serviceName": "web", "podManagementPolicy": "Random"}}
    assert _errors(sts) == ["spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"]
    sts["spec"]["podManagementPolicy"] = "Parallel"
    old = copy.deepcopy(sts)
    apply_defaults("apps", "v1", "StatefulSet", old)
    sts["spec"]["serviceName"] = "other"
    [error] = _errors(sts, old)
    assert error.startswith("spec: Forbidden: updates to statefulset spec for fields other than 'replicas'")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (_edit(_job, lambda j: j["spec"]["template"]["spec"].pop("restartPolicy")),
         ['spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']),
        (_edit(_job, lambda j: j["spec"].update(parallelism=-1, backoffLimit=-2)),
         ["spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
          "spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0"]),
        (_edit(_job, lambda j: j["spec"].update(completionMode="Indexed", completions=None, parallelism=2)),
         ["spec.completions: Required value: when completion mode is Indexed"]),
        (_edit(_job, lambda j: j["spec"].update(manualSelector=True)), ["spec.selector: Required value"]),
        (_edit(_job, lambda j: j["spec"].update(selector={"matchLabels": {"job": "y"}})),
         ['spec.template.metadata.labels: Invalid value: map[string]string{"job":"x"}: `selector` does not match template `labels`']),
    ],
)
def test_job_errors(obj: Obj, expected: list[str]) -> None:
    assert _errors(obj) == expected


def test_controller_revision_data_is_mandatory_then_immutable() -> None:
    rev = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "web-1", "namespace": "default"},
           "revision": 1, "data": {"spec": {"template": {"$patch": "replace"}}}}
    assert _errors(rev) == []
    assert _errors(_edit(lambda: copy.deepcopy(rev), lambda r: r.update(data=None, revision=-1))) == [
        "data: Required value: data is mandatory", "revision: Invalid value: -1: must be greater than or equal to 0"]
    renumbered = _edit(lambda: copy.deepcopy(rev), lambda r: r.update(revision=3))
    assert _errors(renumbered, rev) == []
    changed = _edit(lambda: copy.deepcopy(rev), lambda r: r.update(data={"spec": {}}))
    assert [e.split(":")[0] for e in _errors(changed, rev)] == ["data"]
    assert _errors(changed, rev)[0].endswith("field is immutable")


def test_job_template_and_completions_are_immutable() -> None:
    old = _job()
    apply_defaults("batch", "v1", "Job", old)
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox"
    new["spec"]["completions"] = 3
    errors = _errors(new, old)
    assert errors[0] == "spec.completions: Invalid value: 3: field is immutable"
    assert errors[1].startswith("spec.template: Invalid value: ")
    assert errors[1].endswith(": field is immutable")
    suspended = copy.deepcopy(old)
    suspended["spec"]["suspend"] = True
    assert _errors(suspended, old) == []


@pytest.mark.parametrize(
    ("schedule", "errors"),
    [
        ("*/5 * * * *", []),
        ("0 0 1 JAN-MAR MON", []),
        ("@hourly", []),
        ("@every 1h30m", []),
        ("bad", ["expected exactly 5 fields, found 1: [bad]"]),
        ("61 * * * *", ["end of range (61) above maximum (59): 61"]),
        ("*/0 * * * *", ["step of range should be a positive number: */0"]),
        ("@sometimes", ["unrecognized descriptor: @sometimes"]),
    ],
)
def test_cron_schedules_parse_like_robfig_cron(schedule: str, errors: list[str]) -> None:
    assert schedule_errors(schedule) == errors


def test_cron_job_errors() -> None:
    cron = _edit(_cron, lambda c: c["spec"].update(schedule="bad", concurrencyPolicy="Sometimes"))
    cron["metadata"]["name"] = "n" * 53
    cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert _errors(cron) == [
        f'metadata.name: Invalid value: "{"n" * 53}": must be no more than 52 characters',
        'spec.schedule: Invalid value: "bad": expected exactly 5 fields, found 1: [bad]',
        'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"',
        'spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"',
    ]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (_edit(_service, lambda s: s["spec"].update(ports=[])), ["spec.ports: Required value"]),
        (_edit(_service, lambda s: s["spec"].update(ports=[{"port": 0}])),
         ["spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
          "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive"]),
        (_edit(_service, lambda s: s["spec"].update(ports=[{"port": 80}, {"port": 443}])),
         ["spec.ports[0].name: Required value", "spec.ports[1].name: Required value"]),
        (_edit(_service, lambda s: s["spec"].update(ports=[{"name": "a", "port": 80}, {"name": "a", "port": 81}])),
         ['spec.ports[1].name: Duplicate value: "a"']),
        (_edit(_service, lambda s: s["spec"].update(type="Magic")),
         ['spec.type: Unsupported value: "Magic": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"']),
        (_edit(_service, lambda s: s["spec"]["ports"][0].update(nodePort=30080)),
         ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]),
        (_edit(_service, lambda s: s["spec"]["ports"][0].update(targetPort="very-long-port-name")),
         ['spec.ports[0].targetPort: Invalid value: "very-long-port-name": must be no more than 15 characters']),
        (_edit(_service, lambda s: s["spec"].update(type="ExternalName", ports=[])),
         ["spec.externalName: Required value"]),
        (_edit(_service, lambda s: s["spec"].update(clusterIP="None", ports=[])), []),
    ],
)
def test_service_errors(obj: Obj, expected: list[str]) -> None:
    assert _errors(obj) == expected


def test_service_cluster_ip_may_not_change_once_set() -> None:
    old = _edit(_service, lambda s: s["spec"].update(clusterIP="10.96.0.10", clusterIPs=["10.96.0.10"]))
    apply_defaults("", "v1", "Service", old)
    new = copy.deepcopy(old)
    new["spec"].update(clusterIP="10.96.0.11", clusterIPs=["10.96.0.11"])
    assert _errors(new, old) == ['spec.clusterIPs[0]: Invalid value: []string{"10.96.0.11"}: may not change once set']
    kept = copy.deepcopy(old)
    del kept["spec"]["clusterIP"], kept["spec"]["clusterIPs"]
    assert _errors(kept, old) == []


def test_config_map_and_secret_rules() -> None:
    cm = {"kind": "ConfigMap", "data": {"bad key": "x", "ok.key": "y"}}
    assert _errors(cm) == [
        "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, "
        "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"]
    frozen = {"kind": "ConfigMap", "immutable": True, "data": {"a": "1"}}
    changed = {"kind": "ConfigMap", "immutable": True, "data": {"a": "2"}}
    assert _errors(changed, frozen) == ["data: Forbidden: field is immutable when `immutable` is set"]
    tls = {"kind": "Secret", "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}}
    assert _errors(tls) == ["data[tls.key]: Required value"]
    retyped = {"kind": "Secret", "type": "Opaque", "data": {}}
    assert _errors(retyped, {"kind": "Secret", "type": "kubernetes.io/basic-auth", "data": {"username": "eA=="}}) == [
        'type: Invalid value: "Opaque": field is immutable']


def test_unknown_kinds_and_garbage_validate_without_raising() -> None:
    assert validate("stable.example.com", "CronTab", {"spec": 1}) == []
    assert validate("apps", "Deployment", {"spec": "x"}) == [
        type(validate("apps", "Deployment", {"spec": "x"})[0])("FieldValueRequired", "Required value", "spec")]
    assert validate("", "Pod", {"spec": {"containers": "x", "volumes": [1]}})  # reports, does not raise
