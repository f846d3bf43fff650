"""Process-wide settings every ``k8py`` command applies before it does anything else.

Why here: they change how the interpreter's own machinery behaves for the
whole process, which a library must not do behind its caller's back (the
same rule as logging handlers: only entry points configure them). Every
``k8py`` process runs :func:`tune_process` first — ``k8py.cli.main.main``
calls it, and so does a child the zygote forks, since it runs ``main`` too.

What, and why:

- **TLS receive buffer.** asyncio's ``SSLProtocol`` gives every TLS
  connection a receive buffer of ``max_size`` = 256 KiB, filled with zeros
  (so resident) when the connection is made (python/cpython#109534 discusses
  it). A k8py cluster holds one connection per watch — the controller
  manager alone watches about 80 resources — and the API server holds the
  other end of every one, so at 256 KiB a side an idle one-node cluster spent
  about 50 MB on these buffers. 32 KiB is two maximum-size TLS records;
  measured, moving 50 MB through one connection costs the same CPU with it
  as with 256 KiB (the socket is read in more, smaller calls).

- **The garbage collector of a process that caches the cluster** (the API server,
  the scheduler, the controller manager, the simulated kubelet): its caches hold
  every object it watches, hundreds of thousands at 10,000 pods, and every watch
  event decodes a few dozen new dicts, so with CPython's default thresholds a
  full collection walks the whole cache every few seconds and finds next to
  nothing (these processes make few reference cycles). :func:`tune_gc_for_caches`
  freezes what exists out of collection and makes collections far rarer; young
  cycles, such as a finished request's, are still collected by generation 0.
  Each command says what it measured where it calls it.

Invariant: idempotent, and cheap (no imports beyond what asyncio already is).
"""

from __future__ import annotations

import gc

__all__ = ["tune_process", "tune_gc_for_caches", "TLS_RECEIVE_BUFFER", "CACHE_GC_THRESHOLDS"]

#: bytes of asyncio's per-connection TLS receive buffer (asyncio's own default: 256 KiB)
TLS_RECEIVE_BUFFER = 32 * 1024
#: the collector's thresholds in a process that caches the cluster (CPython's own: 700, 10, 10)
CACHE_GC_THRESHOLDS = (50_000, 50, 100)


def tune_process() -> None:
    from asyncio import sslproto

    sslproto.SSLProtocol.max_size = TLS_RECEIVE_BUFFER


def tune_gc_for_caches(*, freeze: bool = True) -> None:
    """Collections far rarer, and (``freeze``) what exists now frozen out of them."""
    if freeze:
        gc.freeze()
    gc.set_threshold(*CACHE_GC_THRESHOLDS)
