"""Structural schemas of custom resources: pruning, defaults, validation with
upstream's messages; the status and scale subresources; additionalPrinterColumns.
The real kubectl and the official client against a real API server."""

from __future__ import annotations

import json

import kubernetes
import pytest

from tests.apiserver.crd.test_crd_serving import established, wait_for

GROUP = "stable.example.com"
PATTERN = r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                     "statusReplicasPath": ".status.replicas"}},
            "additionalPrinterColumns": [
                {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "required": ["cronSpec"],
                        "properties": {
                            "cronSpec": {"type": "string", "pattern": PATTERN},
                            "image": {"type": "string", "default": "busybox", "maxLength": 20},
                            "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
                            "color": {"type": "string", "enum": ["red", "blue"]},
                            "ports": {"type": "array", "maxItems": 2, "items": {"type": "integer"}},
                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    },
                    "status": {"type": "object", "properties": {
                        "replicas": {"type": "integer"}, "ready": {"type": "boolean"}}},
                },
            }},
        }],
    },
}


@pytest.fixture
def crontabs(k8s) -> kubernetes.client.CustomObjectsApi:
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    ext.create_custom_resource_definition(CRD)
    wait_for(lambda: established(ext, "crontabs.stable.example.com"), what="Established")
    return kubernetes.client.CustomObjectsApi(k8s)


def crontab(name: str, **spec) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": spec}


def create(api, body, **kw):
    return api.create_namespaced_custom_object(GROUP, "v1", "default", "crontabs", body, **kw)


def failure(api, body, **kw) -> tuple[int, dict]:
    with pytest.raises(kubernetes.client.ApiException) as err:
        create(api, body, **kw)
    return err.value.status, json.loads(err.value.body)


def test_defaults_are_filled_and_unknown_fields_pruned(crontabs) -> None:
    created = create(crontabs, {**crontab("a", cronSpec="* * * * */5", bogus=1, extra={"any": {"thing": 1}}),
                                "topLevel": "x"})
    assert created["spec"] == {"cronSpec": "* * * * */5", "image": "busybox", "replicas": 1,
                               "extra": {"any": {"thing": 1}}}
    assert "topLevel" not in created
    stored = crontabs.get_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "a")
    assert stored["spec"] == created["spec"]


def test_strict_field_validation_refuses_unknown_fields(crontabs) -> None:
    code, status = failure(crontabs, crontab("b", cronSpec="* * * * *", bogus=1), field_validation="Strict")
    assert code == 400
    assert status["message"] == ('CronTab in version "v1" cannot be handled as a CronTab: '
                                 'strict decoding error: unknown field "spec.bogus"')


def test_schema_violations_are_422_with_upstream_messages(crontabs) -> None:
    code, status = failure(crontabs, crontab("c", cronSpec="nope", replicas=0, color="pink",
                                             image="x" * 21, ports=[1, 2, 3]))
    assert code == 422
    assert status["reason"] == "Invalid"
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert causes == {
        "spec.cronSpec": f"Invalid value: \"nope\": spec.cronSpec in body should match '{PATTERN}'",
        "spec.replicas": "Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
        "spec.color": 'Unsupported value: "pink": supported values: "red", "blue"',
        "spec.image": "Too long: may not be more than 20 bytes",
        "spec.ports": "Too many: 3: must have at most 2 items",
    }
    assert status["message"].startswith('CronTab.stable.example.com "c" is invalid: [')

    code, status = failure(crontabs, crontab("d", replicas="three"))
    assert code == 422
    causes = {c["field"]: (c["reason"], c["message"]) for c in status["details"]["causes"]}
    assert causes == {
        "spec.cronSpec": ("FieldValueRequired", "Required value"),
        "spec.replicas": ("FieldValueTypeInvalid",
                          'Invalid value: "string": spec.replicas in body must be of type integer: "string"'),
    }

    code, status = failure(crontabs, crontab("e", cronSpec="* * * * *", replicas=11))
    assert status["details"]["causes"][0]["message"] == (
        "Invalid value: 11: spec.replicas in body should be less than or equal to 10")


def test_update_and_patch_are_validated_too(crontabs) -> None:
    create(crontabs, crontab("f", cronSpec="* * * * *"))
    with pytest.raises(kubernetes.client.ApiException) as err:
        crontabs.patch_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "f", {"spec": {"replicas": 99}})
    assert err.value.status == 422
    with pytest.raises(kubernetes.client.ApiException) as err:
        crontabs.patch_namespaced_custom_object_status(GROUP, "v1", "default", "crontabs", "f",
                                                       {"status": {"ready": "yes"}})
    assert err.value.status == 422
    assert "status.ready in body must be of type boolean" in err.value.body


