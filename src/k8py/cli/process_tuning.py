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
  as with 256 KiB (the socket is read in more, smaller calls). And the
  connections of a thread share one buffer: it is only scratch space
  between the socket and the connection's OpenSSL memory BIO — asyncio's
  loop asks the protocol for it (``get_buffer``), reads the socket into it
  and hands the bytes over (``buffer_updated``, which copies them into the BIO)
  in one synchronous step, so no two connections ever hold it at once (the
  selector loop does this; the proactor loop copies its own read into the
  buffer the same way). At 32 KiB a connection, the 74 connections of an
  idle one-node cluster still held 2.4 MB in the API server and 2 MB in the
  controller manager; shared, a process holds 32 KiB per thread that has a loop.

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
import threading
from typing import Any

__all__ = ["tune_process", "tune_gc_for_caches", "thread_receive_buffer", "TLS_RECEIVE_BUFFER", "CACHE_GC_THRESHOLDS"]

#: bytes of asyncio's TLS receive buffer (asyncio's own default: 256 KiB a connection; here one a thread)
TLS_RECEIVE_BUFFER = 32 * 1024
#: the collector's thresholds in a process that caches the cluster (CPython's own: 700, 10, 10)
CACHE_GC_THRESHOLDS = (50_000, 50, 100)


def tune_process() -> None:
    from asyncio import sslproto

    sslproto.SSLProtocol.max_size = TLS_RECEIVE_BUFFER
    _share_receive_buffers(sslproto.SSLProtocol)


_per_thread = threading.local()


def thread_receive_buffer(size: int) -> tuple[bytearray, memoryview]:
    """This thread's TLS receive buffer (and a view of it), at least ``size`` bytes."""
    buffer = getattr(_per_thread, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = bytearray(size)
        _per_thread.buffer, _per_thread.view = buffer, memoryview(buffer)
    return buffer, _per_thread.view


def _share_receive_buffers(cls: Any) -> None:
    """Every ``SSLProtocol`` made from now on reads into its thread's buffer (see the module docstring)."""
    if cls.__dict__.get("_k8py_shared_receive_buffer"):
        return
    made = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)  # (its own buffer, dropped here: allocated and freed at once)
        if hasattr(self, "_ssl_buffer") and hasattr(self, "_ssl_buffer_view"):  # asyncio as it is in 3.11-3.13
            self._ssl_buffer, self._ssl_buffer_view = thread_receive_buffer(self.max_size)

    cls.__init__ = __init__
    cls._k8py_shared_receive_buffer = True


def tune_gc_for_caches(*, freeze: bool = True) -> None:
    """Collections far rarer, and (``freeze``) what exists now frozen out of them."""
    if freeze:
        gc.freeze()
    gc.set_threshold(*CACHE_GC_THRESHOLDS)
