"""Upstream's bootstrap flow-control configuration: the FlowSchemas and PriorityLevelConfigurations every server has.

Two are *mandatory* (``exempt`` and ``catch-all``, for both kinds): without
them a request could match nothing. The rest are upstream's *suggested*
configuration (``system``, ``node-high``, ``leader-election``,
``workload-high``, ``workload-low``, ``global-default`` and their schemas).
Values are upstream's v1.32 ones (``apiserver/pkg/apis/flowcontrol/bootstrap``):
nominal concurrency shares, lendable percent, queues, hand size and queue
length limit for each level; matching precedence, subjects, rules and
distinguisher for each schema.

The server creates any that are missing at start (a restart leaves edited
ones alone, as upstream does for objects annotated
``apf.kubernetes.io/autoupdate-spec: "false"``; k8py never overwrites).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PRIORITY_LEVELS", "FLOW_SCHEMAS", "GROUP", "VERSION"]

Object = dict[str, Any]
GROUP = "flowcontrol.apiserver.k8s.io"
VERSION = "v1"
_AUTOUPDATE = {"apf.kubernetes.io/autoupdate-spec": "true"}


def _meta(name: str) -> Object:
    return {"name": name, "annotations": dict(_AUTOUPDATE)}


def _limited(name: str, shares: int, lendable: int, *, queues: int = 0, hand: int = 0, length: int = 0) -> Object:
    response: Object = {"type": "Reject"}
    if queues:
        response = {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PriorityLevelConfiguration", "metadata": _meta(name),
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": shares, "lendablePercent": lendable,
                                                    "limitResponse": response}}}


PRIORITY_LEVELS: list[Object] = [
    {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PriorityLevelConfiguration", "metadata": _meta("exempt"),
     "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}},
    _limited("catch-all", 5, 0),
    _limited("system", 30, 33, queues=64, hand=6, length=50),
    _limited("node-high", 40, 25, queues=64, hand=6, length=50),
    _limited("leader-election", 10, 0, queues=16, hand=4, length=50),
    _limited("workload-high", 40, 50, queues=128, hand=6, length=50),
    _limited("workload-low", 100, 90, queues=128, hand=6, length=50),
    _limited("global-default", 20, 50, queues=128, hand=6, length=50),
]


def _user(name: str) -> Object:
    return {"kind": "User", "user": {"name": name}}


def _group(name: str) -> Object:
    return {"kind": "Group", "group": {"name": name}}


def _sa(namespace: str, name: str) -> Object:
    return {"kind": "ServiceAccount", "serviceAccount": {"namespace": namespace, "name": name}}


def _resources(verbs: list[str], groups: list[str], resources: list[str], *, cluster: bool = True,
               namespaces: list[str] | None = None) -> Object:
    rule: Object = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if cluster:
        rule["clusterScope"] = True
    rule["namespaces"] = namespaces if namespaces is not None else ["*"]
    return rule


_ALL = {"resourceRules": [_resources(["*"], ["*"], ["*"])], "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}
_EVERYONE = [_group("system:unauthenticated"), _group("system:authenticated")]
_LEADER_RESOURCES = [_resources(["get", "create", "update"], [""], ["endpoints", "configmaps"], cluster=False, namespaces=["kube-system"]),
                     _resources(["get", "create", "update"], ["coordination.k8s.io"], ["leases"], cluster=False, namespaces=["kube-system"])]


def _schema(name: str, precedence: int, level: str, subjects: list[Object], rules: Object,
            distinguisher: str | None = "ByUser") -> Object:
    spec: Object = {"matchingPrecedence": precedence, "priorityLevelConfiguration": {"name": level},
                    "rules": [{"subjects": subjects, **rules}]}
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "FlowSchema", "metadata": _meta(name), "spec": spec}


FLOW_SCHEMAS: list[Object] = [
    _schema("exempt", 1, "exempt", [_group("system:masters")], _ALL, distinguisher=None),
    _schema("probes", 2, "exempt", _EVERYONE,
            {"nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}, distinguisher=None),
    _schema("system-leader-election", 100, "leader-election",
            [_user("system:kube-controller-manager"), _user("system:kube-scheduler"), _sa("kube-system", "*")],
            {"resourceRules": _LEADER_RESOURCES}),
    _schema("endpoint-controller", 150, "workload-high",
            [_user("system:kube-controller-manager"), _sa("kube-system", "endpoint-controller")],
            {"resourceRules": [_resources(["get", "create", "update"], [""], ["endpoints"], cluster=False)]}),
    _schema("workload-leader-election", 200, "leader-election", [_sa("*", "*")],
            {"resourceRules": [_resources(["get", "create", "update"], ["coordination.k8s.io"], ["leases"], cluster=False)]}),
    _schema("system-node-high", 400, "node-high", [_group("system:nodes")],
            {"resourceRules": [_resources(["*"], [""], ["nodes", "nodes/status"]),
                               _resources(["*"], ["coordination.k8s.io"], ["leases"], cluster=False)]}),
    _schema("system-nodes", 500, "system", [_group("system:nodes")], _ALL),
    _schema("kube-controller-manager", 800, "workload-high", [_user("system:kube-controller-manager")], _ALL, "ByNamespace"),
    _schema("kube-scheduler", 800, "workload-high", [_user("system:kube-scheduler")], _ALL, "ByNamespace"),
    _schema("kube-system-service-accounts", 900, "workload-high", [_sa("kube-system", "*")], _ALL, "ByNamespace"),
    _schema("service-accounts", 9000, "workload-low", [_group("system:serviceaccounts")], _ALL),
    _schema("global-default", 9900, "global-default", _EVERYONE, _ALL),
    _schema("catch-all", 10000, "catch-all", _EVERYONE, _ALL),
]
