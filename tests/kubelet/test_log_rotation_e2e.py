"""Container log rotation on the process runtime, end to end: a real kubelet
with a small containerLogMaxSize rotates a chatty container's log, keeps
containerLogMaxFiles files with every rotated one but the newest
gzip-compressed (upstream's ContainerLogManager), and ``kubectl logs`` still
reads the live file."""

from __future__ import annotations

import glob
import gzip
import os
import time
from typing import Iterator

import pytest

from tests.kubelet.conftest import Node, node_session, phase, pod_manifest

LINES = 300


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[Node]:
    with node_session(str(tmp_path_factory.mktemp("rot")), extra=("--container-log-max-size", "2Ki",
                                                                  "--container-log-max-files", "3")) as n:
        yield n


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:  # compressed (or removed) between the listing and the read
        return ""


def _numbers(records: list[str]) -> list[int]:
    return [int(r.rsplit(" ", 1)[1]) for r in records if r.rsplit(" ", 1)[1].isdigit()]


def test_older_rotations_are_compressed_and_kubectl_logs_reads_the_live_file(node: Node) -> None:
    node.core.create_namespace({"metadata": {"name": "rot"}})
    script = f"i=0; while [ $i -lt {LINES} ]; do i=$((i+1)); echo line $i; done; echo done; sleep 600"
    node.core.create_namespaced_pod("rot", pod_manifest("chatty", [{"name": "c", "image": "busybox", "command": ["sh", "-c", script]}],
                                                        terminationGracePeriodSeconds=1))
    pod = node.wait_pod("rot", "chatty", phase("Running"), what="Running")
    directory = os.path.join(node.kubelet.root_dir, "logs", "pods", f"rot_chatty_{pod['metadata']['uid']}", "c")
    live = os.path.join(directory, "0.log")

    def settled() -> list[str] | None:
        """The rotated files once output has ended and the last compaction is done."""
        names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
        rotated = [n for n in names if n != "0.log"]
        text = "".join(_read(f) for f in [live, *glob.glob(live + ".*[0-9]")])
        if "stdout F done" not in text or len(rotated) != 2 or not rotated[0].endswith(".gz") or rotated[1].endswith(".gz"):
            return None
        return rotated

    deadline = time.monotonic() + 90
    while (rotated := settled()) is None:
        assert time.monotonic() < deadline, f"no settled rotation in {directory}: {os.listdir(directory)}"
        time.sleep(0.2)
    # at most containerLogMaxFiles (3): the live file, the newest rotation plain, the older one compressed
    assert sorted(os.listdir(directory)) == ["0.log", *rotated]
    older = gzip.open(os.path.join(directory, rotated[0]), "rt").read().splitlines()
    newest = open(os.path.join(directory, rotated[1]), encoding="utf-8").read().splitlines()
    current = open(live, encoding="utf-8").read().splitlines()
    assert all(" stdout F " in r for r in older + newest + current)  # CRI records, compressed or not
    numbers = _numbers(older + newest + current)
    assert numbers == list(range(numbers[0], LINES + 1)) and numbers[0] > 1  # the oldest went, nothing else was lost
    # kubectl logs shows the live file, as upstream (rotated files are not read)
    shown = node.kubectl.run("logs", "-n", "rot", "chatty").stdout.splitlines()
    assert shown == [r.split(" ", 3)[3] for r in current]
    node.core.delete_namespace("rot")
