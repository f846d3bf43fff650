"""Pure parts: rule matching, covering (escalation), request attributes from paths, the Forbidden message."""

from __future__ import annotations

import pytest

from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.authz.attributes import Attributes
from k8py.apiserver.authz.chain import forbidden, parse_modes
from k8py.apiserver.authz.request_attributes import request_attributes
from k8py.apiserver.authz.rules import compact_string, rule_allows, uncovered

U = UserInfo("u")


def res(verb: str, resource: str, sub: str = "", group: str = "", ns: str = "", name: str = "") -> Attributes:
    return Attributes(user=U, verb=verb, api_group=group, resource=resource, subresource=sub, namespace=ns, name=name)


def url(verb: str, path: str) -> Attributes:
    return Attributes(user=U, verb=verb, resource_request=False, path=path)


@pytest.mark.parametrize("rule,attrs,allowed", [
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, res("get", "pods"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, res("list", "pods"), False),
    ({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}, res("delete", "pods"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, res("get", "pods", "log"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}, res("get", "pods", "log"), True),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/scale"]}, res("get", "deployments", "scale", "apps"), True),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/scale"]}, res("get", "deployments", group="apps"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/*"]}, res("get", "pods", "log"), False),  # literal, as upstream
    ({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["*"]}, res("get", "pods"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["cm"], "resourceNames": ["a"]}, res("get", "cm", name="a"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["cm"], "resourceNames": ["a"]}, res("get", "cm", name="b"), False),
    ({"verbs": ["list"], "apiGroups": [""], "resources": ["cm"], "resourceNames": ["a"]}, res("list", "cm"), False),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, url("get", "/healthz"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, url("get", "/healthz/etcd"), False),
    ({"verbs": ["get"], "nonResourceURLs": ["/api/*"]}, url("get", "/api/v1"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["*"]}, url("get", "/anything"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, url("post", "/healthz"), False),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]}, url("get", "/healthz"), False),
])
def test_rule_matching_is_upstreams(rule, attrs, allowed) -> None:
    assert rule_allows(attrs, rule) is allowed


def test_covering_breaks_rules_down_and_reports_what_is_missing_compactly() -> None:
    owned = [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "*/scale"]},
             {"verbs": ["get"], "nonResourceURLs": ["/api/*"]}]
    assert uncovered(owned, [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "replicationcontrollers/scale"]}]) == []
    assert uncovered(owned, [{"verbs": ["get"], "nonResourceURLs": ["/api/v1"]}]) == []
    missing = uncovered(owned, [{"verbs": ["get", "create", "delete"], "apiGroups": ["", "apps"], "resources": ["pods"]}])
    assert [compact_string(r) for r in missing] == [
        '{APIGroups:[""], Resources:["pods"], Verbs:["create" "delete"]}',
        '{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "create" "delete"]}']
    # a named rule is covered by an unnamed one, never the other way round
    named = [{"verbs": ["get"], "apiGroups": [""], "resources": ["cm"], "resourceNames": ["a"]}]
    assert uncovered([{"verbs": ["get"], "apiGroups": [""], "resources": ["cm"]}], named) == []
    assert uncovered(named, [{"verbs": ["get"], "apiGroups": [""], "resources": ["cm"]}]) != []


@pytest.mark.parametrize("method,path,query,expect", [
    ("GET", "/api/v1/namespaces/default/pods", {}, ("list", "", "pods", "", "default", "")),
    ("GET", "/api/v1/namespaces/default/pods", {"watch": "true"}, ("watch", "", "pods", "", "default", "")),
    ("GET", "/api/v1/watch/namespaces/default/pods", {}, ("watch", "", "pods", "", "default", "")),
    ("GET", "/api/v1/namespaces/default/pods/p/log", {}, ("get", "", "pods", "log", "default", "p")),
    ("POST", "/api/v1/namespaces/default/pods/p/exec", {}, ("create", "", "pods", "exec", "default", "p")),
    ("DELETE", "/apis/apps/v1/namespaces/x/deployments", {}, ("deletecollection", "apps", "deployments", "", "x", "")),
    ("PATCH", "/apis/apps/v1/namespaces/x/deployments/d/scale", {}, ("patch", "apps", "deployments", "scale", "x", "d")),
    ("GET", "/api/v1/namespaces/kube-system", {}, ("get", "", "namespaces", "", "kube-system", "kube-system")),
    ("PUT", "/api/v1/namespaces/gone/finalize", {}, ("update", "", "namespaces", "finalize", "gone", "gone")),
    ("GET", "/api/v1/nodes", {"fieldSelector": "metadata.name=n1"}, ("list", "", "nodes", "", "", "n1")),
    ("GET", "/api/v1/nodes/n1/proxy/stats/summary", {}, ("get", "", "nodes", "proxy", "", "n1")),
    ("HEAD", "/api/v1/pods", {}, ("list", "", "pods", "", "", "")),
])
def test_request_attributes_as_upstreams_request_info(method, path, query, expect) -> None:
    a = request_attributes(U, method, path, query)
    assert a.resource_request
    assert (a.verb, a.api_group, a.resource, a.subresource, a.namespace, a.name) == expect


@pytest.mark.parametrize("path", ["/healthz", "/version", "/api", "/apis", "/apis/apps", "/apis/apps/v1", "/openapi/v3", "/metrics"])
def test_non_resource_paths(path) -> None:
    a = request_attributes(U, "GET", path, {})
    assert (a.resource_request, a.verb, a.path) == (False, "get", path)


def test_forbidden_messages_and_details() -> None:
    alice = UserInfo("alice")
    err = forbidden(Attributes(user=alice, verb="create", resource="pods", namespace="default"), "")
    assert err.message == 'pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "default"'
    err = forbidden(Attributes(user=alice, verb="get", api_group="apps", resource="deployments", subresource="scale",
                               namespace="ns", name="web"), "RBAC: x")
    assert err.message == ('deployments.apps "web" is forbidden: User "alice" cannot get resource "deployments/scale" in API '
                           'group "apps" in the namespace "ns": RBAC: x')
    assert err.to_dict()["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
    err = forbidden(Attributes(user=alice, verb="list", resource="nodes"), "")
    assert err.message == 'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope'
    err = forbidden(Attributes(user=alice, verb="post", resource_request=False, path="/x"), "")
    assert (err.message, err.to_dict().get("details")) == ('forbidden: User "alice" cannot post path "/x"', None)


def test_authorization_modes_are_checked() -> None:
    assert parse_modes("Node,RBAC") == ["Node", "RBAC"]
    with pytest.raises(ValueError, match="unknown mode 'ABAC'"):
        parse_modes("RBAC,ABAC")
    with pytest.raises(ValueError, match="names a mode twice"):
        parse_modes("RBAC,RBAC")
