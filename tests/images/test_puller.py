"""The image puller against a real docker-registry: manifests, indexes, auth, verification, layers."""

from __future__ import annotations

import os
import tarfile

import pytest

from k8py.kubelet.images.credentials import Credential
from k8py.kubelet.images.puller import ImagePuller
from k8py.kubelet.runtime.protocols import RuntimeErrorStatus
from tests.support.oci_registry import Registry, busybox_layer, image, tar_layer


async def test_an_oci_image_is_pulled_verified_and_unpacked_into_the_shared_store(registry: Registry, tmp_path) -> None:
    img = image([busybox_layer({"etc/os-release": "ID=k8py-test\n"})], entrypoint=["/bin/sh"], cmd=["-c", "cat /etc/os-release"])
    ref = registry.push("team/app", "v1", img)
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        rec = await puller.pull(ref)
        assert rec.id == img.id and rec.repo_tags == [ref] and rec.repo_digests == [f"{registry.host}/team/app@{img.digest}"]
        assert rec.config["Entrypoint"] == ["/bin/sh"] and rec.size == len(img.config_bytes) + len(img.layers[0].blob)
        root = puller.store.rootfs(rec.id)
        assert open(os.path.join(root, "etc/os-release")).read() == "ID=k8py-test\n"
        assert os.readlink(os.path.join(root, "bin/sh")) == "busybox" and os.access(os.path.join(root, "bin/busybox"), os.X_OK)
        assert puller.status(ref) is rec and puller.status(f"{registry.host}/team/app@{img.digest}") is rec
        # a second pull of the same tag reuses the store: same record, nothing unpacked again
        mtime = os.stat(root).st_mtime_ns
        assert (await puller.pull(ref)).id == rec.id and os.stat(root).st_mtime_ns == mtime
        # a restarted node finds its images again
        again = ImagePuller(str(tmp_path / "store"))
        assert again.status(ref) is not None and again.status(ref).id == rec.id
        await puller.remove(ref)
        assert puller.status(ref) is None and not os.path.exists(root) and not puller.store.has_blob(img.id)
    finally:
        await puller.close()


async def test_an_index_is_narrowed_to_the_node_platform_and_a_missing_platform_is_an_error(registry: Registry, tmp_path) -> None:
    mine = image([busybox_layer({"which": "mine"})])
    other = image([busybox_layer({"which": "other"})], arch="s390x")
    ref = registry.push_index("multi", "1", [(other, "s390x"), (mine, "amd64" if os.uname().machine == "x86_64" else "arm64")])
    only_other = registry.push_index("multi", "other-only", [(other, "s390x")])
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        rec = await puller.pull(ref)
        assert rec.id == mine.id and open(os.path.join(puller.store.rootfs(rec.id), "which")).read() == "mine"
        with pytest.raises(RuntimeErrorStatus) as err:
            await puller.pull(only_other)
        assert err.value.reason == "ErrImagePull" and "no match for platform in manifest: not found" in err.value.message
    finally:
        await puller.close()


async def test_whiteouts_and_opaque_directories_remove_what_lower_layers_put(registry: Registry, tmp_path) -> None:
    base = busybox_layer({"data/keep": "k", "data/gone": "g", "opq/old1": "1", "opq/sub/old2": "2", "other": "o"})
    top = tar_layer([("data/.wh.gone", b""), ("opq/new", "n"), ("opq/.wh..wh..opq", b""), (".wh.other", b"")])
    ref = registry.push("layers", "1", image([base, top]))
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        root = puller.store.rootfs((await puller.pull(ref)).id)
        assert sorted(os.listdir(os.path.join(root, "data"))) == ["keep"]
        assert sorted(os.listdir(os.path.join(root, "opq"))) == ["new"]
        assert not os.path.lexists(os.path.join(root, "other"))
        assert not any(n.startswith(".wh.") for _, ds, fs in os.walk(root) for n in ds + fs)
    finally:
        await puller.close()


