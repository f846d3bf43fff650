"""The bootstrap RBAC policy: the roles and bindings every cluster starts with.

As upstream's ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy`` ships it for
v1.32 (feature-gated rules of gates that are off by default are left out):
the user-facing ``cluster-admin``, ``admin``, ``edit`` and ``view`` (the last
three aggregated from the ``system:aggregate-to-*`` roles through their
``rbac.authorization.k8s.io/aggregate-to-*`` labels), the ``system:*`` roles of
the components, the ``system:controller:*`` roles (:mod:`.controller_policy`),
the namespaced leader-locking and bootstrap-signer roles, and their bindings.

k8py additions, each saying why: ``system:coredns`` (what kubeadm's CoreDNS
add-on creates) bound to ``system:k8py-dns``, the identity ``k8py dns`` runs
as, and ``kube-system``'s ``system:k8py-dns-advertiser`` letting it create the
``kube-dns`` Service and Endpoints that a DNS add-on's manifest would; ``system:aggregated-metrics-reader`` (what metrics-server installs; k8py
serves ``metrics.k8s.io`` itself) aggregated into view, edit and admin; and ``system:kubelet-api-admin`` bound to ``kube-apiserver-kubelet-client``,
the API server's client identity towards kubelets (k3s binds it the same way).

Every object carries the ``kubernetes.io/bootstrapping: rbac-defaults`` label
and the ``rbac.authorization.kubernetes.io/autoupdate: "true"`` annotation that
reconciliation (:mod:`.reconcile`) honours.
"""

from __future__ import annotations

import copy
from typing import Any

from k8py.apiserver.authz.controller_policy import CONTROLLER_ROLES
from k8py.apiserver.authz.policy_rules import (AUTOUPDATE, BOOTSTRAP_LABEL, LEGACY, READ, READ_WRITE, WRITE, events_rule,
                                               rule)

__all__ = ["cluster_roles", "cluster_role_bindings", "namespace_roles", "namespace_role_bindings"]

Object = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
_AGG = "rbac.authorization.k8s.io/aggregate-to-"


def _meta(name: str, labels: dict[str, str] | None = None, namespace: str = "") -> Object:
    meta: Object = {"name": name, "labels": {**(labels or {}), **BOOTSTRAP_LABEL}, "annotations": {AUTOUPDATE: "true"}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _role(name: str, rules: list[Object], labels: dict[str, str] | None = None) -> Object:
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": _meta(name, labels), "rules": rules}


def _aggregated(name: str, selects: str, labels: dict[str, str] | None = None) -> Object:
    role = _role(name, [], labels)
    role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {_AGG + selects: "true"}}]}
    return role


def node_rules() -> list[Object]:
    return [
        rule("create", groups=["authentication.k8s.io"], resources=["tokenreviews"]),
        rule("create", groups=["authorization.k8s.io"], resources=["subjectaccessreviews", "localsubjectaccessreviews"]),
        rule(*READ, groups=[LEGACY], resources=["services"]),
        rule("create", "get", "list", "watch", groups=[LEGACY], resources=["nodes"]),
        rule("update", "patch", groups=[LEGACY], resources=["nodes/status"]),
        rule("update", "patch", groups=[LEGACY], resources=["nodes"]),
        rule("create", "update", "patch", groups=[LEGACY], resources=["events"]),
        rule(*READ, groups=[LEGACY], resources=["pods"]),
        rule("create", "delete", groups=[LEGACY], resources=["pods"]),
        rule("update", "patch", groups=[LEGACY], resources=["pods/status"]),
        rule("create", groups=[LEGACY], resources=["pods/eviction"]),
        rule("get", "list", "watch", groups=[LEGACY], resources=["secrets", "configmaps"]),
        rule("get", groups=[LEGACY], resources=["persistentvolumeclaims", "persistentvolumes"]),
        rule("get", groups=[LEGACY], resources=["endpoints"]),
        rule("create", "get", "list", "watch", groups=["certificates.k8s.io"], resources=["certificatesigningrequests"]),
        rule("get", "create", "update", "patch", "delete", groups=["coordination.k8s.io"], resources=["leases"]),
        rule("get", groups=["storage.k8s.io"], resources=["volumeattachments"]),
        rule("get", "update", "patch", groups=[LEGACY], resources=["persistentvolumeclaims/status"]),
        rule("create", groups=[LEGACY], resources=["serviceaccounts/token"]),
        rule("get", "watch", "list", groups=["storage.k8s.io"], resources=["csidrivers"]),
        rule("get", "create", "update", "patch", "delete", groups=["storage.k8s.io"], resources=["csinodes"]),
        rule("get", "list", "watch", groups=["node.k8s.io"], resources=["runtimeclasses"]),
    ]


