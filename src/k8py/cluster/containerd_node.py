"""``k8py containerd``: one node's containerd, run and watched as a k8py up component.

:func:`run` writes the node's containerd config (:mod:`.containerd`), makes
the node's bridge and routes the Service range onto it, starts Debian's
``containerd`` as a child process (its output in its log file), waits for
its socket, imports the local images (:mod:`.local_images`: the sandbox
image and busybox), and only then answers ``/healthz`` — so the supervisor
starts the kubelet against a runtime that can run a pod. ``/metrics`` says
whether containerd is up and how long its start took.

Lifecycle: containerd exiting ends :func:`run` with :class:`ContainerdExited`
(the supervisor restarts the component with backoff); cancellation (SIGTERM
from ``k8py down``) stops containerd with SIGTERM, SIGKILL after
``stop_grace`` seconds. The shims and the containers they run outlive
containerd by design — a restarted containerd finds them again, as upstream
— and ``k8py down`` removes them (:func:`~.containerd_cleanup.cleanup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from k8py.client.health_server import HealthServer
from k8py.cluster.containerd import (CNI_BIN_DIR, ContainerdLayout, containerd_missing, load_images, prepare,
                                     prepare_network, wait_for_socket)

__all__ = ["ContainerdOptions", "ContainerdExited", "run"]

logger = logging.getLogger(__name__)


class ContainerdExited(RuntimeError):
    """containerd ended while it should be running; the message carries its log's tail."""


@dataclass
class ContainerdOptions:
    layout: ContainerdLayout
    node: str
    service_cidr: str = ""
    #: a fixed pod subnet instead of the conf_template (a node without node IPAM)
    subnet: str = ""
    registries: Sequence[str] = field(default_factory=tuple)
    cni_bin_dir: str = CNI_BIN_DIR
    bind: str = "127.0.0.1"
    port: int = 0
    start_timeout: float = 60.0
    stop_grace: float = 10.0
    log_level: str = "info"


def _tail(path: str, n: int = 3000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


class _Metrics:
    def __init__(self) -> None:
        self.up = 0
        self.start_seconds = 0.0
        self.images = 0

    def render(self) -> bytes:
        return (f"# HELP k8py_containerd_up Whether this node's containerd serves its socket.\n# TYPE k8py_containerd_up gauge\n"
                f"k8py_containerd_up {self.up}\n"
                f"# HELP k8py_containerd_start_seconds From starting containerd to its images being imported.\n"
                f"# TYPE k8py_containerd_start_seconds gauge\nk8py_containerd_start_seconds {self.start_seconds:.6f}\n"
                f"# HELP k8py_containerd_local_images Images imported locally at start.\n"
                f"# TYPE k8py_containerd_local_images gauge\nk8py_containerd_local_images {self.images}\n").encode()


async def run(options: ContainerdOptions, *, on_serving: Callable[[str, str], None] | None = None) -> None:
    """Run until cancelled (see the module docstring). ``on_serving(health_url, endpoint)`` once ready."""
    why = containerd_missing(options.cni_bin_dir)
    if why:
        raise RuntimeError(why)
    layout = options.layout
    metrics = _Metrics()
    ready: list[str] = ["containerd is starting"]
    health = HealthServer(metrics=metrics.render, bind=options.bind, port=options.port,
                          healthy=lambda: ready[0] if ready else None, ready=lambda: ready[0] if ready else None)
    await asyncio.to_thread(prepare, layout, subnet=options.subnet, registries=options.registries,
                            cni_bin_dir=options.cni_bin_dir)
    await asyncio.to_thread(prepare_network, layout, service_cidr=options.service_cidr, node=options.node)
    started = time.monotonic()
    with open(layout.log_file, "ab") as log:
        proc = await asyncio.create_subprocess_exec(
            "containerd", "--config", layout.config_file, "--log-level", options.log_level,
            stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT)
    try:
        await wait_for_socket(layout.socket, timeout=options.start_timeout, alive=lambda: proc.returncode is None)
        names = await load_images(layout)
        metrics.up, metrics.images, metrics.start_seconds = 1, len(names), time.monotonic() - started
        await health.start()
        ready.clear()
        logger.info("containerd ready", extra={"node": options.node, "endpoint": layout.endpoint,
                                               "seconds": round(metrics.start_seconds, 3)})
        if on_serving is not None:
            on_serving(health.url, layout.endpoint)
        code = await proc.wait()
        metrics.up = 0
        raise ContainerdExited(f"containerd exited with code {code}; {layout.log_file} ends:\n{_tail(layout.log_file)}")
    except RuntimeError as err:
        if proc.returncode is not None and not isinstance(err, ContainerdExited):
            raise ContainerdExited(f"{err} (exit code {proc.returncode}); {layout.log_file} ends:\n{_tail(layout.log_file)}") from err
        raise
    finally:
        await health.stop()
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), options.stop_grace)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
