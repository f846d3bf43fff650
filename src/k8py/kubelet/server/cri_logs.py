"""Reading CRI-format container log files (upstream ``kuberuntime/logs``).

A record is one line of the file::

    2026-12-01T08:40:01.123456789Z stdout F hello

``F`` ends a line (a newline follows the content when shown), ``P`` is a part
of a longer line that the next record continues. :func:`read_log` yields what
``kubectl logs`` shows, applying the options as upstream's ``ReadLogs`` does:

- ``tail_lines``: only the last N records of the current file (rotated files
  are not read, as upstream);
- ``since_ns``: records stamped before it are skipped;
- ``timestamps``: each record is prefixed with its timestamp and a space;
- ``limit_bytes``: output stops after that many bytes (mid-record if need be);
- ``follow``: at the end of the file, wait for more; reopen the path when it
  was rotated (a new inode) or truncated; stop once ``still_running()`` says
  the container has exited and nothing more is there.

Following polls (every ``poll_interval`` seconds): the process runtime writes
the file from its own tailer, there is no inotify in the standard library,
and a poll of a quiet file is one ``stat``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import AsyncIterator, Awaitable, Callable

__all__ = ["LogOptions", "Record", "parse_record", "parse_timestamp_ns", "format_timestamp_ns", "read_log"]


@dataclass(frozen=True, slots=True)
class LogOptions:
    follow: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    since_ns: int | None = None
    limit_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Record:
    timestamp_ns: int
    stream: str
    partial: bool
    content: bytes


def parse_timestamp_ns(text: str) -> int:
    """RFC 3339 with up to nanosecond precision → Unix nanoseconds."""
    text = text.strip()
    if text.endswith("Z"):
        text, offset = text[:-1], "+00:00"
    else:
        offset = text[-6:]
        text = text[:-6]
    base, _, fraction = text.partition(".")
    seconds = datetime.fromisoformat(base + offset).timestamp()
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    return int(seconds) * 1_000_000_000 + nanos


def format_timestamp_ns(ns: int) -> str:
    """Unix nanoseconds → ``2026-12-01T08:40:01.123456789Z`` (upstream's RFC3339NanoFixed)."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{nanos:09d}Z"


def parse_record(line: bytes) -> Record | None:
    """One file line (without its newline) → a record; None if malformed."""
    parts = line.split(b" ", 3)
    if len(parts) < 3:
        return None
    try:
        ts = parse_timestamp_ns(parts[0].decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None
    tag = parts[2]
    if tag not in (b"F", b"P"):
        return None
    return Record(ts, parts[1].decode("ascii", "replace"), tag == b"P", parts[3] if len(parts) > 3 else b"")


def _render(record: Record, timestamps: bool) -> bytes:
    out = record.content if record.partial else record.content + b"\n"
    if timestamps:
        out = format_timestamp_ns(record.timestamp_ns).encode() + b" " + out
    return out


def _tail_offset(f: "os.PathLike[str] | str", lines: int) -> int:
    """The file offset where its last ``lines`` complete lines start."""
    if lines <= 0:
        return os.path.getsize(f)
    with open(f, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        end = fh.tell()
        pos, seen, block = end, 0, 8192
        # a last line still being written (no newline yet) is not counted
        while pos > 0:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            chunk = fh.read(step)
            if pos + step == end and chunk.endswith(b"\n"):
                chunk = chunk[:-1]
            idx = len(chunk)
            while True:
                idx = chunk.rfind(b"\n", 0, idx)
                if idx < 0:
                    break
                seen += 1
                if seen == lines:
                    return pos + idx + 1
        return 0


async def read_log(
    path: str,
    options: LogOptions,
    *,
    still_running: Callable[[], Awaitable[bool]] | None = None,
    poll_interval: float = 0.1,
    running_check_interval: float = 1.0,
) -> AsyncIterator[bytes]:
    """Yield the log's rendered bytes chunk by chunk (see the module docstring)."""
    remaining = options.limit_bytes
    try:
        start = _tail_offset(path, options.tail_lines) if options.tail_lines is not None else 0
        fh = open(path, "rb")
    except FileNotFoundError:
        return
    try:
        fh.seek(start)
        inode = os.fstat(fh.fileno()).st_ino
        pending = b""
        draining = False
        quiet_since = 0.0
        loop = asyncio.get_running_loop()
        while True:
            data = fh.read(65536)
            if data:
                pending += data
                lines = pending.split(b"\n")
                pending = lines.pop()
                out = bytearray()
                for line in lines:
                    record = parse_record(line)
                    if record is None or (options.since_ns is not None and record.timestamp_ns < options.since_ns):
                        continue
                    out += _render(record, options.timestamps)
                if out:
                    if remaining is not None:
                        out = out[:remaining]
                        remaining -= len(out)
                    yield bytes(out)
                    if remaining is not None and remaining <= 0:
                        return
                quiet_since = 0.0
                continue
            if not options.follow:
                return
            # at the end: rotated or truncated? reopen; exited? stop
            try:
                st = os.stat(path)
            except FileNotFoundError:
                st = None
            if st is not None and (st.st_ino != inode or st.st_size < fh.tell()):
                if st.st_ino != inode and not draining:
                    # what the writer added to the old file before renaming it is still ours to read
                    draining = True
                    continue
                draining = False
                fh.close()
                fh = open(path, "rb")
                inode = os.fstat(fh.fileno()).st_ino
                pending = b""
                continue
            now = loop.time()
            if not quiet_since:
                quiet_since = now
            elif still_running is not None and now - quiet_since >= running_check_interval:
                if not await still_running():
                    # one last read: the runtime may have flushed the tail after the exit
                    if not fh.read(1):
                        return
                    fh.seek(-1, os.SEEK_CUR)
                    continue
                quiet_since = now
            await asyncio.sleep(poll_interval)
    finally:
        fh.close()
