"""Server-side apply and managedFields: ownership, conflicts, force, pruning, updates."""

import copy

import pytest

from k8py.api.errors import BadRequest, Conflict
from k8py.api.patch import decode_apply_body, record_update, server_side_apply
from k8py.api.patch.field_set import from_fields_v1, path_string, to_fields_v1

DEPLOYMENT = "io.k8s.api.apps.v1.Deployment"


def config(replicas=2, labels=None, image="nginx:1.27"):
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image}]},
            },
        },
    }
    if labels is not None:
        obj["metadata"]["labels"] = labels
    return obj


def apply(live, cfg, manager="kubectl", force=False, now="2025-01-01T00:00:00Z"):
    return server_side_apply(live, cfg, manager=manager, schema_name=DEPLOYMENT, now=now, force=force)


def entries(obj):
    return {(e["manager"], e["operation"]): e for e in obj["metadata"]["managedFields"]}


def owned(obj, manager, operation="Apply"):
    return {path_string(p) for p in from_fields_v1(entries(obj)[(manager, operation)]["fieldsV1"])}


def test_fields_v1_encoding_round_trips_with_dot_for_member_containers():
    fields = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {
        'k:{"name":"nginx"}': {".": {}, "f:image": {}, "f:name": {}}}}}
    assert to_fields_v1(from_fields_v1(fields)) == fields


def test_create_by_apply_records_the_applied_fields_only():
    obj = apply(None, config(labels={"team": "a"}))
    entry = entries(obj)[("kubectl", "Apply")]
    assert entry["apiVersion"] == "apps/v1" and entry["fieldsType"] == "FieldsV1"
    assert entry["time"] == "2025-01-01T00:00:00Z"
    assert entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"] == {
        'k:{"name":"nginx"}': {".": {}, "f:image": {}, "f:name": {}}
    }
    assert owned(obj, "kubectl") >= {".metadata.labels.team", ".spec.replicas", ".spec.selector"}
    assert not any(p.startswith((".metadata.name", ".apiVersion", ".kind")) for p in owned(obj, "kubectl"))


def test_two_appliers_share_an_object_without_conflict():
    obj = apply(None, config())
    other = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"owner": "ops"}}}
    obj = apply(obj, other, manager="ops-tool")
    assert obj["metadata"]["labels"] == {"owner": "ops"}
    assert obj["spec"]["replicas"] == 2
    assert owned(obj, "ops-tool") == {".metadata.labels.owner"}


def test_changing_a_field_another_manager_owns_is_a_conflict():
    obj = apply(None, config(replicas=2))
    with pytest.raises(Conflict) as info:
        apply(obj, config(replicas=5), manager="other")
    status = info.value.to_dict()
    assert status["code"] == 409
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "kubectl"', "field": ".spec.replicas"}
    ]


def test_applying_the_same_value_is_not_a_conflict_and_shares_ownership():
    obj = apply(None, config(replicas=2))
    obj = apply(obj, config(replicas=2), manager="other")
    assert ".spec.replicas" in owned(obj, "kubectl") and ".spec.replicas" in owned(obj, "other")


def test_conflict_with_an_updater_names_its_api_version():
    obj = apply(None, config(replicas=2))
    scaled = copy.deepcopy(obj)
    scaled["spec"]["replicas"] = 7
    obj = record_update(obj, scaled, manager="hpa", schema_name=DEPLOYMENT, now="2025-01-02T00:00:00Z")
    assert ".spec.replicas" not in owned(obj, "kubectl")
    with pytest.raises(Conflict) as info:
        apply(obj, config(replicas=2, image="nginx:1.28"))
    assert info.value.message == (
        'Apply failed with 1 conflict: conflict with "hpa" using apps/v1: .spec.replicas'
    )


def test_several_conflicts_are_listed_per_manager():
    obj = apply(None, config(replicas=2))
    with pytest.raises(Conflict) as info:
        apply(obj, config(replicas=3, image="other"), manager="m2")
    assert info.value.message == (
        'Apply failed with 2 conflicts: conflicts with "kubectl":\n'
        "- .spec.replicas\n"
        '- .spec.template.spec.containers[name="nginx"].image'
    )
    assert len(info.value.causes) == 2


