"""Rotated container logs as upstream's ContainerLogManager keeps them: all but
the newest rotated file gzip-compressed, at most containerLogMaxFiles in all,
leftovers of an interrupted compression removed."""

from __future__ import annotations

import gzip
import os

from k8py.kubelet.runtime.process.log_pump import ContainerLog
from k8py.kubelet.runtime.rotated_logs import compact_rotated, prepare_rotation, rotated_files


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def test_before_a_rotation_room_is_made_and_the_rotated_files_are_compressed(tmp_path) -> None:
    live = str(tmp_path / "0.log")
    _write(live, "live\n")
    for stamp, text in (("20261201-100000", "one\n"), ("20261201-100001", "two\n"), ("20261201-100002", "three\n")):
        _write(f"{live}.{stamp}", text)
    _write(f"{live}.20261201-100001.gz.tmp", "half an archive")
    prepare_rotation(live, max_files=4)  # room for 2 rotated (the live one and the one about to be rotated make 4)
    assert [os.path.basename(f) for f in rotated_files(live)] == ["0.log.20261201-100001.gz", "0.log.20261201-100002.gz"]
    assert gzip.open(f"{live}.20261201-100002.gz").read() == b"three\n"
    assert sorted(os.listdir(tmp_path)) == ["0.log", "0.log.20261201-100001.gz", "0.log.20261201-100002.gz"]


def test_after_a_rotation_only_the_newest_rotated_file_stays_plain(tmp_path) -> None:
    live = str(tmp_path / "3.log")
    _write(live, "")
    _write(f"{live}.20261201-100000.gz", "")
    _write(f"{live}.20261201-100001", "a\n")
    _write(f"{live}.20261201-100001.gz", "")  # compressed before, the plain copy left behind: it goes
    _write(f"{live}.20261201-100005", "b\n")
    _write(f"{live}.20261201-100005.1", "c\n")  # two rotations within a second
    compact_rotated(live, max_files=3)
    assert [os.path.basename(f) for f in rotated_files(live)] == ["3.log.20261201-100005.gz", "3.log.20261201-100005.1"]
    assert gzip.open(f"{live}.20261201-100005.gz").read() == b"b\n"
    assert open(f"{live}.20261201-100005.1").read() == "c\n"


async def test_the_process_runtimes_log_compresses_older_rotations_off_the_loop(tmp_path) -> None:
    path = str(tmp_path / "c" / "0.log")
    log = ContainerLog(path, max_size=200, max_files=3)
    for i in range(40):
        log._write("stdout", b"F", b"line %d" % i)
        if log.compaction is not None:
            await log.compaction
    log.close()
    rotated = rotated_files(path)
    assert len(rotated) == 2 and rotated[0].endswith(".gz") and not rotated[1].endswith(".gz"), rotated
    numbers = [int(r.rsplit(b" ", 1)[1]) for r in gzip.open(rotated[0]).read().splitlines()]
    numbers += [int(r.rsplit(" ", 1)[1]) for r in open(rotated[1]).read().splitlines()]
    numbers += [int(r.rsplit(" ", 1)[1]) for r in open(path).read().splitlines()]
    assert numbers == list(range(numbers[0], 40))  # nothing lost or reordered across the files kept
