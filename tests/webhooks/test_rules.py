"""Which requests a webhook rule matches (upstream's rule matcher), as a table."""

from __future__ import annotations

import pytest

from k8py.apiserver.webhooks.attributes import GroupVersionKind, GroupVersionResource
from k8py.apiserver.webhooks.rules import is_exempt, namespace_selector_matches, object_selector_matches, resource_matches, rules_match
from tests.webhooks.conftest import Attrs


def attrs(resource: str = "pods", subresource: str = "", namespace: str = "default", operation: str = "CREATE",
          group: str = "", version: str = "v1", labels: dict | None = None) -> Attrs:
    obj = {"metadata": {"name": "x", "labels": labels or {}}}
    return Attrs(operation, GroupVersionKind(group, version, "Kind"), GroupVersionResource(group, version, resource),
                 name="x", namespace=namespace, subresource=subresource, object=obj)


@pytest.mark.parametrize(("patterns", "resource", "subresource", "expected"), [
    (["pods"], "pods", "", True),
    (["pods"], "pods", "status", False),
    (["pods/status"], "pods", "status", True),
    (["pods/status"], "pods", "", False),
    (["*"], "pods", "", True),
    (["*"], "pods", "status", False),
    (["*/status"], "deployments", "status", True),
    (["*/status"], "deployments", "scale", False),
    (["pods/*"], "pods", "exec", True),
    (["pods/*"], "pods", "", False),
    (["*/*"], "pods", "", True),
    (["*/*"], "pods", "log", True),
    (["services"], "pods", "", False),
])
def test_resource_patterns_match_as_upstream(patterns, resource, subresource, expected):
    assert resource_matches(patterns, resource, subresource) is expected


def _rule(**kw):
    return {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*"], **kw}


@pytest.mark.parametrize(("rule", "request_attrs", "expected"), [
    (_rule(), attrs(), True),
    (_rule(operations=["UPDATE"]), attrs(), False),
    (_rule(operations=["*"]), attrs(operation="DELETE"), True),
    (_rule(apiGroups=["apps"]), attrs(), False),
    (_rule(apiGroups=["*"], apiVersions=["*"]), attrs(group="apps", resource="deployments"), True),
    (_rule(scope="Namespaced"), attrs(), True),
    (_rule(scope="Namespaced"), attrs(resource="nodes", namespace=""), False),
    (_rule(scope="Cluster"), attrs(resource="nodes", namespace=""), True),
    (_rule(scope="Cluster"), attrs(), False),
    # a Namespace is cluster-scoped, even when the request names it as its namespace
    (_rule(scope="Cluster"), attrs(resource="namespaces", namespace="team-a"), True),
    (_rule(scope="Namespaced"), attrs(resource="namespaces", namespace="team-a"), False),
])
def test_rules_match_operations_groups_versions_and_scope(rule, request_attrs, expected):
    assert (rules_match([rule], request_attrs, match_policy="Exact", equivalents=lambda g, r: []) is not None) is expected


def test_equivalent_match_policy_matches_another_served_version_and_exact_does_not():
    rule = _rule(apiGroups=["autoscaling"], apiVersions=["v1"], resources=["horizontalpodautoscalers"])
    request = attrs(group="autoscaling", version="v2", resource="horizontalpodautoscalers")
    served = lambda group, resource: ["v2", "v1"]  # noqa: E731
    assert rules_match([rule], request, match_policy="Exact", equivalents=served) is None
    assert rules_match([rule], request, match_policy="Equivalent", equivalents=served) == ("autoscaling", "v1", "horizontalpodautoscalers")


def test_selectors_see_namespace_labels_and_old_or_new_object_labels():
    labels = {"default": {"env": "prod"}}.get
    selector = {"matchLabels": {"env": "prod"}}
    assert namespace_selector_matches(selector, attrs(), labels)
    assert not namespace_selector_matches(selector, attrs(namespace="other"), labels)
    assert namespace_selector_matches(selector, attrs(resource="nodes", namespace=""), labels)  # cluster-scoped
    assert namespace_selector_matches({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
                                      attrs(resource="namespaces", namespace="", labels={"env": "prod"}), labels)
    updated = attrs(labels={"tier": "web"})
    updated.old_object = {"metadata": {"labels": {"app": "db"}}}
    assert object_selector_matches({"matchLabels": {"app": "db"}}, updated)
    assert object_selector_matches({"matchLabels": {"tier": "web"}}, updated)
    assert not object_selector_matches({"matchLabels": {"tier": "db"}}, updated)


def test_the_admission_configuration_kinds_are_exempt():
    group = "admissionregistration.k8s.io"
    assert is_exempt(attrs(group=group, resource="validatingwebhookconfigurations", namespace=""))
    assert is_exempt(attrs(group=group, resource="validatingadmissionpolicybindings", namespace=""))
    assert not is_exempt(attrs(resource="configmaps"))


def test_the_served_versions_of_a_resource_come_from_the_registry():
    from k8py.apiserver.registry import Registry
    from k8py.apiserver.resources import register_builtins
    from k8py.apiserver.webhooks import ClusterLookups

    registry = Registry()
    register_builtins(registry)
    lookups = ClusterLookups(registry, cacher=None)  # type: ignore[arg-type]
    assert sorted(lookups.equivalents("autoscaling", "horizontalpodautoscalers")) == ["v1", "v2"]
    assert list(lookups.equivalents("apps", "deployments/scale")) == ["v1"]
    assert list(lookups.equivalents("apps", "nothing")) == []
