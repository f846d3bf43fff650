"""An aggregated API server (a tiny one, in the test) behind an APIService,
reached through the real kubectl: discovery, ``get --raw``, ``get <resource>``,
the front-proxy identity it is sent, availability as the APIService's status,
and the local APIServices every built-in group/version has."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from typing import Any

import pytest
import yaml
from aiohttp import web

from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage
from tests.support.webhook_server import HTTPSServer

pytestmark = pytest.mark.kubectl

GROUP, VERSION = "wardle.example.com", "v1alpha1"
GV = f"{GROUP}/{VERSION}"
SEEN: web.AppKey[list[dict[str, Any]]] = web.AppKey("seen")
RELEASE: web.AppKey[asyncio.Event] = web.AppKey("release")


def wait_for(predicate: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def wardle_app() -> web.Application:
    """A minimal aggregated API server: discovery for wardle.example.com/v1alpha1
    and a read-only ``flunders`` list that echoes who the front proxy said asked."""
    app = web.Application()
    seen: list[dict[str, Any]] = []
    app[SEEN] = seen

    async def discovery(request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GV, "resources": [
            {"name": "flunders", "singularName": "flunder", "namespaced": True, "kind": "Flunder", "verbs": ["get", "list"],
             "shortNames": ["fl"]}]})

    async def flunders(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(x[0] for x in (peer or {}).get("subject", ()))
        seen.append({"user": request.headers.get("X-Remote-User"), "groups": request.headers.getall("X-Remote-Group", []),
                     "authorization": request.headers.get("Authorization"), "cn": subject.get("commonName")})
        namespace = request.match_info["ns"]
        item = {"apiVersion": GV, "kind": "Flunder",
                "metadata": {"name": "first", "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"askedBy": request.headers.get("X-Remote-User", "")}}
        return web.json_response({"apiVersion": GV, "kind": "FlunderList", "metadata": {"resourceVersion": "1"}, "items": [item]})

    async def watch(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return await flunders(request)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"type":"ADDED","object":{"kind":"Flunder","metadata":{"name":"first"}}}\n')
        await request.app[RELEASE].wait()  # the second event only once the test has seen the first
        await response.write(b'{"type":"ADDED","object":{"kind":"Flunder","metadata":{"name":"second"}}}\n')
        await response.write_eof()
        return response

    document = {"openapi": "3.0.0", "info": {"title": "wardle", "version": VERSION}, "paths": {}, "components": {"schemas": {
        "com.example.wardle.v1alpha1.Flunder": {"type": "object", "x-kubernetes-group-version-kind": [
            {"group": GROUP, "version": VERSION, "kind": "Flunder"}]}}}}

    async def openapi_root(request: web.Request) -> web.Response:
        return web.json_response({"paths": {f"apis/{GV}": {"serverRelativeURL": f"/openapi/v3/apis/{GV}?hash=W1"}}})

    async def openapi_document(request: web.Request) -> web.Response:
        return web.json_response(document)

    app.router.add_get("/openapi/v3", openapi_root)
    app.router.add_get(f"/openapi/v3/apis/{GV}", openapi_document)
    app[RELEASE] = asyncio.Event()
    app.router.add_get(f"/apis/{GV}", discovery)
    app.router.add_get(f"/apis/{GV}/namespaces/{{ns}}/flunders", watch)
    return app


@pytest.fixture
def apiserver(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), apiservice_check_interval=1.0) as server:
        yield server


@pytest.fixture
def kubectl(apiserver, tmp_path) -> Kubectl:
    return Kubectl(apiserver.url, str(tmp_path / "home"))


def register_wardle(kubectl: Kubectl, backend: HTTPSServer) -> None:
    kubectl.run("create", "namespace", "wardle")
    kubectl.run("apply", "-f", "-", input=yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api", "namespace": "wardle"},
         "spec": {"ports": [{"port": 443, "targetPort": 8443}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "api", "namespace": "wardle"},
         "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": backend.port}]}]},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": f"{VERSION}.{GROUP}"},
         "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 1000, "versionPriority": 15,
                  "service": {"namespace": "wardle", "name": "api"}, "caBundle": backend.ca_bundle}},
    ]))


def test_an_aggregated_api_is_discovered_proxied_and_sent_the_front_proxy_identity(apiserver, kubectl):
    front_proxy_ca = apiserver.server.aggregator.identity.ca_pem
    with HTTPSServer(wardle_app(), dns_names=("api.wardle.svc",), client_ca_pem=front_proxy_ca) as backend:
        register_wardle(kubectl, backend)
        wait_for(lambda: "True" in kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}", "--no-headers").stdout,
                 what="the APIService to become Available")
        assert kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}").stdout.splitlines()[0].split() == [
            "NAME", "SERVICE", "AVAILABLE", "AGE"]
        assert kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}", "--no-headers").stdout.split()[1:3] == ["wardle/api", "True"]
        raw = json.loads(kubectl.run("get", "--raw", f"/apis/{GV}").stdout)
        assert [r["name"] for r in raw["resources"]] == ["flunders"]
        assert GV in kubectl.run("api-versions").stdout.split()
        root = json.loads(kubectl.run("get", "--raw", "/openapi/v3").stdout)
        assert root["paths"][f"apis/{GV}"] == {"serverRelativeURL": f"/openapi/v3/apis/{GV}?hash=W1"}
        assert "apis/apps/v1" in root["paths"]  # beside the server's own
        served = json.loads(kubectl.run("get", "--raw", f"/openapi/v3/apis/{GV}?hash=W1").stdout)
        assert list(served["components"]["schemas"]) == ["com.example.wardle.v1alpha1.Flunder"]
        assert "flunders" in kubectl.run("api-resources", f"--api-group={GROUP}").stdout
        listed = kubectl.run("get", "flunders", "-n", "wardle", "-o", "json")
        items = json.loads(listed.stdout)["items"]
        assert [(i["metadata"]["name"], i["spec"]["askedBy"]) for i in items] == [("first", "system:unsecured")]
        table = kubectl.run("get", "fl", "-n", "wardle").stdout.splitlines()
        assert table[0].split()[0] == "NAME" and table[1].split()[0] == "first"
        # a watch streams through the relay: the first event arrives while the backend still holds the second
        with urllib.request.urlopen(f"{apiserver.url}/apis/{GV}/namespaces/wardle/flunders?watch=true", timeout=30) as stream:
            first = json.loads(stream.readline())
            backend.loop.call_soon_threadsafe(backend.app[RELEASE].set)
            second = json.loads(stream.readline())
        assert (first["object"]["metadata"]["name"], second["object"]["metadata"]["name"]) == ("first", "second")
        seen = backend.app[SEEN]
        assert seen[0]["cn"] == "front-proxy-client"
        assert seen[0]["groups"] == ["system:masters", "system:authenticated"]
        assert seen[0]["authorization"] is None


def test_an_apiservice_whose_server_is_gone_reports_why_and_its_requests_fail_with_503(apiserver, kubectl):
    with HTTPSServer(wardle_app(), dns_names=("api.wardle.svc",)) as backend:
        register_wardle(kubectl, backend)
        wait_for(lambda: "True" in kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}", "--no-headers").stdout,
                 what="the APIService to become Available")
    # the backend has stopped: the next check marks it unavailable
    row = wait_for(lambda: (out := kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}", "--no-headers").stdout)
                   and "FailedDiscoveryCheck" in out and out, what="the APIService to become unavailable")
    assert row.split()[1:4] == ["wardle/api", "False", "(FailedDiscoveryCheck)"]
    status = json.loads(kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}", "-o", "json").stdout)["status"]
    (condition,) = status["conditions"]
    assert condition["message"].startswith(f"failing or missing response from https://127.0.0.1:{backend.port}/apis/{GV}:")
    failed = kubectl.run("get", "--raw", f"/apis/{GV}/namespaces/wardle/flunders", check=False)
    assert failed.returncode == 1
    assert failed.stderr.startswith("Error from server (ServiceUnavailable): the server is currently unable to handle "
                                    f"the request ({VERSION}.{GROUP}: ")


def test_every_builtin_group_version_has_a_local_apiservice(apiserver, kubectl):
    rows = [line.split() for line in kubectl.run("get", "apiservices", "--no-headers").stdout.splitlines()]
    names = {r[0] for r in rows}
    assert {"v1.", "v1.apps", "v1.batch", "v2.autoscaling", "v1.apiextensions.k8s.io", "v1.admissionregistration.k8s.io",
            "v1.apiregistration.k8s.io", "v1.coordination.k8s.io"} <= names
    assert all(r[1:3] == ["Local", "True"] for r in rows)
    core = json.loads(kubectl.run("get", "apiservice", "v1.", "-o", "json").stdout)
    assert core["spec"] == {"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}
    assert core["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    assert core["status"]["conditions"][0]["reason"] == "Local"



def test_a_given_front_proxy_ca_and_client_certificate_are_used_and_published(tmp_path):
    from k8py.client.certs import encode_cert_pem, encode_private_key_pem, new_self_signed_ca

    ca = new_self_signed_ca("my-front-proxy-ca")
    cert, key = ca.issue_client("my-proxy")
    files = {"ca": tmp_path / "ca.crt", "cert": tmp_path / "proxy.crt", "key": tmp_path / "proxy.key"}
    files["ca"].write_bytes(ca.cert_pem)
    files["cert"].write_bytes(encode_cert_pem(cert))
    files["key"].write_bytes(encode_private_key_pem(key))
    with ServerThread(sqlite_storage(str(tmp_path / "data")), apiservice_check_interval=1.0,
                      requestheader_client_ca_file=str(files["ca"]), proxy_client_cert_file=str(files["cert"]),
                      proxy_client_key_file=str(files["key"]), requestheader_allowed_names=("my-proxy",)) as server:
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        published = json.loads(kubectl.run("get", "configmap", "-n", "kube-system", "extension-apiserver-authentication",
                                           "-o", "json").stdout)["data"]
        assert published["requestheader-client-ca-file"] == ca.cert_pem.decode()
        assert json.loads(published["requestheader-allowed-names"]) == ["my-proxy"]
        assert json.loads(published["requestheader-username-headers"]) == ["X-Remote-User"]
        assert json.loads(published["requestheader-group-headers"]) == ["X-Remote-Group"]
        with HTTPSServer(wardle_app(), dns_names=("api.wardle.svc",), client_ca_pem=ca.cert_pem) as backend:
            register_wardle(kubectl, backend)
            wait_for(lambda: "True" in kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}", "--no-headers").stdout,
                     what="the APIService to become Available")
            kubectl.run("get", "--raw", f"/apis/{GV}/namespaces/wardle/flunders")
            assert backend.app[SEEN][-1]["cn"] == "my-proxy"


def test_incomplete_front_proxy_flags_stop_the_api_server_with_what_to_give(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "k8py", "apiserver", "--port", "0", "--data-dir", str(tmp_path),
                           "--proxy-client-cert-file", str(tmp_path / "x.crt")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == ("k8py apiserver: --requestheader-client-ca-file, --proxy-client-cert-file and "
                           "--proxy-client-key-file go together: give all three (or none, and a front-proxy CA is made at start)\n")
