"""The zygote fills the holes of its C heap before it forks (:mod:`k8py.cli.heap_holes`).

Each scenario runs in an interpreter of its own (the module is for a
single-threaded process, which a pytest process need not be): a heap with
holes scattered over a thousand pages has none once they are filled, a
request is then served from the untouched top of the heap, and a child
forked after the filling allocates without copying the pages it shares
with its parent — while one forked before it copies most of them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("ctypes")

SCENARIO = r"""
import ctypes, json, os, sys
from k8py.cli import heap_holes

libc = heap_holes._glibc()
if libc is None:
    print(json.dumps({"skip": "not glibc 2.33+"}))
    sys.exit(0)
# a thousand holes, about one a page: 4,000 chunks of 1,000 bytes, every fourth freed
chunks = [libc.malloc(1000) for _ in range(4000)]
for chunk in chunks[::4]:
    libc.free(chunk)


def child_copies():
    # a forked child allocates what the holes could take; how many heap pages are now its own?
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for _ in range(1000):
            libc.malloc(1000)
        private, heap = 0, False
        with open("/proc/self/smaps") as smaps:
            for line in smaps:
                if "-" in line.split(" ", 1)[0]:
                    heap = line.rstrip().endswith("[heap]")
                elif heap and line.startswith("Private_Dirty:"):
                    private += int(line.split()[1])
        os.write(w, str(private).encode())
        os._exit(0)
    os.close(w)
    private = int(os.read(r, 64))
    os.waitpid(pid, 0)
    return private


before = {"holes": heap_holes.free_bytes_in_holes(), "child_kib": child_copies()}
top = (libc.sbrk(0) or 0) - libc.mallinfo2().keepcost  # where the untouched end of the heap began
kept = heap_holes.fill_heap_holes()
probe = libc.malloc(1000)
after = {"holes": heap_holes.free_bytes_in_holes(), "kept": kept, "from_top": probe >= top, "child_kib": child_copies()}
print(json.dumps({"before": before, "after": after}))
"""


def _run() -> dict:
    out = subprocess.run([sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    return result


def test_a_heap_with_holes_has_none_once_filled_and_serves_the_next_request_from_its_top():
    result = _run()
    before, after = result["before"], result["after"]
    assert before["holes"] > 750 * 1000  # the thousand holes
    assert after["kept"] >= before["holes"] and after["holes"] < 16 * 1024
    assert after["from_top"]


def test_a_child_forked_after_the_filling_allocates_without_copying_its_parents_pages():
    result = _run()
    before, after = result["before"], result["after"]
    # forked before: its 1,000 allocations land in the holes, a copied page each (about 4 MB);
    # after: they come from the top, 1,000 x 1,000 bytes of fresh pages (about 1 MB)
    assert before["child_kib"] > 3000
    assert after["child_kib"] < before["child_kib"] / 2
