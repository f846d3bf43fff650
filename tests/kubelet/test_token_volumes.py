"""Projected service-account tokens: requested from a real API server, bound to the pod, refreshed
at 80% of their life on a fake clock, written with the ..data swap; and in a real kubelet's pod at
/var/run/secrets/kubernetes.io/serviceaccount (token, ca.crt, namespace)."""

from __future__ import annotations

import base64
import json
import os
import time
from typing import Any, AsyncIterator, Iterator

import kubernetes
import pytest

from k8py.client.config import ClientConfig
from k8py.client.resource import Resource
from k8py.client.resources import PODS, SERVICE_ACCOUNTS
from k8py.client.rest import RestClient
from k8py.kubelet.token_manager import TokenManager
from k8py.kubelet.volumes.manager import MountError, VolumeManager
from tests.kubelet.conftest import Node, pod_manifest
from tests.support.servers import ServerThread, sqlite_storage

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", False, "TokenReview")
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class Wall:
    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def wall() -> Wall:
    return Wall()


@pytest.fixture
def server(tmp_path, wall) -> Iterator[ServerThread]:
    with ServerThread(sqlite_storage(str(tmp_path / "data")), token_clock=wall) as s:
        yield s


@pytest.fixture
async def client(server) -> AsyncIterator[RestClient]:
    async with RestClient(ClientConfig(server=server.url)) as c:
        yield c


def _claims(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def _volume(expiration: int = 600) -> dict[str, Any]:
    return {"name": "kube-api-access-abcde", "projected": {"defaultMode": 0o644, "sources": [
        {"serviceAccountToken": {"expirationSeconds": expiration, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}


async def test_the_token_is_bound_to_the_pod_and_refreshed_at_80_percent_of_its_life(tmp_path, client, wall) -> None:
    await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": "default"}}, namespace="default")
    await client.create(Resource("", "v1", "configmaps", True, "ConfigMap"),
                        {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "CA"}}, namespace="default")
    pod = await client.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}],
                                                                          "volumes": [_volume()]}}, namespace="default")

    async def request(ns: str, sa: str, body: dict[str, Any]) -> dict[str, Any]:
        return await client.create(SERVICE_ACCOUNTS, body, namespace=ns, name=sa, subresource="token")

    async def get(kind: str, ns: str, name: str) -> dict[str, Any] | None:
        return await client.get(Resource("", "v1", "configmaps", True, "ConfigMap"), ns, name)

    tokens = TokenManager(request, clock=wall, jitter=lambda: 0.0)
    vm = VolumeManager(str(tmp_path / "pods"), get=get, node_alloc=dict, tokens=tokens)
    paths = await vm.setup(pod, pod_ip="", host_ip="")
    target = paths["kube-api-access-abcde"]
    first = open(os.path.join(target, "token")).read()
    claims = _claims(first)
    assert claims["kubernetes.io"]["pod"] == {"name": "p", "uid": pod["metadata"]["uid"]}
    assert claims["exp"] - claims["iat"] == 600
    assert open(os.path.join(target, "ca.crt")).read() == "CA" and open(os.path.join(target, "namespace")).read() == "default"
    assert os.path.islink(os.path.join(target, "token")) and os.readlink(os.path.join(target, "token")) == "..data/token"
    data_dir = os.readlink(os.path.join(target, "..data"))

    wall.now += 479  # 79.8% of its life: still fresh
    await vm.setup(pod, pod_ip="", host_ip="")
    assert open(os.path.join(target, "token")).read() == first
    wall.now += 2  # past 80%
    await vm.setup(pod, pod_ip="", host_ip="")
    second = open(os.path.join(target, "token")).read()
    assert second != first and _claims(second)["iat"] == claims["iat"] + 481
    assert os.readlink(os.path.join(target, "..data")) != data_dir  # swapped, not rewritten in place
    review = await client.create(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                                 "spec": {"token": second}})
    assert review["status"]["user"]["username"] == "system:serviceaccount:default:default"
    assert review["status"]["user"]["extra"]["authentication.kubernetes.io/pod-name"] == ["p"]

    # the service account goes: refreshing fails, the cached token serves until it expires, then the mount fails
    await client.delete(SERVICE_ACCOUNTS, "default", "default")
    wall.now += 481
    await vm.setup(pod, pod_ip="", host_ip="")
    assert open(os.path.join(target, "token")).read() == second
    wall.now += 200
    with pytest.raises(MountError) as err:
        await vm.setup(pod, pod_ip="", host_ip="")
    assert str(err.value) == ('MountVolume.SetUp failed for volume "kube-api-access-abcde" : failed to fetch token: '
                              'serviceaccounts "default" not found')
    vm.cleanup(pod["metadata"]["uid"])


def test_a_pod_reads_its_service_account_files_where_upstream_mounts_them(node: Node, ns: str) -> None:
    node.core.create_namespaced_service_account(ns, {"metadata": {"name": "default"}})
    node.core.create_namespaced_config_map(ns, {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "THE-CA"}})
    script = f"cat {SA_DIR}/token; echo; cat {SA_DIR}/ca.crt; echo; cat {SA_DIR}/namespace; echo"
    node.core.create_namespaced_pod(ns, pod_manifest("reader", [{
        "name": "c", "image": "busybox", "command": ["sh", "-c", script],
        "volumeMounts": [{"name": "kube-api-access-abcde", "mountPath": SA_DIR, "readOnly": True}],
    }], restartPolicy="Never", volumes=[_volume(3607)]))
    pod = node.wait_pod(ns, "reader", lambda p: (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"), what="finished")
    logs = node.core.read_namespaced_pod_log("reader", ns).splitlines()
    assert pod["status"]["phase"] == "Succeeded", logs
    token, ca, namespace = logs[:3]
    assert (ca, namespace) == ("THE-CA", ns)
    claims = _claims(token)
    assert claims["kubernetes.io"]["pod"] == {"name": "reader", "uid": pod["metadata"]["uid"]}
    assert claims["kubernetes.io"]["node"]["name"] == "node-1"
    assert claims["kubernetes.io"]["warnafter"] == claims["iat"] + 3607  # 3607 s asked: extended, as upstream
    review = kubernetes.client.AuthenticationV1Api(node.api).create_token_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
    assert review.status.user.username == f"system:serviceaccount:{ns}:default"
