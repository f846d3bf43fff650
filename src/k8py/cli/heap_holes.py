"""The holes of a process's C heap, filled before it forks: what the zygote does before each fork.

Why: glibc's malloc keeps the chunks a process freed in bins, threaded
through the free chunks themselves (each holds its neighbours' addresses),
and serves later requests from them. Importing a thousand modules leaves
the zygote's heap with some 1,000-2,000 such holes (0.5-0.8 MB) scattered
over its pages. A forked child shares those pages until it writes one, and
its very first allocations land in the holes and relink the bins — writing
a few bytes into pages that otherwise hold only what every child shares, and
so copying them: measured on an idle one-node cluster, some 2 MB of private
pages in every component forked after the modules were imported (ten in all).

What: :func:`fill_heap_holes` allocates every free chunk of the heap, the
largest requests first, down to the smallest chunk, and keeps them:
a request served from a hole is kept (never freed, so the children share
those pages untouched; each kept chunk holds the address of the one kept
before it, so that keeping them allocates nothing that could leave a hole
of its own); the first request of a size that the
heap had to serve from its top (the untouched end) is freed again and ends
that size. A child's allocations then come from the top: fresh pages of its
own, not copies of pages it shares.

Invariants: only in a process with a single thread (the zygote never starts
one: a second thread would allocate in an arena of its own, and could
allocate meanwhile); glibc only (``mallinfo2``, glibc 2.33 and later;
elsewhere nothing is done); never keeps more than the free bytes the heap
reported before it started (plus glibc's small per-thread cache), so a heap
it misreads costs at most that; safe to call again (it then finds the holes
made since, usually none).
"""

from __future__ import annotations

import ctypes

__all__ = ["fill_heap_holes", "free_bytes_in_holes"]

#: malloc requests, largest first: each fills the holes it fits, and what it leaves the next ones — chunks
#: of 64 KiB halving to 2 KiB, then every chunk size from 1,040 bytes down to the smallest (32): glibc's
#: per-thread cache keeps up to 7 freed chunks of each of those sizes and serves only that exact size
_REQUESTS = (*((1 << n) - 8 for n in range(16, 10, -1)), *(size - 8 for size in range(1040, 16, -16)))
#: that cache counts as in use, not free: filled too
_CACHE_SLACK = 512 * 1024
#: the last chunk taken from a hole (each holds the address of the one before): never freed
_kept = 0


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):  # not glibc, or older than 2.33
        return None
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
    libc.sbrk.restype, libc.sbrk.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t]
    return libc


def free_bytes_in_holes() -> int | None:
    """Bytes in the heap's free chunks, its untouched top apart (None: not glibc)."""
    libc = _glibc()
    if libc is None:
        return None
    info = libc.mallinfo2()
    return int(info.fordblks - info.keepcost)


def fill_heap_holes() -> int:
    """Fill the heap's holes (see the module docstring); returns the bytes kept."""
    libc = _glibc()
    if libc is None:
        return 0
    info = libc.mallinfo2()
    top = (libc.sbrk(0) or 0) - info.keepcost  # where the top chunk starts: the main heap ends at the break
    budget = int(info.fordblks - info.keepcost) + _CACHE_SLACK
    global _kept
    kept = 0
    for request in _REQUESTS:
        while kept < budget:
            chunk = libc.malloc(request)
            if not chunk:
                return kept
            if chunk >= top:  # no hole of this size left: the top served it
                libc.free(chunk)
                break
            ctypes.c_void_p.from_address(chunk).value, _kept = _kept, chunk
            kept += request + 8
    return kept
