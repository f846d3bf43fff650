"""OpenAPI v3 documents: completeness, what kubectl checks, and a real `kubectl explain`."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from k8py.apiserver.openapi.v3 import OpenAPIService, convert_schema
from k8py.apiserver.openapi.paths import PATCH_CONTENT_TYPES, operation_group_name
from k8py.apiserver.registry import Registry, ResourceDefinition


def _pods() -> ResourceDefinition:
    return ResourceDefinition(
        group="", version="v1", kind="Pod", plural="pods", singular="pod", namespaced=True,
        short_names=("po",), subresources=frozenset({"status"}),
    )


def _deployments() -> ResourceDefinition:
    return ResourceDefinition(
        group="apps", version="v1", kind="Deployment", plural="deployments",
        singular="deployment", namespaced=True, subresources=frozenset({"status", "scale"}),
        openapi_name="io.k8s.api.apps.v1.Deployment",
    )


def _nodes() -> ResourceDefinition:
    return ResourceDefinition(
        group="", version="v1", kind="Node", plural="nodes", singular="node", namespaced=False,
        subresources=frozenset({"status"}),
    )


def _crontabs() -> ResourceDefinition:
    return ResourceDefinition(
        group="stable.example.com", version="v1", kind="CronTab", plural="crontabs",
        singular="crontab", namespaced=True,
    )


@pytest.fixture
def registry() -> Registry:
    r = Registry()
    for d in (_pods(), _nodes(), _deployments()):
        r.add(d)
    return r


def _doc(service: OpenAPIService, path: str) -> dict[str, Any]:
    body = service.document(path)
    assert body is not None, path
    return orjson.loads(body)


def _refs(node: Any, out: set[str]) -> set[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                out.add(v)
            else:
                _refs(v, out)
    elif isinstance(node, list):
        for v in node:
            _refs(v, out)
    return out


def test_root_lists_every_group_version_with_its_hash(registry: Registry) -> None:
    service = OpenAPIService(registry)
    root = orjson.loads(service.root())
    assert set(root["paths"]) == {"api/v1", "apis/apps/v1"}
    for path, entry in root["paths"].items():
        assert entry["serverRelativeURL"] == f"/openapi/v3/{path}?hash={service.hash(path)}"
        assert len(service.hash(path) or "") == 128


def test_document_has_every_path_of_every_resource(registry: Registry) -> None:
    doc = _doc(OpenAPIService(registry), "api/v1")
    assert doc["openapi"] == "3.0.0"
    assert set(doc["paths"]) == {
        "/api/v1/namespaces/{namespace}/pods",
        "/api/v1/namespaces/{namespace}/pods/{name}",
        "/api/v1/namespaces/{namespace}/pods/{name}/status",
        "/api/v1/pods",
        "/api/v1/nodes",
        "/api/v1/nodes/{name}",
        "/api/v1/nodes/{name}/status",
    }
    pod = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]
    assert set(pod) == {"parameters", "get", "put", "patch", "delete"}
    assert pod["patch"]["operationId"] == "patchCoreV1NamespacedPod"
    assert doc["paths"]["/api/v1/nodes/{name}"]["get"]["operationId"] == "readCoreV1Node"


def test_every_patch_operation_lists_field_validation_and_carries_gvk(registry: Registry) -> None:
    service = OpenAPIService(registry)
    for path in ("api/v1", "apis/apps/v1"):
        doc = _doc(service, path)
        patches = [(p, ops["patch"]) for p, ops in doc["paths"].items() if "patch" in ops]
        assert patches
        for p, op in patches:
            names = {(q["name"], q["in"]) for q in op["parameters"]}
            assert {("dryRun", "query"), ("fieldManager", "query"),
                    ("fieldValidation", "query"), ("force", "query")} <= names, p
            assert op["x-kubernetes-action"] == "patch"
            assert set(op["x-kubernetes-group-version-kind"]) == {"group", "version", "kind"}
            assert tuple(op["requestBody"]["content"]) == PATCH_CONTENT_TYPES


def test_scale_subresource_is_tagged_with_the_autoscaling_scale_kind(registry: Registry) -> None:
    doc = _doc(OpenAPIService(registry), "apis/apps/v1")
    scale = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert scale["patch"]["x-kubernetes-group-version-kind"] == {
        "group": "autoscaling", "kind": "Scale", "version": "v1"
    }
    assert scale["patch"]["operationId"] == "patchAppsV1NamespacedDeploymentScale"
    assert "io.k8s.api.autoscaling.v1.Scale" in doc["components"]["schemas"]


def test_every_ref_resolves_within_the_document(registry: Registry) -> None:
    service = OpenAPIService(registry)
    for path in ("api/v1", "apis/apps/v1"):
        doc = _doc(service, path)
        schemas = doc["components"]["schemas"]
        refs = _refs(doc, set())
        assert refs
        for ref in refs:
            assert ref.startswith("#/components/schemas/"), ref
            assert ref.removeprefix("#/components/schemas/") in schemas, ref
        assert "$defs" not in orjson.dumps(doc).decode()


def test_schemas_keep_upstream_extensions_and_lose_null_types(registry: Registry) -> None:
    schemas = _doc(OpenAPIService(registry), "api/v1")["components"]["schemas"]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["type"] == "array"
    assert containers["items"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}
    assert schemas["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Pod", "version": "v1"}
    ]
    spec = schemas["io.k8s.api.core.v1.Pod"]["properties"]["spec"]
    assert spec["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}]
    assert spec["description"].startswith("Specification of the desired behavior")
    assert schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    assert schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]["format"] == "date-time"
    text = orjson.dumps(schemas).decode()
    assert '"null"' not in text


def test_convert_schema_rewrites_refs_and_nullable_types() -> None:
    refs: set[str] = set()
    out = convert_schema(
        {"type": ["object", "null"], "properties": {
            "a": {"$ref": "#/$defs/x.Y"},
            "b": {"$ref": "#/$defs/x.Z", "description": "d"},
            "c": {"type": ["string", "null"], "enum": ["A", "B"], "format": "byte"},
        }},
        refs,
    )
    assert out == {"type": "object", "properties": {
        "a": {"$ref": "#/components/schemas/x.Y"},
        "b": {"description": "d", "allOf": [{"$ref": "#/components/schemas/x.Z"}]},
        "c": {"type": "string", "enum": ["A", "B"], "format": "byte"},
    }}
    assert refs == {"x.Y", "x.Z"}


def test_resource_added_at_run_time_appears_and_changes_the_root(registry: Registry) -> None:
    service = OpenAPIService(registry)
    before = service.root()
    assert service.document("apis/stable.example.com/v1") is None
    registry.add(_crontabs())
    assert service.root() != before
    doc = _doc(service, "apis/stable.example.com/v1")
    schema = doc["components"]["schemas"]["com.example.stable.v1.CronTab"]
    assert schema["x-kubernetes-preserve-unknown-fields"] is True
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "stable.example.com", "kind": "CronTab", "version": "v1"}
    ]
    patch = doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert patch["operationId"] == "patchStableExampleComV1NamespacedCronTab"
    for ref in _refs(doc, set()):
        assert ref.removeprefix("#/components/schemas/") in doc["components"]["schemas"]


def test_documents_are_cached_until_the_registry_changes(registry: Registry) -> None:
    service = OpenAPIService(registry)
    first = service.document("api/v1")
    assert service.document("api/v1") is first
    assert service.document("/api/v1") is first


def test_operation_group_names_follow_upstream() -> None:
    assert operation_group_name("", "v1") == "CoreV1"
    assert operation_group_name("rbac.authorization.k8s.io", "v1") == "RbacAuthorizationV1"
    assert operation_group_name("apiextensions.k8s.io", "v1") == "ApiextensionsV1"


# --- kubectl explain against a tiny server serving our documents ------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _explain_app(service: OpenAPIService) -> web.Application:
    async def version(_: web.Request) -> web.Response:
        return web.json_response({
            "major": "1", "minor": "32", "gitVersion": "v1.32.0", "gitCommit": "",
            "gitTreeState": "clean", "buildDate": "2024-12-11T00:00:00Z",
            "goVersion": "go1.23.3", "compiler": "gc", "platform": "linux/amd64",
        })

    async def api(_: web.Request) -> web.Response:
        return web.json_response({"kind": "APIVersions", "versions": ["v1"],
                                  "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})

    async def api_v1(_: web.Request) -> web.Response:
        verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        return web.json_response({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
             "verbs": verbs, "shortNames": ["po"]},
        ]})

    async def apis(_: web.Request) -> web.Response:
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})

    async def root(_: web.Request) -> web.Response:
        return web.Response(body=service.root(), content_type="application/json")

    async def document(request: web.Request) -> web.Response:
        body = service.document(request.match_info["path"])
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_get("/api", api)
    app.router.add_get("/api/v1", api_v1)
    app.router.add_get("/apis", apis)
    app.router.add_get("/openapi/v3", root)
    app.router.add_get("/openapi/v3/{path:.+}", document)
    return app


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
async def test_kubectl_explain_prints_field_docs_from_our_documents(
    registry: Registry, tmp_path: Path
) -> None:
    runner = web.AppRunner(_explain_app(OpenAPIService(registry)))
    await runner.setup()
    port = _free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        kubeconfig = tmp_path / "config"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n"
            f"    server: http://127.0.0.1:{port}\ncontexts:\n- name: t\n  context:\n"
            "    cluster: t\n    user: u\ncurrent-context: t\nusers:\n- name: u\n  user: {}\n"
        )
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "explain", "pods.spec.containers", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        await runner.cleanup()
    text = out.decode()
    assert proc.returncode == 0, err.decode()
    assert "KIND:       Pod" in text
    assert "VERSION:    v1" in text
    assert "FIELD: containers <[]Container>" in text
    assert "List of containers belonging to the pod" in text
    assert "imagePullPolicy\t<string>" in text
