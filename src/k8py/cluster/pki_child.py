"""Make the cluster's certificates and kubeconfigs in a child process forked for it.

Why a child: making and checking certificates imports ``cryptography``, some
4 MB the long-lived ``k8py up`` process would keep for nothing once they are
made; the child makes the files and exits. It runs while the zygote imports
(the API server waits for both), so on two cores it costs the start nothing.

Invariants: forked before the caller runs a thread of its own (a fork copies
no lock another thread holds); the child resets the signal handlers and the
wakeup fd asyncio set, and leaves only through ``os._exit``; its failure comes
back as :class:`PKIError` with the child's own message.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from k8py.cluster.pki import ClusterPKI
from k8py.cluster.zygote_client import AdoptedChild

__all__ = ["PKIError", "ensure_in_child"]


class PKIError(RuntimeError):
    """The certificates could not be made; the message is the child's."""


async def ensure_in_child(pki: ClusterPKI, **kwargs: Any) -> None:
    """:meth:`ClusterPKI.ensure` (``kwargs`` as it takes them) in a forked child."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (coverage does not follow it)
        code = 1
        try:
            os.close(read_fd)
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            pki.ensure(**kwargs)
            code = 0
        except BaseException as err:  # noqa: BLE001 - handed to the parent
            os.write(write_fd, f"{type(err).__name__}: {err}".encode(errors="replace")[:4000])
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        code = await AdoptedChild(pid).wait()
        message = os.read(read_fd, 4096).decode(errors="replace")
    finally:
        os.close(read_fd)
    if code != 0:
        raise PKIError(message or f"the process making them exited with code {code}")
