"""The rotated files of one container log, as upstream's ``ContainerLogManager`` keeps them.

A container's live log is ``<path>`` (``…/<container>/<attempt>.log``);
rotated ones are ``<path>.<YYYYMMDD-HHMMSS>`` (the process runtime adds
``.<n>`` when two rotations share a second), and every rotated file but the
newest is gzip-compressed to ``<rotated>.gz``. The newest stays plain because
the runtime may still be writing its last records to it (and log shippers
finish reading it). ``kubectl logs`` reads the live file only, as upstream.

Before a rotation (:func:`prepare_rotation`, upstream's ``rotateLog`` order):
leftovers of an interrupted compression go (``*.tmp``, and a plain file
whose ``.gz`` exists), the oldest rotated files are removed until
``max_files - 2`` remain (the file being rotated and the new live one make
``max_files``), and those that remain are compressed. :func:`compact_rotated`
reaches the same state right after a rotation, for a writer that renamed
first (the process runtime, which must not compress in its write path).

A compression writes ``<rotated>.gz.tmp`` and renames it into place, so a
reader never sees half an archive. Blocking I/O: call from a thread.
"""

from __future__ import annotations

import glob
import gzip
import logging
import os
import re
import shutil

__all__ = ["rotated_files", "rotation_target", "prepare_rotation", "compact_rotated", "compress"]

logger = logging.getLogger(__name__)

GZ, TMP = ".gz", ".tmp"
_STAMP = re.compile(r"^\.(\d{8}-\d{6})(?:\.(\d+))?(\.gz)?$")


def _order(path: str, name: str) -> tuple[str, int]:
    m = _STAMP.match(name[len(path):])
    assert m is not None
    return m.group(1), int(m.group(2) or 0)


def rotated_files(path: str) -> list[str]:
    """The rotated files of ``path`` (plain or compressed), oldest first; other files are ignored."""
    found = [f for f in glob.glob(glob.escape(path) + ".*") if _STAMP.match(f[len(path):])]
    return sorted(found, key=lambda f: (_order(path, f), f.endswith(GZ)))


def rotation_target(path: str, stamp: str) -> str:
    """The name the live file is rotated to at ``stamp``: ``<path>.<stamp>``, or, when that
    second has rotations already, ``.<n>`` after the newest of them (so names sort in rotation order)."""
    taken = [n for s, n in (_order(path, f) for f in rotated_files(path)) if s == stamp]
    if not taken:
        return f"{path}.{stamp}"
    return f"{path}.{stamp}.{max(taken) + 1}"


def _cleanup_unused(path: str) -> None:
    """Upstream ``cleanupUnusedLogs``: temporary files, and plain files already compressed."""
    for leftover in glob.glob(glob.escape(path) + ".*" + TMP):
        _remove(leftover)
    for f in rotated_files(path):
        if not f.endswith(GZ) and os.path.exists(f + GZ):
            _remove(f)


def _remove_excess(path: str, keep: int) -> list[str]:
    rotated = rotated_files(path)
    excess = rotated[:max(0, len(rotated) - max(0, keep))]
    for f in excess:
        _remove(f)
    return rotated[len(excess):]


def compress(rotated: str) -> str:
    """Gzip ``rotated`` to ``rotated.gz`` (through a ``.tmp``) and remove it; returns the new name."""
    target, tmp = rotated + GZ, rotated + GZ + TMP
    try:
        with open(rotated, "rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.chmod(tmp, os.stat(rotated).st_mode & 0o777)
        os.rename(tmp, target)
    except BaseException:
        _remove(tmp)
        raise
    _remove(rotated)
    return target


def prepare_rotation(path: str, max_files: int) -> None:
    """Make room for one more rotated file and compress the rotated ones (before renaming ``path``)."""
    _cleanup_unused(path)
    for f in _remove_excess(path, max_files - 2):
        if not f.endswith(GZ):
            compress(f)


def compact_rotated(path: str, max_files: int) -> None:
    """After ``path`` was just rotated: at most ``max_files - 1`` rotated files, all but the newest compressed."""
    _cleanup_unused(path)
    kept = _remove_excess(path, max_files - 1)
    for f in kept[:-1]:
        if not f.endswith(GZ):
            compress(f)


def _remove(f: str) -> None:
    try:
        os.unlink(f)
    except FileNotFoundError:
        pass
