"""``/openapi/v2``: the invariants kubectl's parser needs, the protobuf
encoding, and what it makes work with the real kubectl (a ``kind: List``
applied, client-side validation of its items, ``explain`` from v2)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import urllib.request

from k8py.api.protobuf_wire import iter_fields
from k8py.apiserver.openapi.v2 import PROTOBUF_MEDIA_TYPE, encode_document, swagger_document, wants_protobuf
from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage

_CRONTAB_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {"group": "stable.example.com", "scope": "Namespaced",
             "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object", "properties": {
                     "cron": {"type": "string", "nullable": True},
                     "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                     "tags": {"type": "array", "items": {"type": "string"}},
                     "replicas": {"type": "integer", "minimum": 0},
                 }}}}}}]},
}


def _walk(schema: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(schema, dict):
        return
    yield where, schema
    for name, prop in (schema.get("properties") or {}).items():
        yield from _walk(prop, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{where}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{where}{{}}")
    for i, part in enumerate(schema.get("allOf") or []):
        yield from _walk(part, f"{where}.allOf[{i}]")


def _assert_kubectl_parsable(document: dict[str, Any]) -> None:
    """kube-openapi's NewOpenAPIData refuses the whole document on any of these."""
    definitions = document["definitions"]
    for name, schema in definitions.items():
        for where, node in _walk(schema, name):
            ref = node.get("$ref")
            if ref is not None:
                assert ref.startswith("#/definitions/") and ref[len("#/definitions/"):] in definitions, (where, ref)
                assert "type" not in node and "properties" not in node, where
            kind = node.get("type")
            assert kind is None or kind in {"object", "array", "string", "number", "integer", "boolean"}, (where, kind)
            if kind == "array":
                assert isinstance(node.get("items"), dict), where


def test_v3_wrappers_become_plain_refs_and_every_schema_keeps_kubectls_rules() -> None:
    components = {
        "a.Thing": {"type": "object", "properties": {
            "meta": {"allOf": [{"$ref": "#/components/schemas/a.Meta"}], "description": "the meta"},
            "gone": {"allOf": [{"$ref": "#/components/schemas/a.Missing"}], "description": "dangling"},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
            "list": {"type": "array"},
            "maybe": {"type": ["string", "null"], "nullable": True},
        }, "x-kubernetes-group-version-kind": [{"group": "a", "version": "v1", "kind": "Thing"}]},
        "a.Meta": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    document = swagger_document([components, {"a.Meta": components["a.Meta"]}])
    thing = document["definitions"]["a.Thing"]["properties"]
    assert thing["meta"] == {"$ref": "#/definitions/a.Meta", "description": "the meta"}
    assert thing["gone"] == {"description": "dangling"}  # arbitrary, not an unknown model
    assert thing["either"] == {"x-kubernetes-int-or-string": True}
    assert thing["list"] == {"type": "array", "items": {}}
    assert thing["maybe"] == {"type": "string"}
    _assert_kubectl_parsable(document)


def test_the_protobuf_encoding_is_a_gnostic_document() -> None:
    document = swagger_document([{"a.Thing": {"type": "object", "description": "t", "required": ["x"],
                                              "properties": {"x": {"type": "integer", "minimum": 1}},
                                              "x-kubernetes-group-version-kind": [{"group": "a", "version": "v1",
                                                                                    "kind": "Thing"}]}}])
    fields = {number: value for number, _, value in iter_fields(encode_document(document))}
    assert fields[1] == b"2.0"
    (named,) = [v for n, _, v in iter_fields(fields[9])]  # Definitions.additional_properties
    named_fields = dict((n, v) for n, _, v in iter_fields(named))
    assert named_fields[1] == b"a.Thing"
    schema = [(n, v) for n, _, v in iter_fields(named_fields[2])]
    numbers = [n for n, _ in schema]
    assert 22 in numbers and 25 in numbers and 19 in numbers and 31 in numbers  # type, properties, required, x-
    extension = dict((n, v) for n, _, v in iter_fields(dict(schema)[31]))
    assert extension[1] == b"x-kubernetes-group-version-kind"
    yaml_text = dict((n, v) for n, _, v in iter_fields(extension[2]))[2]
    assert orjson.loads(yaml_text) == [{"group": "a", "version": "v1", "kind": "Thing"}]
    assert wants_protobuf("application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert not wants_protobuf("application/json") and not wants_protobuf(None)


@pytest.fixture
def server(tmp_path) -> Iterator[ServerThread]:
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as s:
        yield s


def _get(url: str, accept: str) -> tuple[str, bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": accept}), timeout=30) as r:
        return r.headers["Content-Type"], r.read()


@pytest.mark.kubectl
def test_kubectl_applies_a_list_validates_its_items_and_explains_from_v2(server, tmp_path) -> None:
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    kubectl.run("apply", "-f", "-", input=orjson.dumps(_CRONTAB_CRD).decode())
    kubectl.run("wait", "--for=condition=Established", "crd/crontabs.stable.example.com", "--timeout=30s")
    kubectl.run("create", "configmap", "a", "--from-literal=x=1")
    kubectl.run("create", "configmap", "b", "--from-literal=x=2")
    exported = kubectl.run("get", "configmaps", "a", "b", "-o", "yaml").stdout
    assert "kind: List" in exported
    # what `kubectl get -o yaml > f; kubectl apply -f f` does: a List, validated through /openapi/v2
    applied = kubectl.run("apply", "-f", "-", input=exported)
    assert "configmap/a configured" in applied.stdout and "configmap/b configured" in applied.stdout

    bad = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
         "spec": {"replicas": "two", "selector": {"matchLabels": {"app": "d"}},
                  "template": {"metadata": {"labels": {"app": "d"}},
                               "spec": {"containers": [{"name": "c", "image": "busybox", "bogus": 1}]}}}},
        {"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "t"},
         "spec": {"replicas": "many"}},
    ]}
    refused = kubectl.run("apply", "-f", "-", input=orjson.dumps(bad).decode(), check=False)
    assert refused.returncode != 0
    assert ('ValidationError(Deployment.spec.replicas): invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: '
            'got "string", expected "integer"') in refused.stderr
    assert ('ValidationError(Deployment.spec.template.spec.containers[0]): unknown field "bogus" in '
            'io.k8s.api.core.v1.Container') in refused.stderr
    assert 'ValidationError(CronTab.spec.replicas): invalid type for com.example.stable.v1.CronTab.spec.replicas' \
        in refused.stderr
    assert kubectl.run("get", "deployments", "-o", "name").stdout == ""  # nothing of the list was sent

    good = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "t"},
         "spec": {"cron": "* * * * */5", "port": "http", "tags": ["a"], "replicas": 2}}]}
    assert "crontab.stable.example.com/t created" in kubectl.run("apply", "-f", "-", input=orjson.dumps(good).decode()).stdout

    explained = kubectl.run("explain", "deployment.spec.replicas", "--output", "plaintext-openapiv2").stdout
    assert "FIELD:    replicas <integer>" in explained and "Number of desired pods" in explained

    content_type, body = _get(server.url + "/openapi/v2", "application/json")
    assert content_type.startswith("application/json")
    document = orjson.loads(body)
    assert document["swagger"] == "2.0"
    assert "com.example.stable.v1.CronTab" in document["definitions"]
    _assert_kubectl_parsable(document)
    content_type, body = _get(server.url + "/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert content_type == PROTOBUF_MEDIA_TYPE
    assert body == encode_document(document)
