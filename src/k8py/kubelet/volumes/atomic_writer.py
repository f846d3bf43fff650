"""Write a set of files into a directory so readers see all old or all new.

Upstream's ``AtomicWriter`` layout::

    <dir>/..2026_12_01_08_40_01.123456789/<files>   the payload of one version
    <dir>/..data -> ..2026_12_01_08_40_01.123456789  swapped with rename(2)
    <dir>/<top-level name> -> ..data/<top-level name>

A new version is written into a fresh timestamped directory, then a
temporary ``..data_tmp`` symlink is renamed over ``..data`` (atomic), then
the old version is removed. Nothing is written when the payload is
unchanged. Paths are checked: no absolute paths, no ``..`` components.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass

__all__ = ["FileProjection", "write_atomic"]


@dataclass(frozen=True)
class FileProjection:
    data: bytes
    mode: int = 0o644


def _check(path: str) -> None:
    if not path or path.startswith("/") or ".." in path.split("/"):
        raise ValueError(f"invalid path {path!r} in volume payload: must be relative and must not contain '..'")


def _current(target: str) -> dict[str, FileProjection] | None:
    data_link = os.path.join(target, "..data")
    if not os.path.islink(data_link):
        return None
    base = os.path.join(target, os.readlink(data_link))
    out: dict[str, FileProjection] = {}
    for root, _, files in os.walk(base):
        for f in files:
            full = os.path.join(root, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, base)] = FileProjection(fh.read(), os.stat(full).st_mode & 0o777)
    return out


def write_atomic(target: str, payload: dict[str, FileProjection]) -> bool:
    """Make ``target`` hold exactly ``payload``; returns whether anything changed."""
    for path in payload:
        _check(path)
    os.makedirs(target, exist_ok=True)
    if _current(target) == payload:
        return False
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S", time.gmtime()) + f".{time.time_ns() % 1_000_000_000:09d}"
    version = os.path.join(target, stamp)
    os.makedirs(version)
    for path, proj in payload.items():
        full = os.path.join(version, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as fh:
            fh.write(proj.data)
        os.chmod(full, proj.mode)
    data_link = os.path.join(target, "..data")
    old = os.readlink(data_link) if os.path.islink(data_link) else None
    tmp = os.path.join(target, "..data_tmp")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(stamp, tmp)
    os.rename(tmp, data_link)
    tops = {p.split("/", 1)[0] for p in payload}
    for top in tops:
        link = os.path.join(target, top)
        if not os.path.islink(link):
            if os.path.lexists(link):
                shutil.rmtree(link, ignore_errors=True)
            os.symlink(os.path.join("..data", top), link)
    for entry in os.listdir(target):
        full = os.path.join(target, entry)
        if entry.startswith(".."):
            if entry not in ("..data", stamp) and (entry == old or entry.startswith("..20")):
                shutil.rmtree(full, ignore_errors=True)
        elif entry not in tops and os.path.islink(full):
            os.unlink(full)
    return True
