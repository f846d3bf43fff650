"""The audit log backend: one ``audit.k8s.io/v1`` Event per line, rotated by size and age.

``--audit-log-path`` (``-`` = standard output); ``--audit-log-maxsize``
(megabytes; 0 = never rotate), ``--audit-log-maxbackup`` (rotated files kept;
0 = all), ``--audit-log-maxage`` (days a rotated file is kept; 0 = forever).
A rotated file is renamed as upstream's lumberjack names it:
``audit-2026-12-01T12-00-00.000.log`` beside ``audit.log``. Writes are
synchronous and in order (upstream's ``blocking`` mode): an event is on disk
(in the OS) when the request's response is sent.
"""

from __future__ import annotations

import datetime
import glob
import os
import sys
import time
from typing import IO, Callable

__all__ = ["LogBackend"]


class LogBackend:
    def __init__(self, path: str, *, max_bytes: int = 0, max_backups: int = 0, max_age_days: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.max_backups = max_backups
        self.max_age_days = max_age_days
        self.clock = clock
        self._file: IO[bytes] | None = None
        self._size = 0

    def _open(self) -> IO[bytes]:
        if self._file is None:
            if self.path == "-":
                self._file = sys.stdout.buffer
            else:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
                self._file = open(self.path, "ab")
                self._size = self._file.tell()
        return self._file

    def write(self, line: bytes) -> None:
        f = self._open()
        if self.path != "-" and self.max_bytes and self._size and self._size + len(line) > self.max_bytes:
            self._rotate()
            f = self._open()
        f.write(line)
        f.flush()
        self._size += len(line)

    def _backup_name(self) -> str:
        stamp = datetime.datetime.fromtimestamp(self.clock(), datetime.timezone.utc)
        base, ext = os.path.splitext(self.path)
        name = f"{base}-{stamp.strftime('%Y-%m-%dT%H-%M-%S')}.{stamp.microsecond // 1000:03d}{ext}"
        n = 1
        while os.path.exists(name):  # two rotations in one millisecond
            name = f"{base}-{stamp.strftime('%Y-%m-%dT%H-%M-%S')}.{stamp.microsecond // 1000:03d}-{n}{ext}"
            n += 1
        return name

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        self._file = None
        os.replace(self.path, self._backup_name())
        base, ext = os.path.splitext(self.path)
        backups = sorted(glob.glob(f"{glob.escape(base)}-*{ext}"), key=os.path.getmtime, reverse=True)
        now = self.clock()
        for i, old in enumerate(backups):
            too_many = self.max_backups and i >= self.max_backups
            too_old = self.max_age_days and now - os.path.getmtime(old) > self.max_age_days * 86400
            if too_many or too_old:
                try:
                    os.remove(old)
                except OSError:
                    pass

    def close(self) -> None:
        if self._file is not None and self.path != "-":
            self._file.close()
        self._file = None
