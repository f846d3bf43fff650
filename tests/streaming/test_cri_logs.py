"""k8py.kubelet.server.cri_logs: parsing records and the ReadLogs options, on real files."""

from __future__ import annotations

import asyncio
import os

from k8py.kubelet.server.cri_logs import LogOptions, format_timestamp_ns, parse_record, parse_timestamp_ns, read_log


def _write(path, *lines: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def _read(path, options: LogOptions, **kw) -> bytes:
    async def go() -> bytes:
        return b"".join([chunk async for chunk in read_log(str(path), options, **kw)])

    return asyncio.run(go())


def test_timestamps_keep_nanoseconds_both_ways():
    ns = parse_timestamp_ns("2026-12-01T08:40:01.123456789Z")
    assert ns % 1_000_000_000 == 123456789
    assert format_timestamp_ns(ns) == "2026-12-01T08:40:01.123456789Z"
    assert parse_timestamp_ns("2026-12-01T09:40:01.5+01:00") == parse_timestamp_ns("2026-12-01T08:40:01.500Z")


def test_records_parse_and_malformed_lines_are_skipped():
    r = parse_record(b"2026-12-01T08:40:01.000000001Z stderr P part of a line")
    assert r is not None and r.stream == "stderr" and r.partial and r.content == b"part of a line"
    assert parse_record(b"2026-12-01T08:40:01Z stdout F ") is not None
    assert parse_record(b"garbage") is None
    assert parse_record(b"2026-12-01T08:40:01Z stdout X what") is None


def test_tail_counts_complete_records_from_the_end(tmp_path):
    path = tmp_path / "0.log"
    _write(path, *[f"2026-12-01T08:40:0{i}.000000000Z stdout F line {i}" for i in range(6)])
    assert _read(path, LogOptions(tail_lines=2)) == b"line 4\nline 5\n"
    assert _read(path, LogOptions(tail_lines=0)) == b""
    assert _read(path, LogOptions(tail_lines=100)).count(b"\n") == 6


def test_since_timestamps_and_limit(tmp_path):
    path = tmp_path / "0.log"
    _write(path, "2026-12-01T08:40:00.000000000Z stdout F old", "2026-12-01T08:41:00.000000000Z stdout F new")
    since = parse_timestamp_ns("2026-12-01T08:40:30Z")
    assert _read(path, LogOptions(since_ns=since)) == b"new\n"
    assert _read(path, LogOptions(timestamps=True, tail_lines=1)) == b"2026-12-01T08:41:00.000000000Z new\n"
    assert _read(path, LogOptions(limit_bytes=5)) == b"old\nn"


def _follow(path, react) -> list[bytes]:
    """Follow ``path`` while "the container runs"; ``react(chunk)`` after each chunk returns
    False once the container should stop (the test's writer does its part in it)."""
    state = {"running": True}

    async def still_running() -> bool:
        return state["running"]

    async def go() -> list[bytes]:
        got: list[bytes] = []
        async for chunk in read_log(str(path), LogOptions(follow=True), still_running=still_running, poll_interval=0.01,
                                    running_check_interval=0.05):
            got.append(chunk)
            state["running"] = react(chunk)
        return got

    return asyncio.run(asyncio.wait_for(go(), 30))


def test_follow_ends_when_the_container_stops_and_reopens_after_rotation(tmp_path):
    path = tmp_path / "0.log"
    _write(path, "2026-12-01T08:40:00.000000000Z stdout F first")

    def react(chunk: bytes) -> bool:
        if chunk == b"first\n":
            os.rename(path, str(path) + ".20261201-084000")
            _write(path, "2026-12-01T08:40:01.000000000Z stdout F after rotation")
        return chunk != b"after rotation\n"

    assert _follow(path, react) == [b"first\n", b"after rotation\n"]


def test_a_missing_file_reads_as_empty(tmp_path):
    assert _read(tmp_path / "nope.log", LogOptions()) == b""


def test_a_rotation_right_after_more_lines_keeps_them_all(tmp_path):
    path = tmp_path / "0.log"
    _write(path, "2026-12-01T08:40:00.000000000Z stdout F first")

    def react(chunk: bytes) -> bool:
        if chunk == b"first\n":
            # the writer appends its last line to the old file, then rotates
            _write(path, "2026-12-01T08:40:00.500000000Z stdout F last of the old file")
            os.rename(path, str(path) + ".20261201-084000")
            _write(path, "2026-12-01T08:40:01.000000000Z stdout F first of the new file")
        return not chunk.endswith(b"first of the new file\n")

    assert b"".join(_follow(path, react)) == b"first\nlast of the old file\nfirst of the new file\n"
