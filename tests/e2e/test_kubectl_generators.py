"""kubectl's generator commands, which send protobuf bodies.

``kubectl create deployment|configmap|secret|namespace|service|job|cronjob|
serviceaccount`` (and ``run``, ``expose``) POST
``application/vnd.kubernetes.protobuf`` and do not fall back to JSON; the
replies stay JSON (kubectl's ``Accept`` lists it). Each object is read back
with ``kubectl get -o json``; the strongest check creates every object twice,
once by the generator (protobuf) and once from the same command's
``--dry-run=client -o json`` (JSON), and requires the stored objects to match.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.support.kube import Kubectl

PROTOBUF = "application/vnd.kubernetes.protobuf"


def get(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    return json.loads(kubectl.run("get", *args, "-o", "json").stdout)


def test_generators_send_protobuf_and_get_json_back(kubectl):
    result = kubectl.run("create", "configmap", "c1", "--from-literal=a=b", "-v=8")
    assert result.stdout == "configmap/c1 created\n"
    assert f"Content-Type: {PROTOBUF}" in result.stderr
    assert "Response Status: 201 Created" in result.stderr
    assert "Content-Type: application/json" in result.stderr.split("Response Status: 201")[1]
    assert get(kubectl, "configmap", "c1")["data"] == {"a": "b"}


def test_each_generator_creates_an_object_that_reads_back(sqlite_kubectl, tmp_path):
    k = sqlite_kubectl
    blob = bytes(range(256))
    (tmp_path / "blob.bin").write_bytes(blob)
    outputs = [
        k.run("create", "namespace", "x1").stdout,
        k.run("create", "configmap", "c1", "--from-literal=a=b", "--from-literal=empty=").stdout,
        k.run("create", "secret", "generic", "s1", "--from-literal=k=v", f"--from-file=blob={tmp_path / 'blob.bin'}").stdout,
        k.run("create", "deployment", "d1", "--image=nginx:1.27", "--replicas=3", "--port=8080").stdout,
        k.run("create", "deployment", "d0", "--image=nginx:1.27", "--replicas=0").stdout,
        k.run("create", "job", "j1", "--image=busybox", "--", "echo", "hi").stdout,
        k.run("create", "cronjob", "cj1", "--image=busybox", "--schedule=*/5 * * * *", "--", "date").stdout,
        k.run("create", "serviceaccount", "sa1").stdout,
        k.run("create", "service", "clusterip", "web", "--tcp=80:8080").stdout,
        k.run("create", "service", "nodeport", "np", "--tcp=443:8443", "--node-port=30443").stdout,
    ]
    assert outputs == [
        "namespace/x1 created\n",
        "configmap/c1 created\n",
        "secret/s1 created\n",
        "deployment.apps/d1 created\n",
        "deployment.apps/d0 created\n",
        "job.batch/j1 created\n",
        "cronjob.batch/cj1 created\n",
        "serviceaccount/sa1 created\n",
        "service/web created\n",
        "service/np created\n",
    ]
    assert get(k, "namespace", "x1")["status"]["phase"] == "Active"
    assert get(k, "configmap", "c1")["data"] == {"a": "b", "empty": ""}

    secret = get(k, "secret", "s1")
    assert secret["type"] == "Opaque"
    assert secret["data"]["k"] == base64.b64encode(b"v").decode()
    assert base64.b64decode(secret["data"]["blob"]) == blob

    d1 = get(k, "deployment", "d1")
    assert d1["spec"]["replicas"] == 3
    assert d1["spec"]["selector"] == {"matchLabels": {"app": "d1"}}
    (container,) = d1["spec"]["template"]["spec"]["containers"]
    assert (container["name"], container["image"]) == ("nginx", "nginx:1.27")
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert d1["spec"]["template"]["metadata"]["labels"] == {"app": "d1"}
    assert d1["spec"]["strategy"]["type"] == "RollingUpdate"  # defaulted from the empty strategy
    assert get(k, "deployment", "d0")["spec"]["replicas"] == 0  # a pointer's zero survives the wire

    job = get(k, "job", "j1")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"

    cronjob = get(k, "cronjob", "cj1")
    assert cronjob["spec"]["schedule"] == "*/5 * * * *"
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"] == ["date"]

    assert get(k, "serviceaccount", "sa1")["metadata"]["name"] == "sa1"

    web = get(k, "service", "web")
    assert web["spec"]["type"] == "ClusterIP"
    assert web["spec"]["ports"] == [{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    assert web["spec"]["selector"] == {"app": "web"}
    np = get(k, "service", "np")
    assert (np["spec"]["type"], np["spec"]["ports"][0]["nodePort"], np["spec"]["ports"][0]["targetPort"]) == ("NodePort", 30443, 8443)


GENERATORS = [
    ("configmap", "c1", "--from-literal=a=b", "--from-literal=x="),
    ("secret", "generic", "s1", "--from-literal=k=v", "--type=example.com/kind"),
    ("secret", "docker-registry", "r1", "--docker-username=u", "--docker-password=p", "--docker-server=example.com"),
    ("deployment", "d1", "--image=nginx", "--image=busybox", "--replicas=2", "--port=80"),
    ("job", "j1", "--image=busybox", "--", "sh", "-c", "exit 0"),
    ("cronjob", "cj1", "--image=busybox", "--schedule=0 * * * *", "--restart=Never"),
    ("serviceaccount", "sa1"),
    ("service", "clusterip", "web", "--tcp=80:8080", "--tcp=443"),
    ("service", "clusterip", "headless", "--clusterip=None"),
    ("service", "externalname", "ext", "--external-name=example.com"),
]

#: what differs between two copies of one object for reasons other than the body
_VOLATILE_META = ("uid", "resourceVersion", "creationTimestamp", "namespace", "managedFields", "generation")


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    for key in _VOLATILE_META:
        obj["metadata"].pop(key, None)
    obj.pop("status", None)
    spec = obj.get("spec", {})
    if obj["kind"] == "Service":
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    if obj["kind"] == "Job":  # the uid-derived selector labels, if the server sets them
        for labels in (spec.get("selector", {}).get("matchLabels", {}), spec["template"]["metadata"].get("labels", {})):
            for key in [k for k in labels if k.endswith("controller-uid")]:
                del labels[key]
    return obj


def test_protobuf_and_json_bodies_store_the_same_objects(sqlite_kubectl):
    k = sqlite_kubectl
    for ns in ("pb", "js"):
        k.run("create", "namespace", ns)
    for args in GENERATORS:
        k.run("create", "-n", "pb", *args)
        as_json = k.run("create", "-n", "js", "--dry-run=client", "-o", "json", *args).stdout
        k.run("create", "-f", "-", input=as_json)
    kinds = "configmaps,secrets,deployments,jobs,cronjobs,serviceaccounts,services"
    stored = {
        ns: {(o["kind"], o["metadata"]["name"]): _comparable(o) for o in get(k, kinds, "-n", ns)["items"]}
        for ns in ("pb", "js")
    }
    assert len(stored["pb"]) == len(GENERATORS)
    assert stored["pb"].keys() == stored["js"].keys()
    for key, obj in stored["pb"].items():
        assert obj == stored["js"][key], key


def test_expose_set_image_and_rollout_restart(sqlite_kubectl):
    k = sqlite_kubectl
    k.run("create", "deployment", "d1", "--image=nginx:1.27", "--port=8080")
    assert k.run("expose", "deployment", "d1", "--port=80", "--target-port=8080").stdout == "service/d1 exposed\n"
    service = get(k, "service", "d1")
    assert service["spec"]["selector"] == {"app": "d1"}
    assert service["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 8080}]

    assert k.run("set", "image", "deployment/d1", "nginx=nginx:1.28").stdout == "deployment.apps/d1 image updated\n"
    assert get(k, "deployment", "d1")["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"

    assert k.run("rollout", "restart", "deployment", "d1").stdout == "deployment.apps/d1 restarted\n"
    annotations = get(k, "deployment", "d1")["spec"]["template"]["metadata"]["annotations"]
    assert "kubectl.kubernetes.io/restartedAt" in annotations


def test_run_creates_a_pod_from_protobuf(sqlite_kubectl):
    k = sqlite_kubectl
    assert k.run("run", "p1", "--image=nginx", "--labels=app=p1", "--env=A=1", "--port=80").stdout == "pod/p1 created\n"
    pod = get(k, "pod", "p1")
    assert pod["metadata"]["labels"] == {"app": "p1"}
    (container,) = pod["spec"]["containers"]
    assert (container["env"], container["ports"]) == ([{"name": "A", "value": "1"}], [{"containerPort": 80, "protocol": "TCP"}])


def test_autoscale_creates_a_horizontal_pod_autoscaler(sqlite_kubectl):
    k = sqlite_kubectl
    k.run("create", "deployment", "d1", "--image=nginx")
    result = k.run("autoscale", "deployment", "d1", "--max=3")
    assert result.stdout == "horizontalpodautoscaler.autoscaling/d1 autoscaled\n"
    hpa = get(k, "hpa", "d1")
    assert (hpa["spec"]["scaleTargetRef"]["kind"], hpa["spec"]["maxReplicas"]) == ("Deployment", 3)


def test_create_from_a_file_still_sends_json(sqlite_kubectl, tmp_path):
    k = sqlite_kubectl
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-file"}, "data": {"x": "1"}}
    (tmp_path / "cm.json").write_text(json.dumps(manifest))
    result = k.run("create", "-f", str(tmp_path / "cm.json"), "-v=8")
    assert result.stdout == "configmap/from-file created\n"
    assert "Content-Type: application/json" in result.stderr
    assert PROTOBUF not in result.stderr.split("Request Body")[-1].split("Response Status")[0]
    assert get(k, "configmap", "from-file")["data"] == {"x": "1"}


# -- malformed and mismatched bodies, sent by hand -------------------------


def _ld(field: int, payload: bytes) -> bytes:
    return bytes([field << 3 | 2, len(payload)]) + payload  # short payloads only


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + _ld(1, _ld(1, api_version.encode()) + _ld(2, kind.encode())) + _ld(2, raw)


def _post(url: str, body: bytes, content_type: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type, "Accept": f"{PROTOBUF},application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.parametrize(
    ("path", "body", "content_type", "code", "message"),
    [
        ("/api/v1/namespaces/default/configmaps", _envelope("v1", "ConfigMap", _ld(1, _ld(1, b"hand"))), PROTOBUF, 201, ""),
        ("/api/v1/namespaces/default/configmaps", b'{"kind":"ConfigMap"}', PROTOBUF, 400, "protobuf prefix"),
        ("/api/v1/namespaces/default/configmaps", b"k8s\x00\x0a\x7f", PROTOBUF, 400, "not a valid Kubernetes protobuf object"),
        ("/api/v1/namespaces/default/configmaps", _envelope("v1", "Widget", b""), PROTOBUF, 400, "Kind=Widget"),
        ("/api/v1/namespaces/default/pods", _envelope("v1", "ConfigMap", _ld(1, _ld(1, b"x"))), PROTOBUF, 400, "does not match"),
        ("/apis/apps/v1/namespaces/default/deployments", _envelope("apps/v2", "Deployment", b""), PROTOBUF, 400, "apps/v2"),
        ("/api/v1/namespaces/default/configmaps", b"x", "application/cbor", 415, PROTOBUF),
    ],
)
def test_protobuf_bodies_are_checked(sqlite_apiserver, path, body, content_type, code, message):
    status, reply = _post(sqlite_apiserver.url + path, body, content_type)
    assert status == code, reply
    if code == 201:
        assert (reply["kind"], reply["metadata"]["name"]) == ("ConfigMap", "hand")
    else:
        assert reply["kind"] == "Status"
        assert message in reply["message"]


def test_a_job_from_a_cronjob_carries_its_owner_reference(sqlite_kubectl):
    k = sqlite_kubectl
    k.run("create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *", "--", "date")
    assert k.run("create", "job", "manual", "--from=cronjob/nightly").stdout == "job.batch/manual created\n"
    job = get(k, "job", "manual")
    (owner,) = job["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("CronJob", "nightly", True)
    assert owner["uid"] == get(k, "cronjob", "nightly")["metadata"]["uid"]
    assert job["metadata"]["annotations"] == {"cronjob.kubernetes.io/instantiate": "manual"}
