"""Upstream defaulting for the built-in kinds (``SetDefaults_*`` in
``pkg/apis/<group>/<version>/defaults.go``), applied in place on create and update.

Why: clients read back what a real API server stores. ``kubectl get -o yaml``,
``kubectl diff`` and controllers compare against defaulted objects
(``imagePullPolicy: IfNotPresent``, ``strategy.rollingUpdate.maxSurge: 25%``),
and validation runs after defaulting, so some rules (a Job's ``restartPolicy``)
only make sense on defaulted input.

Rules kept from upstream:

* a default is applied only where the field is absent (``None`` counts as
  absent, as a nil pointer does in Go); a value the user set, even an invalid
  one, is left for validation to reject;
* pod-template defaults (``SetDefaults_PodSpec``, containers, volumes, probes)
  apply to every embedded template; defaults that upstream sets only on a
  ``Pod`` (``SetDefaults_Pod``: ``enableServiceLinks``, requests from limits)
  do not apply to templates;
* a few values real clusters always show come from admission or the REST layer
  rather than ``defaults.go``; they are marked where they are set
  (``priority``, ``preemptionPolicy``, a Service's ``ipFamilies``).

Never raises on malformed input (a string where an object belongs): it skips
what it cannot default and leaves the rest to validation.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["apply_defaults", "default_pod_spec", "default_container", "image_pull_policy"]

Object = dict[str, Any]


def _obj(parent: Object, key: str) -> Object | None:
    """``parent[key]`` as a dict, created when absent; None if it is not one."""
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    return value if isinstance(value, dict) else None


def _set(obj: Object, key: str, value: Any) -> None:
    if obj.get(key) is None:
        obj[key] = value


def _dicts(value: Any) -> list[Object]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# --- core/v1: containers, probes, volumes, pod spec ---------------------------


def image_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or no tag, else ``IfNotPresent`` (a digest
    pins the image). The tag is after the last ``:`` past the last ``/``."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    _set(probe, "timeoutSeconds", 1)
    _set(probe, "periodSeconds", 10)
    _set(probe, "successThreshold", 1)
    _set(probe, "failureThreshold", 3)
    http = probe.get("httpGet")
    if isinstance(http, dict):
        _set(http, "path", "/")
        _set(http, "scheme", "HTTP")
    grpc = probe.get("grpc")
    if isinstance(grpc, dict):
        _set(grpc, "service", "")


def _default_field_ref(holder: Any) -> None:
    if isinstance(holder, dict) and isinstance(holder.get("fieldRef"), dict):
        _set(holder["fieldRef"], "apiVersion", "v1")


def default_container(container: Object, *, host_network: bool = False) -> None:
    """``SetDefaults_Container`` plus its ports, probes, lifecycle and env."""
    image = container.get("image")
    if container.get("imagePullPolicy") is None and isinstance(image, str):
        container["imagePullPolicy"] = image_pull_policy(image)
    _set(container, "terminationMessagePath", "/dev/termination-log")
    _set(container, "terminationMessagePolicy", "File")
    # ResourceRequirements is a non-pointer struct: always serialized
    _set(container, "resources", {})
    for port in _dicts(container.get("ports")):
        _set(port, "protocol", "TCP")
        if host_network and port.get("hostPort") is None and port.get("containerPort") is not None:
            port["hostPort"] = port["containerPort"]
    for name in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(container.get(name))
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            handler = lifecycle.get(hook)
            if isinstance(handler, dict) and isinstance(handler.get("httpGet"), dict):
                _set(handler["httpGet"], "path", "/")
                _set(handler["httpGet"], "scheme", "HTTP")
    for env in _dicts(container.get("env")):
        _default_field_ref(env.get("valueFrom"))


_VOLUME_SOURCES = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret",
    "nfs", "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder",
    "cephfs", "flocker", "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume",
    "quobyte", "azureDisk", "photonPersistentDisk", "projected", "portworxVolume", "scaleIO",
    "storageos", "csi", "ephemeral", "image",
)


def _default_volume(volume: Object) -> None:
    if not any(volume.get(k) is not None for k in _VOLUME_SOURCES):
        volume["emptyDir"] = {}
    for key in ("secret", "configMap", "downwardAPI"):
        source = volume.get(key)
        if isinstance(source, dict):
            _set(source, "defaultMode", 420)
    downward = volume.get("downwardAPI")
    if isinstance(downward, dict):
        for item in _dicts(downward.get("items")):
            _default_field_ref(item)
    host_path = volume.get("hostPath")
    if isinstance(host_path, dict):
        _set(host_path, "type", "")
    iscsi = volume.get("iscsi")
    if isinstance(iscsi, dict):
        _set(iscsi, "iscsiInterface", "default")
    projected = volume.get("projected")
    if isinstance(projected, dict):
        _set(projected, "defaultMode", 420)
        for source in _dicts(projected.get("sources")):
            token = source.get("serviceAccountToken")
            if isinstance(token, dict):
                _set(token, "expirationSeconds", 3600)
            downward_source = source.get("downwardAPI")
            if isinstance(downward_source, dict):
                for item in _dicts(downward_source.get("items")):
                    _default_field_ref(item)


def default_pod_spec(spec: Object) -> None:
    """``SetDefaults_PodSpec`` and everything nested in a pod spec."""
    _set(spec, "dnsPolicy", "ClusterFirst")
    _set(spec, "restartPolicy", "Always")
    _set(spec, "securityContext", {})
    _set(spec, "terminationGracePeriodSeconds", 30)
    _set(spec, "schedulerName", "default-scheduler")
    host_network = spec.get("hostNetwork") is True
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in _dicts(spec.get(key)):
            default_container(container, host_network=host_network and key != "ephemeralContainers")
    for volume in _dicts(spec.get("volumes")):
        _default_volume(volume)


def _requests_from_limits(spec: Object) -> None:
    """``SetDefaults_Pod``: a resource with a limit and no request requests the limit."""
    for key in ("containers", "initContainers"):
        for container in _dicts(spec.get(key)):
            resources = container.get("resources")
            if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
                continue
            requests = resources.get("requests")
            if requests is None:
                requests = resources["requests"] = {}
            if isinstance(requests, dict):
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)


def _pod(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is None:
        return
    default_pod_spec(spec)
    _requests_from_limits(spec)
    _set(spec, "enableServiceLinks", True)
    # From the Priority admission plugin (no priorityClassName → global default 0):
    # every pod a real cluster stores carries them.
    if spec.get("priorityClassName") in (None, ""):
        _set(spec, "priority", 0)
    _set(spec, "preemptionPolicy", "PreemptLowerPriority")


def _template(spec: Any, *path: str) -> None:
    """Default the pod spec of the template at ``spec[path...]`` if present."""
    cur = spec
    for key in path:
        if not isinstance(cur, dict):
            return
        cur = cur.get(key)
    if isinstance(cur, dict) and isinstance(cur.get("spec"), dict):
        default_pod_spec(cur["spec"])


def _pod_template(obj: Object) -> None:
    _template(obj, "template")


def _replication_controller(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is None:
        return
    template = spec.get("template")
    labels = template.get("metadata", {}).get("labels") if isinstance(template, dict) else None
    if labels and not spec.get("selector"):
        spec["selector"] = dict(labels)
    meta = _obj(obj, "metadata")
    if labels and meta is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)
    _set(spec, "replicas", 1)
    _template(spec, "template")


def _service(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is None:
        return
    _set(spec, "sessionAffinity", "None")
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client_ip = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client_ip, dict) or client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    _set(spec, "type", "ClusterIP")
    for port in _dicts(spec.get("ports")):
        _set(port, "protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    kind = spec["type"]
    if kind in ("NodePort", "LoadBalancer"):
        _set(spec, "externalTrafficPolicy", "Cluster")
    if kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        _set(spec, "internalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        _set(spec, "allocateLoadBalancerNodePorts", True)
    if kind != "ExternalName":
        # Set by the Service REST storage (IP family allocation) on a
        # single-stack IPv4 cluster, which is what k8py is.
        families = spec.get("ipFamilies")
        if not families:
            spec["ipFamilies"] = ["IPv4"]
        _set(spec, "ipFamilyPolicy", "SingleStack" if len(spec["ipFamilies"]) < 2 else "PreferDualStack")


def _endpoints(obj: Object) -> None:
    for subset in _dicts(obj.get("subsets")):
        for port in _dicts(subset.get("ports")):
            _set(port, "protocol", "TCP")


def _namespace(obj: Object) -> None:
    meta = _obj(obj, "metadata")
    name = meta.get("name") if meta is not None else None
    if meta is not None and isinstance(name, str) and name:
        labels = _obj(meta, "labels")
        if labels is not None:
            labels["kubernetes.io/metadata.name"] = name
    status = _obj(obj, "status")
    if status is not None:
        _set(status, "phase", "Active")


def _secret(obj: Object) -> None:
    if obj.get("type") in (None, ""):
        obj["type"] = "Opaque"


def _node(obj: Object) -> None:
    status = obj.get("status")
    if isinstance(status, dict) and status.get("allocatable") is None and isinstance(status.get("capacity"), dict):
        status["allocatable"] = dict(status["capacity"])


def _persistent_volume(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is not None:
        _set(spec, "persistentVolumeReclaimPolicy", "Retain")
        _set(spec, "volumeMode", "Filesystem")
    status = _obj(obj, "status")
    if status is not None:
        _set(status, "phase", "Pending")


def _persistent_volume_claim(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is not None:
        _set(spec, "volumeMode", "Filesystem")
    status = _obj(obj, "status")
    if status is not None:
        _set(status, "phase", "Pending")


# --- apps/v1 ------------------------------------------------------------------


def _deployment(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is None:
        return
    _set(spec, "replicas", 1)
    strategy = _obj(spec, "strategy")
    if strategy is not None:
        _set(strategy, "type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = _obj(strategy, "rollingUpdate")
            if rolling is not None:
                _set(rolling, "maxUnavailable", "25%")
                _set(rolling, "maxSurge", "25%")
    _set(spec, "revisionHistoryLimit", 10)
    _set(spec, "progressDeadlineSeconds", 600)
    _template(spec, "template")


def _replica_set(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is None:
        return
    _set(spec, "replicas", 1)
    _template(spec, "template")


def _daemon_set(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is None:
        return
    strategy = _obj(spec, "updateStrategy")
    if strategy is not None:
        _set(strategy, "type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = _obj(strategy, "rollingUpdate")
            if rolling is not None:
                _set(rolling, "maxUnavailable", 1)
                _set(rolling, "maxSurge", 0)
    _set(spec, "revisionHistoryLimit", 10)
    _template(spec, "template")


def _stateful_set(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is None:
        return
    _set(spec, "podManagementPolicy", "OrderedReady")
    strategy = _obj(spec, "updateStrategy")
    if strategy is not None:
        if strategy.get("type") is None:
            strategy["type"] = "RollingUpdate"
            _obj(strategy, "rollingUpdate")
        rolling = strategy.get("rollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
            _set(rolling, "partition", 0)
    retention = _obj(spec, "persistentVolumeClaimRetentionPolicy")
    if retention is not None:
        _set(retention, "whenDeleted", "Retain")
        _set(retention, "whenScaled", "Retain")
    _set(spec, "replicas", 1)
    _set(spec, "revisionHistoryLimit", 10)
    _template(spec, "template")


# --- batch/v1 -----------------------------------------------------------------


def _job(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is None:
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    _set(spec, "parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6
    template = spec.get("template")
    labels = template.get("metadata", {}).get("labels") if isinstance(template, dict) else None
    meta = _obj(obj, "metadata")
    if labels and meta is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)
    _set(spec, "completionMode", "NonIndexed")
    _set(spec, "suspend", False)
    failure_policy = spec.get("podFailurePolicy")
    if isinstance(failure_policy, dict):
        for rule in _dicts(failure_policy.get("rules")):
            for pattern in _dicts(rule.get("onPodConditions")):
                if pattern.get("status") in (None, ""):
                    pattern["status"] = "True"
    _set(spec, "podReplacementPolicy", "Failed" if isinstance(failure_policy, dict) else "TerminatingOrFailed")
    _template(spec, "template")


def _cron_job(obj: Object) -> None:
    spec = _obj(obj, "spec")
    if spec is None:
        return
    _set(spec, "concurrencyPolicy", "Allow")
    _set(spec, "suspend", False)
    _set(spec, "successfulJobsHistoryLimit", 3)
    _set(spec, "failedJobsHistoryLimit", 1)
    # jobTemplate is a JobTemplateSpec, not a Job: only its pod template is defaulted
    _template(spec, "jobTemplate", "spec", "template")


# --- discovery.k8s.io/v1 ------------------------------------------------------


def _endpoint_slice(obj: Object) -> None:
    for port in _dicts(obj.get("ports")):
        _set(port, "name", "")
        _set(port, "protocol", "TCP")


_DEFAULTERS: dict[tuple[str, str], Callable[[Object], None]] = {
    ("", "Pod"): _pod,
    ("", "PodTemplate"): _pod_template,
    ("", "ReplicationController"): _replication_controller,
    ("", "Service"): _service,
    ("", "Endpoints"): _endpoints,
    ("", "Namespace"): _namespace,
    ("", "Secret"): _secret,
    ("", "Node"): _node,
    ("", "PersistentVolume"): _persistent_volume,
    ("", "PersistentVolumeClaim"): _persistent_volume_claim,
    ("apps", "Deployment"): _deployment,
    ("apps", "ReplicaSet"): _replica_set,
    ("apps", "DaemonSet"): _daemon_set,
    ("apps", "StatefulSet"): _stateful_set,
    ("batch", "Job"): _job,
    ("batch", "CronJob"): _cron_job,
    ("discovery.k8s.io", "EndpointSlice"): _endpoint_slice,
}


def apply_defaults(group: str, version: str, kind: str, obj: dict[str, Any]) -> None:
    """Fill upstream defaults into ``obj`` in place; kinds without upstream
    defaults (and custom resources) are left untouched. ``version`` is accepted
    for when a group serves several versions with different defaults."""
    defaulter = _DEFAULTERS.get((group, kind))
    if defaulter is not None and isinstance(obj, dict):
        defaulter(obj)