@pytest.mark.parametrize("entries", [
    [("../../escape", "x")],
    [("/../escape", "x")],
    [("link", "->/"), ("link/../../escape", "x")],
], ids=["dotdot", "absolute-dotdot", "through-a-symlink"])
async def test_no_layer_writes_outside_the_image_root(registry: Registry, tmp_path, entries) -> None:
    ref = registry.push("evil", str(abs(hash(str(entries))) % 10_000), image([busybox_layer(), tar_layer(entries)]))
    store = tmp_path / "deep" / "er" / "store"
    puller = ImagePuller(str(store))
    try:
        try:
            rec = await puller.pull(ref)
        except RuntimeErrorStatus as err:
            assert err.reason == "ErrImagePull" and "escapes the image root" in err.message
        else:  # a symlink is followed as if the image root were "/": the file lands inside it
            assert os.path.isfile(os.path.join(puller.store.rootfs(rec.id), "escape"))
        for p in (tmp_path / "escape", tmp_path / "deep" / "escape", tmp_path / "deep" / "er" / "escape", store / "escape"):
            assert not p.exists(), p
    finally:
        await puller.close()


async def test_symlinked_parents_are_resolved_inside_the_root(registry: Registry, tmp_path) -> None:
    # etc -> / would write the host's /<name> if followed on the host; inside the root it is the root
    name = f"k8py-oci-test-{os.getpid()}"
    layer = tar_layer([("etc2", "->/"), (f"etc2/{name}", "inside"), ("abs", "->/tmp"), (f"abs/{name}", "in")])
    ref = registry.push("links", "1", image([busybox_layer(), layer]))
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        root = puller.store.rootfs((await puller.pull(ref)).id)
        assert open(os.path.join(root, name)).read() == "inside"
        assert open(os.path.join(root, "tmp", name)).read() == "in"
        assert not os.path.exists(f"/{name}") and not os.path.exists(f"/tmp/{name}")
    finally:
        await puller.close()


async def test_a_layer_whose_diff_id_does_not_match_the_config_fails_the_pull(registry: Registry, tmp_path) -> None:
    layer = busybox_layer()
    ref = registry.push("tampered", "1", image([layer], diff_ids=["sha256:" + "0" * 64]))
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        with pytest.raises(RuntimeErrorStatus) as err:
            await puller.pull(ref)
        assert err.value.reason == "ErrImagePull" and "does not match the config" in err.value.message
        assert puller.list() == [] and os.listdir(os.path.join(puller.store.root, "rootfs")) == []
    finally:
        await puller.close()


async def test_a_missing_tag_is_not_found_as_containerd_says(registry: Registry, tmp_path) -> None:
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        name = f"{registry.host}/nothing/here:nope"
        with pytest.raises(RuntimeErrorStatus) as err:
            await puller.pull(name)
        assert err.value.reason == "ErrImagePull"
        assert err.value.message == f'failed to pull and unpack image "{name}": failed to resolve reference "{name}": {name}: not found'
    finally:
        await puller.close()


async def test_basic_auth_registries_need_the_right_credential(auth_registry: Registry, tmp_path) -> None:
    ref = auth_registry.push("private/app", "1", image([busybox_layer({"secret-file": "s"})]))
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        for creds in ([], [Credential("alice", "wrong")]):
            with pytest.raises(RuntimeErrorStatus) as err:
                await puller.pull(ref, creds)
            assert err.value.reason == "ErrImagePull"
            assert "pull access denied, repository does not exist or may require authorization" in err.value.message
        # the wrong credential is tried first, then the right one
        rec = await puller.pull(ref, [Credential("alice", "wrong"), Credential("alice", "wonderland")])
        assert os.path.isfile(os.path.join(puller.store.rootfs(rec.id), "secret-file"))
    finally:
        await puller.close()


async def test_an_invalid_reference_is_invalid_image_name(tmp_path) -> None:
    puller = ImagePuller(str(tmp_path / "store"))
    for bad in ("127.0.0.1:5000/UPPER/case:1", "127.0.0.1:5000/app:bad tag", "127.0.0.1:5000/app@sha256:xyz", ""):
        with pytest.raises(RuntimeErrorStatus) as err:
            await puller.pull(bad)
        assert err.value.reason == "InvalidImageName" and "invalid reference format" in err.value.message
    await puller.close()