def _view_rules() -> list[Object]:
    return [
        rule(*READ, groups=[LEGACY], resources=["pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                                                "services", "services/status", "endpoints", "persistentvolumeclaims",
                                                "persistentvolumeclaims/status", "configmaps"]),
        rule(*READ, groups=[LEGACY], resources=["limitranges", "resourcequotas", "bindings", "events", "pods/status",
                                                "resourcequotas/status", "namespaces/status", "replicationcontrollers/status",
                                                "pods/log"]),
        rule(*READ, groups=[LEGACY], resources=["namespaces"]),
        rule(*READ, groups=["discovery.k8s.io"], resources=["endpointslices"]),
        rule(*READ, groups=["apps"], resources=["controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
                                                "daemonsets", "daemonsets/status", "deployments", "deployments/status",
                                                "deployments/scale", "replicasets", "replicasets/status", "replicasets/scale"]),
        rule(*READ, groups=["autoscaling"], resources=["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
        rule(*READ, groups=["batch"], resources=["jobs", "cronjobs", "cronjobs/status", "jobs/status"]),
        rule(*READ, groups=["extensions"], resources=["daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                                                      "deployments/status", "ingresses", "ingresses/status", "replicasets",
                                                      "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
                                                      "networkpolicies"]),
        rule(*READ, groups=["policy"], resources=["poddisruptionbudgets", "poddisruptionbudgets/status"]),
        rule(*READ, groups=["networking.k8s.io"], resources=["networkpolicies", "ingresses", "ingresses/status"]),
    ]


def _edit_rules() -> list[Object]:
    return [
        rule(*READ, groups=[LEGACY], resources=["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets",
                                                "services/proxy"]),
        rule("impersonate", groups=[LEGACY], resources=["serviceaccounts"]),
        rule(*WRITE, groups=[LEGACY], resources=["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
        # kubectl debug: edit (and admin, which aggregates it) may add ephemeral containers
        rule("patch", "update", groups=[LEGACY], resources=["pods/ephemeralcontainers"]),
        rule("create", groups=[LEGACY], resources=["pods/eviction"]),
        rule(*WRITE, groups=[LEGACY], resources=["replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                                                 "services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets"]),
        rule(*WRITE, groups=["apps"], resources=["statefulsets", "statefulsets/scale", "daemonsets", "deployments",
                                                 "deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale"]),
        rule(*WRITE, groups=["autoscaling"], resources=["horizontalpodautoscalers"]),
        rule(*WRITE, groups=["batch"], resources=["jobs", "cronjobs"]),
        rule(*WRITE, groups=["extensions"], resources=["daemonsets", "deployments", "deployments/scale", "deployments/rollback",
                                                       "ingresses", "replicasets", "replicasets/scale",
                                                       "replicationcontrollers/scale", "networkpolicies"]),
        rule(*WRITE, groups=["policy"], resources=["poddisruptionbudgets"]),
        rule(*WRITE, groups=["networking.k8s.io"], resources=["networkpolicies", "ingresses"]),
    ]


def _approver(name: str, signer: str) -> Object:
    return _role(f"system:certificates.k8s.io:{name}", [
        rule("approve", groups=["certificates.k8s.io"], resources=["signers"], names=[signer])])


def cluster_roles() -> list[Object]:
    """Fresh copies of every bootstrap ClusterRole."""
    roles = [
        _role("cluster-admin", [rule("*", groups=["*"], resources=["*"]), rule("*", urls=["*"])]),
        _role("system:discovery", [rule("get", urls=["/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi",
                                                     "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"])]),
        _role("system:monitoring", [rule("get", urls=["/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz",
                                                      "/livez/*", "/readyz/*", "/healthz/*"])]),
        _role("system:basic-user", [
            rule("create", groups=["authorization.k8s.io"], resources=["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
            rule("create", groups=["authentication.k8s.io"], resources=["selfsubjectreviews"]),
        ]),
        _role("system:public-info-viewer", [rule("get", urls=["/livez", "/readyz", "/healthz", "/version", "/version/"])]),
        _aggregated("admin", "admin"),
        _aggregated("edit", "edit", {_AGG + "admin": "true"}),
        _aggregated("view", "view", {_AGG + "edit": "true"}),
        _role("system:aggregate-to-admin", [
            rule("create", groups=["authorization.k8s.io"], resources=["localsubjectaccessreviews"]),
            rule(*READ_WRITE, groups=[RBAC], resources=["roles", "rolebindings"]),
        ], {_AGG + "admin": "true"}),
        _role("system:aggregate-to-edit", _edit_rules(), {_AGG + "edit": "true"}),
        _role("system:aggregate-to-view", _view_rules(), {_AGG + "view": "true"}),
        _role("system:heapster", [rule(*READ, groups=[LEGACY], resources=["events", "pods", "nodes", "namespaces"]),
                                  rule(*READ, groups=["extensions"], resources=["deployments"])]),
        _role("system:node", node_rules()),
        _role("system:node-problem-detector", [rule("get", groups=[LEGACY], resources=["nodes"]),
                                               rule("patch", groups=[LEGACY], resources=["nodes/status"]), events_rule()]),
        _role("system:kubelet-api-admin", [
            rule("get", "list", "watch", groups=[LEGACY], resources=["nodes"]),
            rule("proxy", groups=[LEGACY], resources=["nodes"]),
            rule("*", groups=[LEGACY], resources=["nodes/proxy", "nodes/metrics", "nodes/spec", "nodes/stats", "nodes/log"]),
        ]),
        _role("system:node-bootstrapper", [
            rule("create", "get", "list", "watch", groups=["certificates.k8s.io"], resources=["certificatesigningrequests"])]),
        _role("system:auth-delegator", [rule("create", groups=["authentication.k8s.io"], resources=["tokenreviews"]),
                                        rule("create", groups=["authorization.k8s.io"], resources=["subjectaccessreviews"])]),
        _role("system:kube-aggregator", [rule(*READ, groups=[LEGACY], resources=["services", "endpoints"])]),
        _role("system:kube-controller-manager", [
            events_rule(),
            rule("create", groups=["coordination.k8s.io"], resources=["leases"]),
            rule("get", "update", groups=["coordination.k8s.io"], resources=["leases"], names=["kube-controller-manager"]),
            rule("create", groups=[LEGACY], resources=["secrets", "serviceaccounts"]),
            rule("delete", groups=[LEGACY], resources=["secrets"]),
            rule("get", groups=[LEGACY], resources=["configmaps", "namespaces", "secrets", "serviceaccounts"]),
            rule("update", groups=[LEGACY], resources=["secrets", "serviceaccounts"]),
            rule("create", groups=["authentication.k8s.io"], resources=["tokenreviews"]),
            rule("create", groups=["authorization.k8s.io"], resources=["subjectaccessreviews"]),
            rule("list", "watch", groups=["*"], resources=["*"]),
            rule("create", groups=[LEGACY], resources=["serviceaccounts/token"]),
        ]),
        _role("system:kube-dns", [rule("list", "watch", groups=[LEGACY], resources=["endpoints", "services"])]),
        _role("system:persistent-volume-provisioner", [
            rule("get", "list", "watch", "create", "delete", groups=[LEGACY], resources=["persistentvolumes"]),
            rule("get", "list", "watch", "update", groups=[LEGACY], resources=["persistentvolumeclaims"]),
            rule(*READ, groups=["storage.k8s.io"], resources=["storageclasses"]),
            rule("watch", groups=[LEGACY], resources=["events"]),
            events_rule(),
        ]),
        _role("system:certificates.k8s.io:certificatesigningrequests:nodeclient", [
            rule("create", groups=["certificates.k8s.io"], resources=["certificatesigningrequests/nodeclient"])]),
        _role("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", [
            rule("create", groups=["certificates.k8s.io"], resources=["certificatesigningrequests/selfnodeclient"])]),
        _role("system:volume-scheduler", [
            rule(*READ, "patch", "update", groups=[LEGACY], resources=["persistentvolumes"]),
            rule(*READ, groups=["storage.k8s.io"], resources=["storageclasses"]),
            rule(*READ, "patch", "update", groups=[LEGACY], resources=["persistentvolumeclaims"]),
        ]),
        _approver("legacy-unknown-approver", "kubernetes.io/legacy-unknown"),
        _approver("kubelet-serving-approver", "kubernetes.io/kubelet-serving"),
        _approver("kube-apiserver-client-approver", "kubernetes.io/kube-apiserver-client"),
        _approver("kube-apiserver-client-kubelet-approver", "kubernetes.io/kube-apiserver-client-kubelet"),
        _role("system:service-account-issuer-discovery", [
            rule("get", urls=["/.well-known/openid-configuration", "/.well-known/openid-configuration/",
                              "/openid/v1/jwks", "/openid/v1/jwks/"])]),
        _role("system:node-proxier", [
            rule("list", "watch", groups=[LEGACY], resources=["services", "endpoints"]),
            rule("get", "list", "watch", groups=[LEGACY], resources=["nodes"]),
            events_rule(),
            rule("list", "watch", groups=["discovery.k8s.io"], resources=["endpointslices"]),
        ]),
        _role("system:kube-scheduler", [
            events_rule(),
            rule("create", groups=["coordination.k8s.io"], resources=["leases"]),
            rule("get", "update", groups=["coordination.k8s.io"], resources=["leases"], names=["kube-scheduler"]),
            rule(*READ, groups=[LEGACY], resources=["nodes"]),
            rule("get", "list", "watch", "delete", groups=[LEGACY], resources=["pods"]),
            rule("create", groups=[LEGACY], resources=["pods/binding", "bindings"]),
            rule("patch", "update", groups=[LEGACY], resources=["pods/status"]),
            rule(*READ, groups=[LEGACY], resources=["services", "replicationcontrollers"]),
            rule(*READ, groups=["apps", "extensions"], resources=["replicasets"]),
            rule(*READ, groups=["apps"], resources=["statefulsets"]),
            rule(*READ, groups=["policy"], resources=["poddisruptionbudgets"]),
            rule(*READ, groups=[LEGACY], resources=["persistentvolumeclaims", "persistentvolumes"]),
            rule("create", groups=["authentication.k8s.io"], resources=["tokenreviews"]),
            rule("create", groups=["authorization.k8s.io"], resources=["subjectaccessreviews"]),
            rule(*READ, groups=["storage.k8s.io"], resources=["csinodes"]),
            rule(*READ, groups=[LEGACY], resources=["namespaces"]),
            rule(*READ, groups=["storage.k8s.io"], resources=["csidrivers"]),
            rule(*READ, groups=["storage.k8s.io"], resources=["csistoragecapacities"]),
        ]),
        # k8py: the API server serves metrics.k8s.io itself; metrics-server's aggregated reader role lets
        # view/edit/admin read it (kubectl top), as a cluster with metrics-server installed has
        _role("system:aggregated-metrics-reader", [rule(*READ, groups=["metrics.k8s.io"], resources=["pods", "nodes"])],
              {_AGG + "view": "true", _AGG + "edit": "true", _AGG + "admin": "true"}),
        # k8py: what kubeadm's CoreDNS add-on grants, for k8py dns (system:k8py-dns)
        _role("system:coredns", [
            rule("list", "watch", groups=[LEGACY], resources=["endpoints", "services", "pods", "namespaces"]),
            rule("list", "watch", groups=["discovery.k8s.io"], resources=["endpointslices"]),
        ]),
    ]
    roles.extend(_role(f"system:controller:{name}", copy.deepcopy(rules)) for name, rules in CONTROLLER_ROLES.items())
    return roles


def _binding(kind: str, name: str, role_kind: str, role: str, subjects: list[Object], namespace: str = "") -> Object:
    out: Object = {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": _meta(name, namespace=namespace),
                   "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role}}
    if subjects:
        out["subjects"] = subjects
    return out


def _users(*names: str) -> list[Object]:
    return [{"apiGroup": RBAC, "kind": "User", "name": n} for n in names]


def _groups(*names: str) -> list[Object]:
    return [{"apiGroup": RBAC, "kind": "Group", "name": n} for n in names]


def _sa(namespace: str, name: str) -> list[Object]:
    return [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]


def cluster_role_bindings() -> list[Object]:
    """Fresh copies of every bootstrap ClusterRoleBinding (each named after its role)."""
    def crb(role: str, subjects: list[Object], name: str = "") -> Object:
        return _binding("ClusterRoleBinding", name or role, "ClusterRole", role, subjects)

    bindings = [
        crb("cluster-admin", _groups("system:masters")),
        crb("system:monitoring", _groups("system:monitoring")),
        crb("system:discovery", _groups("system:authenticated")),
        crb("system:basic-user", _groups("system:authenticated")),
        crb("system:public-info-viewer", _groups("system:authenticated", "system:unauthenticated")),
        crb("system:node-proxier", _users("system:kube-proxy")),
        crb("system:kube-controller-manager", _users("system:kube-controller-manager")),
        crb("system:kube-dns", _sa("kube-system", "kube-dns")),
        crb("system:kube-scheduler", _users("system:kube-scheduler")),
        crb("system:volume-scheduler", _users("system:kube-scheduler")),
        # upstream keeps this binding, without subjects: nodes are authorized by the Node authorizer
        crb("system:node", []),
        crb("system:service-account-issuer-discovery", _groups("system:serviceaccounts")),
        # k8py: the dns component and the API server's kubelet client identity
        crb("system:coredns", _users("system:k8py-dns")),
        crb("system:kubelet-api-admin", _users("kube-apiserver-kubelet-client"), name="kube-apiserver-kubelet-admin"),
    ]
    bindings.extend(crb(f"system:controller:{name}", _sa("kube-system", name)) for name in CONTROLLER_ROLES)
    return bindings


def namespace_roles() -> list[Object]:
    def role(namespace: str, name: str, rules: list[Object]) -> Object:
        return {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": _meta(name, namespace=namespace), "rules": rules}

    return [
        role("kube-system", "extension-apiserver-authentication-reader", [
            rule("get", "list", "watch", groups=[LEGACY], resources=["configmaps"], names=["extension-apiserver-authentication"])]),
        role("kube-system", "system::leader-locking-kube-controller-manager", [
            rule("watch", groups=[LEGACY], resources=["configmaps"]),
            rule("get", "update", groups=[LEGACY], resources=["configmaps"], names=["kube-controller-manager"])]),
        role("kube-system", "system::leader-locking-kube-scheduler", [
            rule("watch", groups=[LEGACY], resources=["configmaps"]),
            rule("get", "update", groups=[LEGACY], resources=["configmaps"], names=["kube-scheduler"])]),
        role("kube-system", "system:controller:bootstrap-signer", [rule(*READ, groups=[LEGACY], resources=["secrets"])]),
        role("kube-system", "system:controller:cloud-provider", [rule("create", "get", "list", "watch", groups=[LEGACY],
                                                                      resources=["configmaps"])]),
        role("kube-system", "system:controller:token-cleaner", [rule("delete", "get", "list", "watch", groups=[LEGACY],
                                                                     resources=["secrets"]), events_rule()]),
        # k8py: k8py dns advertises itself as kube-system/kube-dns (the Service and its Endpoints), as a
        # cluster's DNS add-on manifest would create them; create cannot be limited to one name
        role("kube-system", "system:k8py-dns-advertiser", [
            rule("create", groups=[LEGACY], resources=["services", "endpoints"])]),
        role("kube-public", "system:controller:bootstrap-signer", [
            rule(*READ, groups=[LEGACY], resources=["configmaps"]),
            rule("update", groups=[LEGACY], resources=["configmaps"], names=["cluster-info"]), events_rule()]),
    ]


def namespace_role_bindings() -> list[Object]:
    def rb(namespace: str, name: str, role: str, subjects: list[Object]) -> Object:
        return _binding("RoleBinding", name, "Role", role, subjects, namespace=namespace)

    return [
        rb("kube-system", "system::extension-apiserver-authentication-reader", "extension-apiserver-authentication-reader",
           _users("system:kube-controller-manager", "system:kube-scheduler")),
        rb("kube-system", "system::leader-locking-kube-controller-manager", "system::leader-locking-kube-controller-manager",
           _users("system:kube-controller-manager") + _sa("kube-system", "kube-controller-manager")),
        rb("kube-system", "system::leader-locking-kube-scheduler", "system::leader-locking-kube-scheduler",
           _users("system:kube-scheduler") + _sa("kube-system", "kube-scheduler")),
        rb("kube-system", "system:controller:bootstrap-signer", "system:controller:bootstrap-signer",
           _sa("kube-system", "bootstrap-signer")),
        rb("kube-system", "system:controller:cloud-provider", "system:controller:cloud-provider",
           _sa("kube-system", "cloud-provider")),
        rb("kube-system", "system:controller:token-cleaner", "system:controller:token-cleaner",
           _sa("kube-system", "token-cleaner")),
        rb("kube-public", "system:controller:bootstrap-signer", "system:controller:bootstrap-signer",
           _sa("kube-public", "bootstrap-signer")),
        rb("kube-system", "system:k8py-dns-advertiser", "system:k8py-dns-advertiser", _users("system:k8py-dns")),
    ]
