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

Invariant: idempotent, and cheap (no imports beyond what asyncio already is).
"""

from __future__ import annotations

__all__ = ["tune_process", "TLS_RECEIVE_BUFFER"]

#: bytes of asyncio's per-connection TLS receive buffer (asyncio's own default: 256 KiB)
TLS_RECEIVE_BUFFER = 32 * 1024


def tune_process() -> None:
    from asyncio import sslproto

    sslproto.SSLProtocol.max_size = TLS_RECEIVE_BUFFER