def test_gzip_and_plain_tar_layers_both_unpack(tmp_path) -> None:
    from k8py.kubelet.images.unpack import apply_layer
    for gz in (True, False):
        layer = tar_layer([("d", None), ("d/f", "x")], gzip_it=gz)
        blob = tmp_path / f"blob-{gz}"
        blob.write_bytes(layer.blob)
        root = tmp_path / f"root-{gz}"
        root.mkdir()
        assert apply_layer(str(root), str(blob), layer.media_type) == layer.diff_id
        assert (root / "d" / "f").read_text() == "x"
    assert tarfile  # the stdlib tar module writes the fixtures


async def test_token_auth_registries_hand_out_bearer_tokens_for_the_right_credential(tmp_path) -> None:
    with Registry(str(tmp_path / "token-registry"), users={"bob": "builder"}, token_auth=True) as reg:
        ref = reg.push("private/tokened", "1", image([busybox_layer({"tokened": "yes"})]))
        puller = ImagePuller(str(tmp_path / "store"))
        try:
            with pytest.raises(RuntimeErrorStatus) as err:
                await puller.pull(ref)  # an anonymous token has no access
            assert err.value.reason == "ErrImagePull" and "pull access denied" in err.value.message
            with pytest.raises(RuntimeErrorStatus) as err:
                await puller.pull(ref, [Credential("bob", "wrong")])  # the token service refuses the password
            assert "pull access denied" in err.value.message and "failed to fetch oauth token" in err.value.message
            rec = await puller.pull(ref, [Credential("bob", "builder")])
            assert os.path.isfile(os.path.join(puller.store.rootfs(rec.id), "tokened"))
            scopes = [s for u, s in reg.token_server.requests if u == "bob"]
            assert "repository:private/tokened:pull" in scopes  # the scope came from the registry's challenge
        finally:
            await puller.close()


async def test_docker_schema2_manifests_and_manifest_lists_are_pulled_too(registry: Registry, tmp_path) -> None:
    arch = "amd64" if os.uname().machine == "x86_64" else "arm64"
    single = image([busybox_layer({"fmt": "docker"})], docker=True)
    listed = image([busybox_layer({"fmt": "docker-list"})], docker=True)
    ref = registry.push("docker/app", "1", single)
    list_ref = registry.push_index("docker/app", "list", [(image([busybox_layer()], docker=True, arch="ppc64le"), "ppc64le"), (listed, arch)],
                                   docker=True)
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        for r, img, fmt in ((ref, single, "docker"), (list_ref, listed, "docker-list")):
            rec = await puller.pull(r)
            assert rec.id == img.id and open(os.path.join(puller.store.rootfs(rec.id), "fmt")).read() == fmt
    finally:
        await puller.close()


async def test_concurrent_pulls_of_one_reference_share_one_pull_and_digests_pin_an_image(registry: Registry, tmp_path) -> None:
    import asyncio
    img = image([busybox_layer({"pinned": "p"})])
    ref = registry.push("shared/app", "1", img)
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        recs = await asyncio.gather(*(puller.pull(ref) for _ in range(4)))
        assert len({id(r) for r in recs}) == 1 and len(os.listdir(os.path.join(puller.store.root, "rootfs"))) == 1
        by_digest = f"{registry.host}/shared/app@{img.digest}"
        registry.push("shared/app", "1", image([busybox_layer({"pinned": "moved"})]))  # the tag moves; the digest does not
        rec = await puller.pull(by_digest)
        assert rec.id == img.id and puller.status(by_digest) is rec
    finally:
        await puller.close()


