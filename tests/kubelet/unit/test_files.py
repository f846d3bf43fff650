"""On-disk pieces: the ..data atomic writer, CRI log records and rotation."""

from __future__ import annotations

import asyncio
import os
import re

from k8py.kubelet.runtime.process.log_pump import ContainerLog
from k8py.kubelet.volumes.atomic_writer import FileProjection, write_atomic


def test_atomic_writer_swaps_the_data_link_and_keeps_only_the_new_version(tmp_path) -> None:
    target = str(tmp_path / "vol")
    assert write_atomic(target, {"a": FileProjection(b"1"), "dir/b": FileProjection(b"2", 0o600)})
    first = os.readlink(os.path.join(target, "..data"))
    assert open(os.path.join(target, "a")).read() == "1" and os.path.islink(os.path.join(target, "a"))
    assert oct(os.stat(os.path.join(target, "dir", "b")).st_mode & 0o777) == "0o600"
    assert not write_atomic(target, {"a": FileProjection(b"1"), "dir/b": FileProjection(b"2", 0o600)})
    assert write_atomic(target, {"a": FileProjection(b"changed")})
    assert os.readlink(os.path.join(target, "..data")) != first and not os.path.exists(os.path.join(target, first))
    assert open(os.path.join(target, "a")).read() == "changed" and not os.path.lexists(os.path.join(target, "dir"))


async def test_container_output_becomes_cri_records_with_partial_lines_and_rotation(tmp_path) -> None:
    fifo = str(tmp_path / "out.fifo")
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)
    log = ContainerLog(str(tmp_path / "c" / "0.log"), max_size=300, max_files=2, max_line=10)
    log.follow("stdout", fifo)
    log._fds["stderr"] = -1  # one stream only in this test
    del log._fds["stderr"]
    os.write(writer, b"hello\n" + b"x" * 25 + b"\nend")
    os.close(writer)
    await asyncio.wait_for(log.closed.wait(), 10)
    log.close()
    lines = open(tmp_path / "c" / "0.log").read().splitlines()
    pattern = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z stdout ([FP]) (.*)$")
    parsed = [pattern.match(line).groups() for line in lines]  # type: ignore[union-attr]
    assert parsed == [("F", "hello"), ("P", "x" * 10), ("P", "x" * 10), ("F", "x" * 5), ("F", "end")]
    for i in range(20):
        log2 = ContainerLog(str(tmp_path / "r" / "0.log"), max_size=200, max_files=3)
        log2._write("stdout", b"F", b"y" * 50)
        log2.close()
        if log2.compaction is not None:  # older rotations are compressed and pruned in a thread
            await log2.compaction
    kept = sorted(os.listdir(tmp_path / "r"))
    assert "0.log" in kept and len(kept) <= 3 and any(k.startswith("0.log.") for k in kept)
