"""ImagePuller: the node's image service (CRI ``ImageService`` for OCI images).

``pull(image, credentials)``:

1. parse the reference (``InvalidImageName`` if it is not one);
2. resolve it to the node platform's manifest, trying each credential in
   turn (a credential the registry refuses moves on to the next; with none
   the pull is anonymous);
3. fetch the config blob; if an image with that id is already unpacked,
   only the tag and digest are recorded (a re-pull of an unchanged tag
   costs one manifest request);
4. fetch the layers missing from the store (verified by digest and size),
   unpack them in order into a fresh directory in a worker thread, each
   layer's diff_id checked against the config, add the mount points a
   runtime needs where the image lacks them (``/proc``, ``/dev``, ``/sys``,
   ``/tmp``, empty ``/etc/resolv.conf``, ``/etc/hosts``, ``/etc/hostname``),
   then commit the record.

Concurrency: one pull per normalised reference at a time (a second caller
waits for the first and reuses its result); pulls of different references
run concurrently. Failures are :class:`RuntimeErrorStatus` ``ErrImagePull``
worded as containerd words them ("failed to pull and unpack image …:
failed to resolve reference …: … not found" / "pull access denied …").
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import time
from typing import Any, Callable, Sequence

import aiohttp

from k8py.kubelet.images import reference
from k8py.kubelet.images.credentials import Credential
from k8py.kubelet.images.registry import RegistryClient, RegistryError, Resolved
from k8py.kubelet.images.store import ContentStore, ImageRecord
from k8py.kubelet.images.unpack import LayerError, apply_layer
from k8py.kubelet.runtime.protocols import RuntimeErrorStatus

__all__ = ["ImagePuller"]

logger = logging.getLogger(__name__)


#: what a container runtime mounts over every rootfs; made (empty) where an image lacks them,
#: since the shared rootfs is read-only to containers and bwrap cannot create them there
_MOUNT_DIRS = ("proc", "dev", "sys", "tmp", "etc")
_MOUNT_FILES = ("etc/resolv.conf", "etc/hosts", "etc/hostname")


def add_mount_points(root: str) -> None:
    for d in _MOUNT_DIRS:
        path = os.path.join(root, d)
        if not os.path.lexists(path):
            os.mkdir(path, 0o1777 if d == "tmp" else 0o755)
    for f in _MOUNT_FILES:
        path = os.path.join(root, f)
        if not os.path.lexists(path) and os.path.isdir(os.path.dirname(path)) and not os.path.islink(os.path.dirname(path)):
            open(path, "w").close()


class ImagePuller:
    def __init__(self, root: str, *, catalog_registries: Sequence[str] = reference.DEFAULT_CATALOG_REGISTRIES,
                 platform: tuple[str, str] | None = None, clock: Callable[[], float] = time.time,
                 connect_timeout: float = 10.0, read_timeout: float = 60.0) -> None:
        self.store = ContentStore(root, clock=clock)
        self.catalog_registries = frozenset(catalog_registries)
        self.platform = platform
        self.clock = clock
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        self._session: aiohttp.ClientSession | None = None
        self._inflight: dict[str, asyncio.Future[ImageRecord]] = {}
        #: image ids being unpacked or deleted (GC leaves them alone)
        self.busy: set[str] = set()

    def handles(self, image: str) -> bool:
        """Whether ``image`` is pulled from a registry (raises InvalidImageName if malformed)."""
        return reference.pulled_from_registry(image, self.catalog_registries)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout, trust_env=False)
        return self._session

    # -- queries ----------------------------------------------------------------------------

    def status(self, image: str) -> ImageRecord | None:
        ref = reference.parse(image)
        rec = self.store.find(ref.name)
        if rec is None and ref.digest:
            rec = self.store.find(f"{ref.repository}@{ref.digest}")
        return rec

    def list(self) -> list[ImageRecord]:
        return list(self.store.records.values())

    async def remove(self, image: str) -> None:
        rec = self.store.records.get(image) or self.status(image)
        if rec is None:
            return
        paths = self.store.forget(rec.id)
        self.busy.add(rec.id)
        try:
            await asyncio.to_thread(ContentStore.delete_paths, paths)
        finally:
            self.busy.discard(rec.id)

    # -- pull -------------------------------------------------------------------------------

    async def pull(self, image: str, credentials: Sequence[Credential] = ()) -> ImageRecord:
        ref = reference.parse(image)
        running = self._inflight.get(ref.name)
        if running is not None:
            return await asyncio.shield(running)
        fut: asyncio.Future[ImageRecord] = asyncio.get_running_loop().create_future()
        self._inflight[ref.name] = fut
        try:
            rec = await self._pull(ref, list(credentials))
            fut.set_result(rec)
            return rec
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except BaseException as err:
            fut.set_exception(err)
            fut.exception()  # retrieved: a pull no one else waited for must not log "never retrieved"
            raise
        finally:
            self._inflight.pop(ref.name, None)

    def _fail(self, ref: reference.Reference, err: RegistryError, stage: str) -> RuntimeErrorStatus:
        name = ref.name
        if stage == "resolve":
            if err.kind == "unauthorized":
                inner = f"pull access denied, repository does not exist or may require authorization: {err.message}"
            else:
                inner = err.message
            return RuntimeErrorStatus("ErrImagePull", f'failed to pull and unpack image "{name}": failed to resolve reference "{name}": {inner}')
        return RuntimeErrorStatus("ErrImagePull", f'failed to pull and unpack image "{name}": {stage}: {err.message}')

    async def _resolve(self, ref: reference.Reference, credentials: list[Credential]) -> tuple[RegistryClient, Resolved]:
        attempts: list[Credential | None] = list(credentials) or [None]
        last: RegistryError | None = None
        for cred in attempts:
            client = RegistryClient(self._http(), ref, cred, platform_=self.platform)
            try:
                return client, await client.resolve()
            except RegistryError as err:
                last = err
                if err.kind != "unauthorized":
                    break
                logger.info("registry refused a credential", extra={"image": ref.name, "source": cred.source if cred else "anonymous"})
        assert last is not None
        raise self._fail(ref, last, "resolve")

    async def _pull(self, ref: reference.Reference, credentials: list[Credential]) -> ImageRecord:
        started = time.monotonic()
        client, resolved = await self._resolve(ref, credentials)
        manifest = resolved.manifest
        cfg_desc = manifest.get("config") or {}
        image_id = str(cfg_desc.get("digest", ""))
        if not image_id.startswith("sha256:"):
            raise RuntimeErrorStatus("ErrImagePull", f'failed to pull and unpack image "{ref.name}": the manifest has no sha256 config digest')
        layers = list(manifest.get("layers") or [])
        try:
            if self.store.has_blob(image_id):
                with open(self.store.blob_path(image_id), "rb") as f:
                    config_body = f.read()
            else:
                config_body = await client.blob_bytes(image_id)
                with open(self.store.blob_path(image_id), "wb") as f:
                    f.write(config_body)
        except RegistryError as err:
            raise self._fail(ref, err, "failed to fetch the image config") from err
        image_config = json.loads(config_body)
        tags = [ref.name] if ref.tag or not ref.digest else []
        digests = [f"{ref.repository}@{resolved.digest}"]
        size = int(cfg_desc.get("size") or len(config_body)) + sum(int(d.get("size") or 0) for d in layers)
        existing = self.store.records.get(image_id)
        if existing is None:
            await self._fetch_layers(ref, client, layers)
            await self._unpack(ref, image_id, layers, image_config)
            existing = ImageRecord(id=image_id, repo_tags=[], repo_digests=[], size=size, config=image_config.get("config") or {},
                                   blobs=[image_id, *(str(d["digest"]) for d in layers)], pulled_at=self.clock())
        existing.repo_tags = sorted(set(existing.repo_tags) | set(tags))
        existing.repo_digests = sorted(set(existing.repo_digests) | set(digests))
        existing.last_used = self.clock()
        self.store.commit(existing)
        logger.info("pulled image", extra={"image": ref.name, "id": image_id, "bytes": size,
                                           "seconds": round(time.monotonic() - started, 3)})
        return existing

    async def _fetch_layers(self, ref: reference.Reference, client: RegistryClient, layers: list[dict[str, Any]]) -> None:
        sem = asyncio.Semaphore(3)

        async def one(desc: dict[str, Any]) -> None:
            digest = str(desc.get("digest", ""))
            if not digest.startswith("sha256:"):
                raise RuntimeErrorStatus("ErrImagePull", f'failed to pull and unpack image "{ref.name}": layer digest {digest!r} is not sha256')
            if self.store.has_blob(digest):
                return
            async with sem:
                try:
                    await client.blob_to_file(digest, int(desc.get("size") or 0), self.store.blob_path(digest))
                except RegistryError as err:
                    raise self._fail(ref, err, f"failed to copy {digest}") from err

        await asyncio.gather(*(one(d) for d in layers))

    async def _unpack(self, ref: reference.Reference, image_id: str, layers: list[dict[str, Any]], image_config: dict[str, Any]) -> None:
        diff_ids = list((image_config.get("rootfs") or {}).get("diff_ids") or [])
        if len(diff_ids) != len(layers):
            raise RuntimeErrorStatus("ErrImagePull", f'failed to pull and unpack image "{ref.name}": the config lists {len(diff_ids)} '
                                     f"diff_ids for {len(layers)} layers")
        tmp = self.store.unpack_dir(image_id)
        self.busy.add(image_id)

        def work() -> None:
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            os.chmod(tmp, 0o755)
            for desc, want in zip(layers, diff_ids):
                got = apply_layer(tmp, self.store.blob_path(str(desc["digest"])), str(desc.get("mediaType", "")))
                if got != want:
                    raise LayerError(f"layer {desc['digest']}: diff_id {got} does not match the config's {want}")
            add_mount_points(tmp)
            final = self.store.rootfs(image_id)
            if os.path.isdir(final):
                shutil.rmtree(final)
            os.rename(tmp, final)

        try:
            await asyncio.to_thread(work)
        except LayerError as err:
            await asyncio.to_thread(shutil.rmtree, tmp, True)
            raise RuntimeErrorStatus("ErrImagePull", f'failed to pull and unpack image "{ref.name}": failed to extract layer: {err}') from err
        finally:
            self.busy.discard(image_id)