@pytest.mark.parametrize("mode", ["", "tmpfs", "disk"], ids=["read-only (rootless)", "tmpfs upper layer", "disk upper layer"])
def test_each_root_mode_runs_the_image_under_bwrap(registry: Registry, tmp_path, mode: str) -> None:
    import asyncio
    import shutil
    import subprocess

    from k8py.kubelet.runtime.process.oci_container import build_oci_launch
    from k8py.kubelet.runtime.protocols import Mount

    ref = registry.push("ro/app", "1", image([busybox_layer({"etc/os-release": "ID=ro-test\n"})]))
    puller = ImagePuller(str(tmp_path / "store"))
    rec = asyncio.run(puller.pull(ref))
    asyncio.run(puller.close())
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "in-volume").write_text("v")
    status = os.open(str(tmp_path / "status.json"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        if mode and os.geteuid() != 0:
            pytest.fail("overlay root modes need root (CI runs as root)")
        launch = build_oci_launch(["/bin/sh", "-c", "cat /etc/os-release; cat /tmp/../tmp/v/in-volume; echo; cat /etc/cfg/deep/in-volume; "
                                   "echo; touch /x 2>&1 && echo writable || echo read-only"],
                                  bwrap=shutil.which("bwrap") or "bwrap", rootfs=puller.store.rootfs(rec.id), container_dir=str(tmp_path / "c"),
                                  mounts=[Mount("/tmp/v", str(vol)), Mount("/etc/cfg/deep", str(vol), True)], cwd="/", hostname="ro",
                                  status_fd=status, user=None, overlay=mode)
        out = subprocess.run(launch.argv, capture_output=True, text=True, pass_fds=(status,), timeout=60, env={"PATH": "/bin"})
    finally:
        os.close(status)
    lines = out.stdout.splitlines()
    assert lines[:3] == ["ID=ro-test", "v", "v"], out.stdout + out.stderr  # a volume at a path the image lacks, in every mode
    assert out.stdout.strip().endswith("writable" if mode else "read-only")
    assert not os.path.exists(os.path.join(puller.store.rootfs(rec.id), "x"))  # the shared image root is never written
    upper = tmp_path / "c" / "rootfs" / "upper"
    assert (upper / "x").exists() is (mode == "disk")  # a tmpfs upper layer lives only in the container's mount namespace


def test_a_tar_without_end_blocks_applies_and_a_cut_one_fails_its_diff_id(tmp_path) -> None:
    import hashlib

    from k8py.kubelet.images.unpack import LayerError, apply_layer
    layer = tar_layer([("d", None), ("d/f", "x" * 1000)], gzip_it=False)
    data_end = layer.tar.index(b"x" * 1000) + 1000
    unpadded = layer.tar[:data_end]  # what umoci 0.4 writes: no padding, no end-of-archive blocks
    blob = tmp_path / "unpadded"
    blob.write_bytes(unpadded)
    (tmp_path / "r1").mkdir()
    assert apply_layer(str(tmp_path / "r1"), str(blob), layer.media_type) == "sha256:" + hashlib.sha256(unpadded).hexdigest()
    assert (tmp_path / "r1" / "d" / "f").read_text() == "x" * 1000
    cut = tmp_path / "cut"  # cut inside the file's data: an error, or at least not the config's diff_id
    cut.write_bytes(unpadded[:-10])
    (tmp_path / "r2").mkdir()
    try:
        assert apply_layer(str(tmp_path / "r2"), str(cut), layer.media_type) != "sha256:" + hashlib.sha256(unpadded).hexdigest()
    except LayerError:
        pass


async def test_an_unreachable_registry_is_err_image_pull_saying_so(tmp_path) -> None:
    from tests.support.oci_registry import free_port
    name = f"127.0.0.1:{free_port()}/nobody/home:1"
    puller = ImagePuller(str(tmp_path / "store"))
    try:
        with pytest.raises(RuntimeErrorStatus) as err:
            await puller.pull(name)
        assert err.value.reason == "ErrImagePull"
        assert err.value.message.startswith(f'failed to pull and unpack image "{name}": failed to resolve reference "{name}": failed to do request')
        assert "Connect" in err.value.message or "connect" in err.value.message
    finally:
        await puller.close()
