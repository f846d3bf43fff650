"""Image GC by disk thresholds, and which credentials a pull tries."""

from __future__ import annotations

import base64
import json
import os

import pytest

from k8py.kubelet.images.credentials import Keyring, keyring_from_file, keyring_from_secret
from k8py.kubelet.images.gc import GCPolicy, ImageGC
from k8py.kubelet.images.puller import ImagePuller
from k8py.kubelet.images.reference import parse, pulled_from_registry
from k8py.kubelet.pull_credentials import credentials_for
from k8py.kubelet.runtime.protocols import AuthConfig
from tests.support.oci_registry import Registry, busybox_layer, image


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_gc_removes_unused_images_least_recently_used_first_down_to_the_low_threshold(registry: Registry, tmp_path) -> None:
    clock = Clock()
    puller = ImagePuller(str(tmp_path / "store"), clock=clock)
    refs = []
    for i in range(4):
        refs.append(registry.push("gc/app", f"v{i}", image([busybox_layer({"n": str(i)}, padding=200_000)])))
    try:
        recs = []
        for ref in refs:
            clock.now += 10
            recs.append(await puller.pull(ref))
        puller.store.touch(recs[0].id)  # v0 was used last: it goes after v1 and v2
        clock.now += 1000
        per_image = 2_000_000  # well above each image's bytes on disk: so one removal brings usage under "low"
        disk = {"used": 900}
        # 100 units of capacity scaled: 90% used; high 85, low 80 → free 10% of capacity
        capacity = per_image * 10

        def usage() -> tuple[int, int]:
            return capacity, capacity - disk["used"] * capacity // 1000

        in_use = {recs[3].id}  # v3 has a container
        gc = ImageGC(puller, GCPolicy(high_percent=85, low_percent=80, min_age=60), in_use=lambda: in_use, usage=usage, clock=clock)
        freed = await gc.collect()
        assert gc.removed[0] == recs[1].id and freed > 0
        assert recs[3].id not in gc.removed  # in use
        # below the high threshold nothing is removed
        disk["used"] = 500
        before = list(gc.removed)
        assert await gc.collect() == 0 and gc.removed == before
        # images younger than min_age stay even above the threshold
        young = registry.push("gc/app", "young", image([busybox_layer({"n": "young"})]))
        yrec = await puller.pull(young)
        disk["used"] = 990
        await gc.collect()
        assert yrec.id not in gc.removed and recs[3].id not in gc.removed
        assert puller.status(young) is not None and puller.status(refs[3]) is not None
        for rid in gc.removed:
            assert not os.path.exists(puller.store.rootfs(rid)) and rid not in puller.store.records
    finally:
        await puller.close()


def test_the_thresholds_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="imageGCLowThresholdPercent"):
        GCPolicy(high_percent=70, low_percent=80)


def _dockerconfig(auths: dict) -> dict:
    return {"metadata": {"name": "regcred", "namespace": "ns"}, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(json.dumps({"auths": auths}).encode()).decode()}}


def _auth(user: str, pw: str) -> dict:
    return {"auth": base64.b64encode(f"{user}:{pw}".encode()).decode()}


def test_keyring_matches_host_then_path_prefix_most_specific_first() -> None:
    ring = keyring_from_secret(_dockerconfig({
        "https://reg.example:5000/v2/": _auth("host", "s3cr3t-host"),
        "reg.example:5000/team": _auth("team", "t"),
        "reg.example:5000/team/app/deeper": _auth("deeper", "d"),
        "index.docker.io/v1/": {"username": "hub", "password": "x"},
        "other.example": _auth("other", "o"),
    }))
    assert [c.username for c in ring.lookup(parse("reg.example:5000/team/app:1"))] == ["team", "host"]
    assert [c.username for c in ring.lookup(parse("reg.example:5000/teamx/app"))] == ["host"]
    assert [c.username for c in ring.lookup(parse("docker.io/library/busybox"))] == ["hub"]
    assert ring.lookup(parse("reg.example:5001/team/app")) == []
    assert "s3cr3t" not in repr(ring.lookup(parse("reg.example:5000/x"))[0])  # passwords are never printed
    assert keyring_from_secret({"type": "Opaque", "data": {}}).entries == []


async def test_pull_secrets_come_before_the_nodes_credentials_and_missing_ones_are_reported(tmp_path) -> None:
    node_file = tmp_path / "config.json"
    node_file.write_text(json.dumps({"auths": {"reg.example:5000": _auth("node", "n")}}))
    secrets = {("secret", "ns", "regcred"): _dockerconfig({"reg.example:5000": _auth("pod", "p")})}

    async def get(kind: str, ns: str, name: str):  # type: ignore[no-untyped-def]
        return json.loads(json.dumps(secrets.get((kind, ns, name)))) if (kind, ns, name) in secrets else None

    pod = {"metadata": {"namespace": "ns"}, "spec": {"imagePullSecrets": [{"name": "gone"}, {"name": "regcred"}]}}
    creds, missing = await credentials_for(pod, "reg.example:5000/app:1", get_object=get, node_paths=[str(node_file)])
    assert [(c.username, c.password) for c in creds] == [("pod", "p"), ("node", "n")] and missing == ["gone"]
    creds, _ = await credentials_for(pod, "elsewhere.example/app", get_object=get, node_paths=[str(node_file)])
    assert creds == []
    assert isinstance(keyring_from_file([str(tmp_path / "absent.json")]), Keyring)
    assert AuthConfig("a", "b") == AuthConfig("a", "b")


@pytest.mark.parametrize("image,pulled", [
    ("busybox", False), ("nginx:1.27", False), ("docker.io/library/busybox:1.36", False), ("registry.k8s.io/pause:3.9", False),
    ("team/app", False), ("127.0.0.1:5000/app:1", True), ("localhost:5000/a/b@sha256:" + "a" * 64, True), ("reg.example/app", True),
])
def test_which_references_are_pulled_and_which_the_catalog_serves(image: str, pulled: bool) -> None:
    assert pulled_from_registry(image) is pulled


def test_references_normalise_as_the_node_lists_them() -> None:
    assert parse("busybox").name == "docker.io/library/busybox:latest"
    assert parse("team/app:2").name == "docker.io/team/app:2"
    r = parse("127.0.0.1:5000/a/b@sha256:" + "ab" * 32)
    assert r.name == f"127.0.0.1:5000/a/b@sha256:{'ab' * 32}" and r.object == "sha256:" + "ab" * 32 and r.scheme() == "http"
    assert parse("reg.example/app").scheme() == "https" and parse("[::1]:5000/app").scheme() == "http"
