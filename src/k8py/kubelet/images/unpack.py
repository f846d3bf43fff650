"""Applying image layers onto a rootfs directory.

Each layer is a tar (plain or gzip) applied in order onto one directory,
the way the OCI image spec's "applying changesets" says:

- ``.wh.<name>`` removes ``<name>`` from the layers below;
  ``.wh..wh..opq`` in a directory removes everything the layers below put
  there (what this layer itself adds stays, whatever the entry order);
  whiteout entries themselves are never written;
- an entry replaces what is at its path, except that a directory over a
  directory keeps the contents;
- hard links point at files already in the root.

Safety: nothing is ever written outside the root. Leading ``/`` and ``./``
are dropped; a name with a ``..`` that climbs above the root fails the
layer; every parent directory is resolved *inside* the root (a symlink
``etc -> /`` or ``../..`` is followed as if the root were ``/``, like
filepath-securejoin), and the last component is never followed, so a
symlink planted by one entry cannot redirect the next one.
Device nodes are skipped (a rootless node cannot make them; bwrap gives
each container its own ``/dev``). Ownership is kept when the node runs as
root.

The layer's ``diff_id`` (sha256 of the uncompressed tar) is computed while
reading and compared with the image config's; a mismatch fails the pull.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import stat
import tarfile
from typing import IO, Any

__all__ = ["LayerError", "apply_layer", "resolve_in_root"]

_MAX_LINKS = 40


class LayerError(Exception):
    pass


class _HashingReader:
    """A read-only file object that hashes what passes through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.hash = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.hash.update(data)
        return data

    def drain(self) -> str:
        while self.read(1 << 20):
            pass
        return "sha256:" + self.hash.hexdigest()


def _clean(name: str) -> list[str]:
    """The path components of a tar entry name, or LayerError if it climbs out of the root."""
    parts: list[str] = []
    for p in name.replace("\\", "/").split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not parts:
                raise LayerError(f'entry "{name}" escapes the image root')
            parts.pop()
            continue
        parts.append(p)
    return parts


def resolve_in_root(root: str, parts: list[str]) -> str:
    """The host path of ``parts`` (all but the last followed as symlinks, inside ``root``)."""
    todo = list(parts[:-1])
    done: list[str] = []
    links = 0
    while todo:
        p = todo.pop(0)
        if p in ("", "."):
            continue
        if p == "..":
            if done:
                done.pop()
            continue
        cur = os.path.join(root, *done, p)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            done.append(p)
            continue
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > _MAX_LINKS:
                raise LayerError(f"too many symlinks resolving {'/'.join(parts)}")
            target = os.readlink(cur)
            if target.startswith("/"):
                done = []
            todo = [x for x in target.split("/")] + todo
            continue
        done.append(p)
    return os.path.join(root, *done, *parts[-1:])


def _remove(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _open_layer(path: str, media_type: str) -> IO[bytes]:
    if media_type.endswith("+zstd") or media_type.endswith(".zstd"):
        raise LayerError(f"layer media type {media_type} (zstd) is not supported by this node: push the image with gzip layers")
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def apply_layer(root: str, blob: str, media_type: str, *, as_root: bool | None = None) -> str:
    """Apply one layer tar onto ``root``; returns its diff_id."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    raw = _open_layer(blob, media_type)
    reader = _HashingReader(raw)
    added: set[str] = set()
    opaque: list[str] = []
    dirs: list[tuple[str, tarfile.TarInfo]] = []
    try:
        with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
            members = iter(tar)
            while True:
                try:
                    entry = next(members)
                except StopIteration:
                    break
                except tarfile.ReadError as err:
                    # a tar that ends right after its last member's data, without the padding and
                    # end-of-archive blocks (umoci 0.4 writes these; GNU tar accepts them): every
                    # byte is still covered by the diff_id check below
                    if "unexpected end of data" in str(err):
                        break
                    raise
                _apply_entry(root, tar, entry, added, opaque, dirs, as_root)
        diff_id = reader.drain()
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as err:
        raise LayerError(f"layer {os.path.basename(blob)} cannot be applied: {err}") from err
    finally:
        raw.close()
    for d in opaque:  # what lower layers put in an opaque directory goes; this layer's entries stay
        for name in os.listdir(d):
            full = os.path.join(d, name)
            if full not in added:
                _remove(full)
    for path, info in reversed(dirs):  # modes last: a 0555 directory must not stop its own children
        _set_meta(path, info, as_root)
    return diff_id


def _apply_entry(root: str, tar: tarfile.TarFile, info: tarfile.TarInfo, added: set[str], opaque: list[str],
                 dirs: list[tuple[str, tarfile.TarInfo]], as_root: bool) -> None:
    parts = _clean(info.name)
    if not parts:
        return  # the root itself
    base = parts[-1]
    if base.startswith(".wh."):
        parent = os.path.dirname(resolve_in_root(root, parts))
        if base == ".wh..wh..opq":
            opaque.append(parent)
        else:
            _remove(os.path.join(parent, base[len(".wh."):]))
        return
    path = resolve_in_root(root, parts)
    _ensure_parents(root, path)
    p = path
    while p not in added and p != root and len(p) > len(root):
        added.add(p)
        p = os.path.dirname(p)
    if info.isdir():
        if not os.path.isdir(path) or os.path.islink(path):
            _remove(path)
            os.mkdir(path, 0o700)
        dirs.append((path, info))
        return
    _remove(path)
    if info.isfile():
        src = tar.extractfile(info)
        assert src is not None
        with open(path, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    elif info.issym():
        os.symlink(info.linkname, path)
    elif info.islnk():
        lparts = _clean(info.linkname)
        if not lparts:
            raise LayerError(f'hard link "{info.name}" points at the root')
        target = resolve_in_root(root, lparts)
        if not os.path.lexists(target):
            raise LayerError(f'hard link "{info.name}" points at "{info.linkname}", which the layers do not have')
        os.link(target, path, follow_symlinks=False)
        return
    elif info.isfifo():
        os.mkfifo(path, 0o600)
    else:
        return  # character/block devices: see the module docstring
    _set_meta(path, info, as_root)


def _ensure_parents(root: str, path: str) -> None:
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755, exist_ok=True)
    real = os.path.realpath(parent)
    rroot = os.path.realpath(root)
    if real != rroot and not real.startswith(rroot + os.sep):
        raise LayerError(f"{path} resolves outside the image root")


def _set_meta(path: str, info: tarfile.TarInfo, as_root: bool) -> None:
    if as_root:
        try:
            os.lchown(path, info.uid, info.gid)
        except OSError:
            pass
    if not info.issym():
        os.chmod(path, info.mode & 0o7777 if as_root else (info.mode & 0o777) | 0o200)
    try:
        os.utime(path, (info.mtime, info.mtime), follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass


def dir_size(path: str) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames:
            try:
                st: Any = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            total += st.st_blocks * 512
    return total