def test_force_moves_ownership_to_the_applier():
    obj = apply(None, config(replicas=2))
    obj = apply(obj, config(replicas=5), manager="other", force=True)
    assert obj["spec"]["replicas"] == 5
    assert ".spec.replicas" in owned(obj, "other")
    assert ".spec.replicas" not in owned(obj, "kubectl")


def test_reapplying_without_a_solely_owned_field_removes_it():
    obj = apply(None, config(labels={"team": "a", "tier": "web"}))
    obj = apply(obj, config(labels={"team": "a"}))
    assert obj["metadata"]["labels"] == {"team": "a"}
    assert ".metadata.labels.tier" not in owned(obj, "kubectl")


def test_reapplying_without_a_shared_field_keeps_it():
    obj = apply(None, config(labels={"team": "a"}))
    obj = apply(obj, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"team": "a"}}}, manager="other")
    obj = apply(obj, config(labels=None))
    assert obj["metadata"]["labels"] == {"team": "a"}
    assert owned(obj, "other") == {".metadata.labels.team"}


def test_removed_container_is_pruned_but_fields_set_by_others_survive():
    two = config()
    two["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    obj = apply(None, two)
    edited = copy.deepcopy(obj)
    edited["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    obj = record_update(obj, edited, manager="editor", schema_name=DEPLOYMENT, now="t2")
    obj = apply(obj, config())
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["nginx"]
    assert containers[0]["resources"] == {"limits": {"cpu": "1"}}


def test_update_records_ownership_and_takes_fields_from_others():
    obj = apply(None, config(replicas=2))
    changed = copy.deepcopy(obj)
    changed["spec"]["replicas"] = 3
    changed["metadata"]["annotations"] = {"note": "x"}
    obj = record_update(obj, changed, manager="kubectl-edit", schema_name=DEPLOYMENT, now="t2")
    entry = entries(obj)[("kubectl-edit", "Update")]
    assert entry["apiVersion"] == "apps/v1" and entry["time"] == "t2"
    assert owned(obj, "kubectl-edit", "Update") == {".spec.replicas", ".metadata.annotations", ".metadata.annotations.note"}
    assert entry["fieldsV1"]["f:metadata"]["f:annotations"] == {".": {}, "f:note": {}}
    assert ".spec.replicas" not in owned(obj, "kubectl")


def test_update_without_changes_adds_no_entry():
    obj = apply(None, config())
    same = record_update(obj, copy.deepcopy(obj), manager="noop", schema_name=DEPLOYMENT, now="t2")
    assert ("noop", "Update") not in entries(same)


def test_managed_fields_are_sorted_apply_first():
    obj = apply(None, config())
    changed = copy.deepcopy(obj)
    changed["metadata"]["annotations"] = {"a": "b"}
    obj = record_update(obj, changed, manager="aaa", schema_name=DEPLOYMENT, now="2025-01-02T00:00:00Z")
    assert [e["operation"] for e in obj["metadata"]["managedFields"]] == ["Apply", "Update"]


def test_applied_config_with_managed_fields_is_rejected():
    cfg = config()
    cfg["metadata"]["managedFields"] = [{"manager": "x"}]
    with pytest.raises(BadRequest) as info:
        apply(None, cfg)
    assert info.value.message == "metadata.managedFields must be nil"


def test_apply_body_parses_yaml_and_json():
    assert decode_apply_body(b'{"a": 1}') == {"a": 1}
    assert decode_apply_body(b"a: 1\nb: [x]\n") == {"a": 1, "b": ["x"]}
    with pytest.raises(BadRequest):
        decode_apply_body(b"- just\n- a list\n")


def test_custom_resource_without_schema_uses_deduced_types():
    cr = {"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"size": 1, "tags": ["a"]}}
    obj = server_side_apply(None, cr, manager="m", schema_name=None, now="t")
    assert {path_string(p) for p in from_fields_v1(obj["metadata"]["managedFields"][0]["fieldsV1"])} == {
        ".spec", ".spec.size", ".spec.tags"
    }
    with pytest.raises(Conflict):
        server_side_apply(obj, {**cr, "spec": {"size": 2}}, manager="n", schema_name=None, now="t")