def test_status_and_scale_subresources(crontabs, kubectl) -> None:
    create(crontabs, {**crontab("g", cronSpec="* * * * *", replicas=2), "status": {"replicas": 7}})
    got = crontabs.get_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "g")
    assert "status" not in got
    crontabs.patch_namespaced_custom_object_status(GROUP, "v1", "default", "crontabs", "g",
                                                   {"status": {"replicas": 2}, "spec": {"replicas": 9}})
    got = crontabs.get_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "g")
    assert got["spec"]["replicas"] == 2 and got["status"] == {"replicas": 2}

    scale = crontabs.get_namespaced_custom_object_scale(GROUP, "v1", "default", "crontabs", "g")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2 and scale["status"]["replicas"] == 2
    kubectl.run("scale", "crontab/g", "--replicas=5")
    got = crontabs.get_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "g")
    assert got["spec"]["replicas"] == 5 and got["metadata"]["generation"] == 2


def test_additional_printer_columns_in_kubectl_get(crontabs, kubectl) -> None:
    create(crontabs, crontab("h", cronSpec="*/5 * * * *", replicas=3))
    lines = kubectl.run("get", "ct").stdout.splitlines()
    assert lines[0].split() == ["NAME", "SPEC", "REPLICAS", "AGE"]
    assert lines[1].split()[:6] == ["h", "*/5", "*", "*", "*", "*"]
    assert lines[1].split()[6] == "3"


def test_kubectl_explain_reads_the_published_schema(crontabs, kubectl) -> None:
    out = kubectl.run("explain", "crontabs.spec.replicas").stdout
    assert "KIND:       CronTab" in out and "FIELD: replicas <integer>" in out
    fields = kubectl.run("explain", "crontab.spec").stdout
    for name in ("cronSpec", "image", "replicas", "color", "ports"):
        assert f"  {name}\t" in fields or f"  {name} " in fields, fields


def test_server_side_apply_of_a_custom_resource(crontabs, kubectl) -> None:
    manifest = """\
apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: ssa}
spec: {cronSpec: "* * * * *", replicas: 2}
"""
    kubectl.run("apply", "--server-side", "--field-manager=first", "-f", "-", input=manifest)
    got = crontabs.get_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "ssa")
    assert got["spec"]["replicas"] == 2 and got["spec"]["image"] == "busybox"
    assert [m["manager"] for m in got["metadata"]["managedFields"]] == ["first"]
    conflict = kubectl.run("apply", "--server-side", "--field-manager=second", "-f", "-",
                           input=manifest.replace("replicas: 2", "replicas: 3"), check=False)
    assert conflict.returncode != 0 and "conflict" in conflict.stderr.lower()
    kubectl.run("apply", "--server-side", "--force-conflicts", "--field-manager=second", "-f", "-",
                input=manifest.replace("replicas: 2", "replicas: 3"))
    got = crontabs.get_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "ssa")
    assert got["spec"]["replicas"] == 3


def test_kubectl_get_watch_prints_the_printer_columns(crontabs, kubectl) -> None:
    from tests.apiserver.test_kubectl_basic import LineReader

    create(crontabs, crontab("first", cronSpec="* * * * *"))
    proc = kubectl.popen("get", "crontabs", "-w")
    try:
        lines = LineReader(proc)
        assert lines.next(timeout=30).split() == ["NAME", "SPEC", "REPLICAS", "AGE"]
        assert lines.next(timeout=30).split()[:7] == ["first", "*", "*", "*", "*", "*", "1"]
        create(crontabs, crontab("watched", cronSpec="1 2 3 4 5", replicas=4))
        row = lines.until(lambda line: line.startswith("watched"), timeout=30).split()
        assert row[1:7] == ["1", "2", "3", "4", "5", "4"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_kubectl_apply_reports_unknown_and_invalid_fields_as_upstream(crontabs, kubectl) -> None:
    unknown = kubectl.run("apply", "-f", "-", check=False, input=(
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: k}\n"
        "spec: {cronSpec: '* * * * *', bogus: 1}\n"))
    assert unknown.returncode == 1
    assert unknown.stderr == ('Error from server (BadRequest): error when creating "STDIN": CronTab in version "v1" '
                              'cannot be handled as a CronTab: strict decoding error: unknown field "spec.bogus"\n')
    invalid = kubectl.run("apply", "-f", "-", check=False, input=(
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: k}\nspec: {cronSpec: '* * * * *', replicas: 0}\n"))
    assert invalid.returncode == 1
    assert invalid.stderr == (
        'The CronTab "k" is invalid: spec.replicas: Invalid value: 0: '
        "spec.replicas in body should be greater than or equal to 1\n")

