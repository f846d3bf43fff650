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

Layout (as ``validation/`` beside it): this module holds the per-kind table
and :func:`apply_defaults`; ``podspec`` the pod-spec defaults every pod
template shares. Called by ``resources.strategies.StandardStrategy.default``.
"""

from __future__ import annotations

from typing import Any, Callable

from k8py.apiserver.defaults.podspec import (
    child_object,
    default_container,
    default_pod_spec,
    dict_items,
    image_pull_policy,
    requests_from_limits,
    set_absent,
)

__all__ = ["apply_defaults", "default_pod_spec", "default_container", "image_pull_policy"]

Object = dict[str, Any]


def _pod(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is None:
        return
    default_pod_spec(spec)
    requests_from_limits(spec)
    set_absent(spec, "enableServiceLinks", True)
    # spec.priority and spec.preemptionPolicy are filled by the Priority
    # admission step on create (admission/priority.py), as upstream


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
    spec = child_object(obj, "spec")
    if spec is None:
        return
    template = spec.get("template")
    labels = template.get("metadata", {}).get("labels") if isinstance(template, dict) else None
    if labels and not spec.get("selector"):
        spec["selector"] = dict(labels)
    meta = child_object(obj, "metadata")
    if labels and meta is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)
    set_absent(spec, "replicas", 1)
    _template(spec, "template")


def _service(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is None:
        return
    set_absent(spec, "sessionAffinity", "None")
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client_ip = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client_ip, dict) or client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    set_absent(spec, "type", "ClusterIP")
    for port in dict_items(spec.get("ports")):
        set_absent(port, "protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    kind = spec["type"]
    if kind in ("NodePort", "LoadBalancer"):
        set_absent(spec, "externalTrafficPolicy", "Cluster")
    if kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        set_absent(spec, "internalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        set_absent(spec, "allocateLoadBalancerNodePorts", True)
    if kind != "ExternalName":
        # Set by the Service REST storage (IP family allocation) on a
        # single-stack IPv4 cluster, which is what k8py is.
        families = spec.get("ipFamilies")
        if not families:
            spec["ipFamilies"] = ["IPv4"]
        set_absent(spec, "ipFamilyPolicy", "SingleStack" if len(spec["ipFamilies"]) < 2 else "PreferDualStack")


def _endpoints(obj: Object) -> None:
    for subset in dict_items(obj.get("subsets")):
        for port in dict_items(subset.get("ports")):
            set_absent(port, "protocol", "TCP")


def _namespace(obj: Object) -> None:
    meta = child_object(obj, "metadata")
    name = meta.get("name") if meta is not None else None
    if meta is not None and isinstance(name, str) and name:
        labels = child_object(meta, "labels")
        if labels is not None:
            labels["kubernetes.io/metadata.name"] = name
    status = child_object(obj, "status")
    if status is not None:
        set_absent(status, "phase", "Active")


def _secret(obj: Object) -> None:
    if obj.get("type") in (None, ""):
        obj["type"] = "Opaque"


def _node(obj: Object) -> None:
    status = obj.get("status")
    if isinstance(status, dict) and status.get("allocatable") is None and isinstance(status.get("capacity"), dict):
        status["allocatable"] = dict(status["capacity"])


def _persistent_volume(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is not None:
        set_absent(spec, "persistentVolumeReclaimPolicy", "Retain")
        set_absent(spec, "volumeMode", "Filesystem")
    status = child_object(obj, "status")
    if status is not None:
        set_absent(status, "phase", "Pending")


def _persistent_volume_claim(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is not None:
        set_absent(spec, "volumeMode", "Filesystem")
    status = child_object(obj, "status")
    if status is not None:
        set_absent(status, "phase", "Pending")


# --- apps/v1 ------------------------------------------------------------------


def _deployment(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is None:
        return
    set_absent(spec, "replicas", 1)
    strategy = child_object(spec, "strategy")
    if strategy is not None:
        set_absent(strategy, "type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = child_object(strategy, "rollingUpdate")
            if rolling is not None:
                set_absent(rolling, "maxUnavailable", "25%")
                set_absent(rolling, "maxSurge", "25%")
    set_absent(spec, "revisionHistoryLimit", 10)
    set_absent(spec, "progressDeadlineSeconds", 600)
    _template(spec, "template")


def _replica_set(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is None:
        return
    set_absent(spec, "replicas", 1)
    _template(spec, "template")


def _daemon_set(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is None:
        return
    strategy = child_object(spec, "updateStrategy")
    if strategy is not None:
        set_absent(strategy, "type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = child_object(strategy, "rollingUpdate")
            if rolling is not None:
                set_absent(rolling, "maxUnavailable", 1)
                set_absent(rolling, "maxSurge", 0)
    set_absent(spec, "revisionHistoryLimit", 10)
    _template(spec, "template")


def _stateful_set(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is None:
        return
    set_absent(spec, "podManagementPolicy", "OrderedReady")
    strategy = child_object(spec, "updateStrategy")
    if strategy is not None:
        if strategy.get("type") is None:
            strategy["type"] = "RollingUpdate"
            child_object(strategy, "rollingUpdate")
        rolling = strategy.get("rollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
            set_absent(rolling, "partition", 0)
    retention = child_object(spec, "persistentVolumeClaimRetentionPolicy")
    if retention is not None:
        set_absent(retention, "whenDeleted", "Retain")
        set_absent(retention, "whenScaled", "Retain")
    set_absent(spec, "replicas", 1)
    set_absent(spec, "revisionHistoryLimit", 10)
    _template(spec, "template")


# --- batch/v1 -----------------------------------------------------------------


def _job(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is None:
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    set_absent(spec, "parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6
    template = spec.get("template")
    labels = template.get("metadata", {}).get("labels") if isinstance(template, dict) else None
    meta = child_object(obj, "metadata")
    if labels and meta is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)
    set_absent(spec, "completionMode", "NonIndexed")
    set_absent(spec, "suspend", False)
    failure_policy = spec.get("podFailurePolicy")
    if isinstance(failure_policy, dict):
        for rule in dict_items(failure_policy.get("rules")):
            for pattern in dict_items(rule.get("onPodConditions")):
                if pattern.get("status") in (None, ""):
                    pattern["status"] = "True"
    set_absent(spec, "podReplacementPolicy", "Failed" if isinstance(failure_policy, dict) else "TerminatingOrFailed")
    _template(spec, "template")


def _cron_job(obj: Object) -> None:
    spec = child_object(obj, "spec")
    if spec is None:
        return
    set_absent(spec, "concurrencyPolicy", "Allow")
    set_absent(spec, "suspend", False)
    set_absent(spec, "successfulJobsHistoryLimit", 3)
    set_absent(spec, "failedJobsHistoryLimit", 1)
    # jobTemplate is a JobTemplateSpec, not a Job: only its pod template is defaulted
    _template(spec, "jobTemplate", "spec", "template")


# --- discovery.k8s.io/v1 ------------------------------------------------------


def _endpoint_slice(obj: Object) -> None:
    for port in dict_items(obj.get("ports")):
        set_absent(port, "name", "")
        set_absent(port, "protocol", "TCP")


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
