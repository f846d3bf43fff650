"""The ``system:controller:<name>`` ClusterRoles and their bindings to the
``kube-system/<name>`` service accounts (upstream's controller_policy.go):
what each controller of the controller manager may do when it runs with
its own service account (``--use-service-account-credentials``)."""

from __future__ import annotations

from typing import Any

from k8py.apiserver.authz.policy_rules import LEGACY, READ, events_rule, rule

__all__ = ["CONTROLLER_ROLES"]

Object = dict[str, Any]
_APPS = ("apps", "extensions")
_STORAGE = "storage.k8s.io"

#: controller (service account) name -> rules
CONTROLLER_ROLES: dict[str, list[Object]] = {
    "attachdetach-controller": [
        rule("list", "watch", groups=[LEGACY], resources=["persistentvolumes", "persistentvolumeclaims"]),
        rule("get", "list", "watch", groups=[LEGACY], resources=["nodes"]),
        rule("patch", "update", groups=[LEGACY], resources=["nodes/status"]),
        rule("list", "watch", groups=[LEGACY], resources=["pods"]),
        events_rule(),
        rule("get", "create", "delete", "list", "watch", groups=[_STORAGE], resources=["volumeattachments"]),
        rule("get", "watch", "list", groups=[_STORAGE], resources=["csidrivers", "csinodes"]),
    ],
    "clusterrole-aggregation-controller": [
        rule("escalate", "get", "list", "watch", "update", "patch", groups=["rbac.authorization.k8s.io"], resources=["clusterroles"]),
    ],
    "cronjob-controller": [
        rule("get", "list", "watch", "update", groups=["batch"], resources=["cronjobs"]),
        rule("get", "list", "watch", "create", "update", "delete", "patch", groups=["batch"], resources=["jobs"]),
        rule("update", groups=["batch"], resources=["cronjobs/status"]),
        rule("update", groups=["batch"], resources=["cronjobs/finalizers"]),
        rule("list", "delete", groups=[LEGACY], resources=["pods"]),
        events_rule(),
    ],
    "daemon-set-controller": [
        rule("get", "list", "watch", groups=_APPS, resources=["daemonsets"]),
        rule("update", groups=_APPS, resources=["daemonsets/status"]),
        rule("update", groups=_APPS, resources=["daemonsets/finalizers"]),
        rule("list", "watch", groups=[LEGACY], resources=["nodes"]),
        rule("list", "watch", "create", "delete", "patch", groups=[LEGACY], resources=["pods"]),
        rule("create", groups=[LEGACY], resources=["pods/binding"]),
        rule("get", "list", "watch", "create", "delete", "update", "patch", groups=["apps"], resources=["controllerrevisions"]),
        events_rule(),
    ],
    "deployment-controller": [
        rule("get", "list", "watch", "update", groups=_APPS, resources=["deployments"]),
        rule("update", groups=_APPS, resources=["deployments/status"]),
        rule("update", groups=_APPS, resources=["deployments/finalizers"]),
        rule("get", "list", "watch", "create", "update", "patch", "delete", groups=_APPS, resources=["replicasets"]),
        rule("get", "list", "watch", "update", groups=[LEGACY], resources=["pods"]),
        events_rule(),
    ],
    "disruption-controller": [
        rule("get", "list", "watch", groups=_APPS, resources=["deployments"]),
        rule("get", "list", "watch", groups=_APPS, resources=["replicasets"]),
        rule("get", "list", "watch", groups=[LEGACY], resources=["replicationcontrollers"]),
        rule("get", "list", "watch", groups=["policy"], resources=["poddisruptionbudgets"]),
        rule("get", "list", "watch", groups=["apps"], resources=["statefulsets"]),
        rule("update", groups=["policy"], resources=["poddisruptionbudgets/status"]),
        rule("get", groups=["*"], resources=["*/scale"]),
        rule("patch", "update", groups=[LEGACY], resources=["pods/status"]),
        events_rule(),
    ],
    "endpoint-controller": [
        rule("get", "list", "watch", groups=[LEGACY], resources=["services", "pods"]),
        rule("get", "list", "create", "update", "delete", groups=[LEGACY], resources=["endpoints"]),
        rule("create", groups=[LEGACY], resources=["endpoints/restricted"]),
        events_rule(),
    ],
    "endpointslice-controller": [
        rule("get", "list", "watch", groups=[LEGACY], resources=["services", "pods", "nodes"]),
        rule("update", groups=[LEGACY], resources=["services/finalizers"]),
        rule("get", "list", "create", "update", "delete", groups=["discovery.k8s.io"], resources=["endpointslices"]),
        events_rule(),
    ],
    "endpointslicemirroring-controller": [
        rule("get", "list", "watch", groups=[LEGACY], resources=["services", "endpoints"]),
        rule("update", groups=[LEGACY], resources=["services/finalizers"]),
        rule("update", groups=[LEGACY], resources=["endpoints/finalizers"]),
        rule("get", "list", "create", "update", "delete", groups=["discovery.k8s.io"], resources=["endpointslices"]),
        events_rule(),
    ],
    "generic-garbage-collector": [
        rule("get", "list", "watch", "patch", "update", "delete", groups=["*"], resources=["*"]),
        events_rule(),
    ],
    "horizontal-pod-autoscaler": [
        rule("get", "list", "watch", groups=["autoscaling"], resources=["horizontalpodautoscalers"]),
        rule("update", groups=["autoscaling"], resources=["horizontalpodautoscalers/status"]),
        rule("get", "update", groups=["*"], resources=["*/scale"]),
        rule("list", groups=[LEGACY], resources=["pods"]),
        rule("list", groups=["metrics.k8s.io"], resources=["pods"]),
        rule("get", "list", groups=["custom.metrics.k8s.io"], resources=["*"]),
        rule("get", "list", groups=["external.metrics.k8s.io"], resources=["*"]),
        events_rule(),
    ],
    "job-controller": [
        rule("get", "list", "watch", "update", "patch", groups=["batch"], resources=["jobs"]),
        rule("update", groups=["batch"], resources=["jobs/status"]),
        rule("update", groups=["batch"], resources=["jobs/finalizers"]),
        rule("list", "watch", "create", "delete", "patch", groups=[LEGACY], resources=["pods"]),
        events_rule(),
    ],
    "namespace-controller": [
        rule("get", "list", "watch", "delete", groups=[LEGACY], resources=["namespaces"]),
        rule("update", groups=[LEGACY], resources=["namespaces/finalize", "namespaces/status"]),
        rule("get", "list", "delete", "deletecollection", groups=["*"], resources=["*"]),
    ],
    "node-controller": [
        rule("get", "list", "update", "delete", "patch", groups=[LEGACY], resources=["nodes"]),
        rule("patch", "update", groups=[LEGACY], resources=["nodes/status"]),
        rule("patch", "update", groups=[LEGACY], resources=["pods/status"]),
        rule("list", "delete", groups=[LEGACY], resources=["pods"]),
        events_rule(),
    ],
    "pod-garbage-collector": [
        rule("list", "watch", "delete", groups=[LEGACY], resources=["pods"]),
        rule("get", "list", "watch", groups=[LEGACY], resources=["nodes"]),
        rule("patch", groups=[LEGACY], resources=["pods/status"]),
    ],
    "replicaset-controller": [
        rule("get", "list", "watch", "update", groups=_APPS, resources=["replicasets"]),
        rule("update", groups=_APPS, resources=["replicasets/status"]),
        rule("update", groups=_APPS, resources=["replicasets/finalizers"]),
        rule("list", "watch", "patch", "create", "delete", groups=[LEGACY], resources=["pods"]),
        events_rule(),
    ],
    "replication-controller": [
        rule("get", "list", "watch", "update", groups=[LEGACY], resources=["replicationcontrollers"]),
        rule("update", groups=[LEGACY], resources=["replicationcontrollers/status"]),
        rule("update", groups=[LEGACY], resources=["replicationcontrollers/finalizers"]),
        rule("list", "watch", "patch", "create", "delete", groups=[LEGACY], resources=["pods"]),
        events_rule(),
    ],
    "resourcequota-controller": [
        rule("list", "watch", groups=["*"], resources=["*"]),
        rule("update", groups=[LEGACY], resources=["resourcequotas/status"]),
        events_rule(),
    ],
    "root-ca-cert-publisher": [
        rule("create", "update", groups=[LEGACY], resources=["configmaps"]),
        events_rule(),
    ],
    "service-account-controller": [
        rule("create", groups=[LEGACY], resources=["serviceaccounts"]),
        events_rule(),
    ],
    "service-controller": [
        rule("get", "list", "watch", groups=[LEGACY], resources=["services"]),
        rule("patch", "update", groups=[LEGACY], resources=["services/status"]),
        rule("list", "watch", groups=[LEGACY], resources=["nodes"]),
        events_rule(),
    ],
    "statefulset-controller": [
        rule("list", "watch", groups=[LEGACY], resources=["pods"]),
        rule("get", "list", "watch", groups=["apps"], resources=["statefulsets"]),
        rule("update", groups=["apps"], resources=["statefulsets/status"]),
        rule("update", groups=["apps"], resources=["statefulsets/finalizers"]),
        rule("get", "create", "delete", "update", "patch", groups=[LEGACY], resources=["pods"]),
        rule("get", "list", "watch", "create", "delete", "update", "patch", groups=["apps"], resources=["controllerrevisions"]),
        rule("get", "create", groups=[LEGACY], resources=["persistentvolumeclaims"]),
        rule("update", "delete", groups=[LEGACY], resources=["persistentvolumeclaims"]),
        events_rule(),
    ],
    "taint-eviction-controller": [
        rule("patch", "update", groups=[LEGACY], resources=["pods/status"]),
        rule("list", "get", "delete", groups=[LEGACY], resources=["pods"]),
        events_rule(),
    ],
    "ttl-after-finished-controller": [
        rule("get", "list", "watch", "delete", groups=["batch"], resources=["jobs"]),
        events_rule(),
    ],
    "ttl-controller": [
        rule("update", "patch", "list", "watch", groups=[LEGACY], resources=["nodes"]),
        events_rule(),
    ],
    "certificate-controller": [
        rule("get", "list", "watch", "delete", groups=["certificates.k8s.io"], resources=["certificatesigningrequests"]),
        rule("update", groups=["certificates.k8s.io"], resources=["certificatesigningrequests/status",
                                                                  "certificatesigningrequests/approval"]),
        rule("approve", groups=["certificates.k8s.io"], resources=["signers"],
             names=["kubernetes.io/kube-apiserver-client-kubelet"]),
        rule("sign", groups=["certificates.k8s.io"], resources=["signers"],
             names=["kubernetes.io/legacy-unknown", "kubernetes.io/kube-apiserver-client",
                    "kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"]),
        rule("create", groups=["authorization.k8s.io"], resources=["subjectaccessreviews"]),
        events_rule(),
    ],
    "pvc-protection-controller": [
        rule("get", "list", "watch", "update", groups=[LEGACY], resources=["persistentvolumeclaims"]),
        rule("list", "watch", "get", groups=[LEGACY], resources=["pods"]),
        events_rule(),
    ],
    "pv-protection-controller": [
        rule("get", "list", "watch", "update", groups=[LEGACY], resources=["persistentvolumes"]),
        events_rule(),
    ],
    "persistent-volume-binder": [
        rule("get", "list", "watch", "update", "create", "delete", groups=[LEGACY], resources=["persistentvolumes"]),
        rule("update", groups=[LEGACY], resources=["persistentvolumes/status"]),
        rule("get", "list", "watch", "update", groups=[LEGACY], resources=["persistentvolumeclaims"]),
        rule("update", groups=[LEGACY], resources=["persistentvolumeclaims/status"]),
        rule("list", "watch", "get", "create", "delete", groups=[LEGACY], resources=["pods"]),
        rule("get", "list", "watch", groups=[_STORAGE], resources=["storageclasses"]),
        rule(*READ, groups=[LEGACY], resources=["nodes"]),
        events_rule(),
    ],
    # the rest of upstream's default-on controller roles (v1.32; feature-gated ones are left out):
    # k8py runs no such controller, but a cluster's RBAC looks as upstream's does
    "expand-controller": [
        rule("get", "list", "watch", "update", "patch", groups=[LEGACY], resources=["persistentvolumes"]),
        rule("update", "patch", groups=[LEGACY], resources=["persistentvolumeclaims/status"]),
        rule("get", "list", "watch", groups=[LEGACY], resources=["persistentvolumeclaims"]),
        rule("get", "list", "watch", groups=[_STORAGE], resources=["storageclasses"]),
        rule("get", groups=[LEGACY], resources=["services", "endpoints"]),
        rule("get", groups=[LEGACY], resources=["secrets"]),
        events_rule(),
    ],
    "ephemeral-volume-controller": [
        rule("get", "list", "watch", groups=[LEGACY], resources=["pods"]),
        rule("update", groups=[LEGACY], resources=["pods/finalizers"]),
        rule("get", "list", "watch", "create", groups=[LEGACY], resources=["persistentvolumeclaims"]),
        events_rule(),
    ],
    "route-controller": [
        rule("list", "watch", groups=[LEGACY], resources=["nodes"]),
        rule("patch", groups=[LEGACY], resources=["nodes/status"]),
        events_rule(),
    ],
    "validatingadmissionpolicy-status-controller": [
        rule("get", "list", "watch", groups=["admissionregistration.k8s.io"], resources=["validatingadmissionpolicies"]),
        rule("get", "patch", "update", groups=["admissionregistration.k8s.io"], resources=["validatingadmissionpolicies/status"]),
        events_rule(),
    ],
    "legacy-service-account-token-cleaner": [
        rule("get", groups=[LEGACY], resources=["configmaps"], names=["kube-apiserver-legacy-service-account-token-tracking"]),
        rule("patch", "delete", groups=[LEGACY], resources=["secrets"]),
    ],
}
