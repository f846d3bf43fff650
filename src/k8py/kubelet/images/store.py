"""The node's content store, shared by every pod on the node.

Layout under the store's root (``<kubelet root-dir>/images``)::

    blobs/sha256/<hex>        manifests' blobs (config, layers), by digest, verified
    rootfs/<image hex>/       one unpacked rootfs per image (read-only to containers)
    images/<image hex>.json   the image record: id, repo tags and digests, size, config, times

An image's id is its config's digest (``sha256:…``), as containerd's is.
A tag names at most one image: pulling ``app:1`` again after it moved
takes the tag off the old record (which stays, untagged, until GC or a
remove). A record is written only after its rootfs was unpacked
completely (unpacking goes to a temp directory renamed at the end), so a
record always means a usable image; a crash mid-pull leaves only
``*.partial*`` / ``*.unpacking*`` debris, removed at start-up.

Not thread-safe by itself: the puller serialises writers on the event
loop; the heavy file work (unpack, delete) runs in worker threads on
paths no one else touches.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

__all__ = ["ImageRecord", "ContentStore"]


@dataclass
class ImageRecord:
    id: str
    repo_tags: list[str]
    repo_digests: list[str]
    #: bytes of the blobs (config and layers, compressed), what CRI reports as the size
    size: int
    #: the image config's ``config`` section (Entrypoint, Cmd, Env, WorkingDir, User …)
    config: dict[str, Any] = field(default_factory=dict)
    #: blob digests this image needs (config, layers)
    blobs: list[str] = field(default_factory=list)
    pulled_at: float = 0.0
    last_used: float = 0.0

    @property
    def hex(self) -> str:
        return self.id.split(":", 1)[1]


class ContentStore:
    def __init__(self, root: str, *, clock: Callable[[], float] = time.time) -> None:
        self.root = root
        self.clock = clock
        self.records: dict[str, ImageRecord] = {}
        for sub in ("blobs/sha256", "rootfs", "images"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
        self._load()

    def _load(self) -> None:
        for d in ("blobs/sha256", "rootfs"):
            base = os.path.join(self.root, d)
            for name in os.listdir(base):
                if ".partial" in name or ".unpacking" in name:
                    shutil.rmtree(os.path.join(base, name), ignore_errors=True) if os.path.isdir(os.path.join(base, name)) \
                        else os.unlink(os.path.join(base, name))
        base = os.path.join(self.root, "images")
        for name in sorted(os.listdir(base)):
            if not name.endswith(".json"):
                continue
            try:
                with open(os.path.join(base, name), encoding="utf-8") as f:
                    rec = ImageRecord(**json.load(f))
            except (OSError, ValueError, TypeError):
                continue
            if os.path.isdir(self.rootfs(rec.id)):
                self.records[rec.id] = rec

    # -- paths ------------------------------------------------------------------------------

    def blob_path(self, digest: str) -> str:
        return os.path.join(self.root, "blobs", "sha256", digest.split(":", 1)[1])

    def has_blob(self, digest: str) -> bool:
        return os.path.isfile(self.blob_path(digest))

    def rootfs(self, image_id: str) -> str:
        return os.path.join(self.root, "rootfs", image_id.split(":", 1)[1])

    def unpack_dir(self, image_id: str) -> str:
        return f"{self.rootfs(image_id)}.unpacking-{os.getpid()}"

    # -- records ----------------------------------------------------------------------------

    def find(self, name: str) -> ImageRecord | None:
        """The image a normalised reference (``repo:tag`` or ``repo@digest``) or an id names."""
        if name in self.records:
            return self.records[name]
        for rec in self.records.values():
            if name in rec.repo_tags or name in rec.repo_digests:
                return rec
        return None

    def commit(self, rec: ImageRecord) -> None:
        """Write ``rec`` (its rootfs is complete) and take its tags off any other image."""
        for other in self.records.values():
            if other.id != rec.id and set(other.repo_tags) & set(rec.repo_tags):
                other.repo_tags = [t for t in other.repo_tags if t not in rec.repo_tags]
                self._write(other)
        self.records[rec.id] = rec
        self._write(rec)

    def touch(self, image_id: str) -> None:
        rec = self.records.get(image_id)
        if rec is not None:
            rec.last_used = self.clock()
            self._write(rec)

    def _write(self, rec: ImageRecord) -> None:
        path = os.path.join(self.root, "images", f"{rec.hex}.json")
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(asdict(rec), f)
        os.replace(tmp, path)

    def forget(self, image_id: str) -> list[str]:
        """Drop the record; returns the paths to delete (its rootfs, blobs no other image needs)."""
        rec = self.records.pop(image_id, None)
        if rec is None:
            return []
        try:
            os.unlink(os.path.join(self.root, "images", f"{rec.hex}.json"))
        except FileNotFoundError:
            pass
        still = {b for r in self.records.values() for b in r.blobs}
        return [self.rootfs(image_id), *(self.blob_path(b) for b in rec.blobs if b not in still)]

    @staticmethod
    def delete_paths(paths: list[str]) -> None:
        """Blocking: run in a worker thread."""
        for p in paths:
            if os.path.isdir(p) and not os.path.islink(p):
                _make_writable(p)
                shutil.rmtree(p, ignore_errors=True)
            else:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass


def _make_writable(path: str) -> None:
    """Rootless unpacks keep directories owner-writable, but a root-run node may
    have unpacked 0555 directories: rmtree needs write permission on them."""
    if os.geteuid() == 0:
        return
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if not os.path.islink(full):
                try:
                    os.chmod(full, 0o700)
                except OSError:
                    pass
