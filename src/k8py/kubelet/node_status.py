"""The Node object: registration and status (upstream's ``kubelet_node_status``).

The source of truth for what this node says about itself: capacity and
allocatable, labels, taints, nodeInfo, addresses, the daemon endpoint, the
images present, and the conditions read from the host:

- ``Ready`` — True while the kubelet runs (``KubeletReady``) and its runtime is ready: a CRI
  runtime whose RuntimeReady or NetworkReady is false makes it False (``KubeletNotReady``, the
  runtime's reason in the message, as upstream);
- ``MemoryPressure``, ``DiskPressure``, ``PIDPressure`` — what the eviction manager
  (:mod:`k8py.kubelet.eviction`) says from its thresholds, as upstream; a kubelet without
  one (simulated nodes) reads them from the host with upstream's default thresholds.

Registration creates the Node, or, if it exists, merges our labels into it
(upstream reconciles a few fields the same way). Status is patched when it
changes or the Node's conditions differ from the kubelet's (the node
lifecycle controller marked it Unknown), and otherwise every ``node_status_report_frequency`` (5 min) —
the Lease (``node_lease``) is the cheap heartbeat, as upstream since 1.17.

``spec.podCIDR`` is read back from the Node on every check: when node IPAM
sets it, the runtime is told (CRI ``UpdateRuntimeConfig``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

from k8py.api.errors import AlreadyExists, NotFound
from k8py.client.resources import NODES
from k8py.client.rest import PatchType, RestClient
from k8py.kubelet.config import KUBELET_VERSION, KubeletConfig
from k8py.kubelet.runtime.protocols import Image

__all__ = ["HostReadings", "read_host", "build_node", "node_conditions", "host_pressure", "NodeStatusReporter", "rfc3339"]

logger = logging.getLogger(__name__)

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}


def rfc3339(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


@dataclass(frozen=True)
class HostReadings:
    cpus: int
    memory_bytes: int
    memory_available: int
    disk_bytes: int
    disk_available: int
    pids_used: int
    pid_max: int
    kernel: str
    os_image: str
    boot_id: str
    machine_id: str


def _read(path: str, default: str = "") -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return default


def read_host(root_dir: str) -> HostReadings:
    mem: dict[str, int] = {}
    for line in _read("/proc/meminfo").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            mem[key] = int(parts[0]) * 1024
    os.makedirs(root_dir, exist_ok=True)
    st = os.statvfs(root_dir)
    os_image = "Linux"
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            os_image = line.split("=", 1)[1].strip('"')
    return HostReadings(
        cpus=os.cpu_count() or 1,
        memory_bytes=mem.get("MemTotal", 0),
        memory_available=mem.get("MemAvailable", mem.get("MemFree", 0)),
        disk_bytes=st.f_blocks * st.f_frsize,
        disk_available=st.f_bavail * st.f_frsize,
        pids_used=sum(1 for e in os.listdir("/proc") if e.isdigit()),
        pid_max=int(_read("/proc/sys/kernel/pid_max", "32768") or 32768),
        kernel=platform.release(),
        os_image=os_image,
        boot_id=_read("/proc/sys/kernel/random/boot_id"),
        machine_id=_read("/etc/machine-id"),
    )


def _condition(kind: str, ok: bool, reason_ok: str, msg_ok: str, reason_bad: str, msg_bad: str, *, ready: bool = False) -> dict[str, str]:
    status = ("True" if ok else "False") if ready else ("False" if ok else "True")
    return {"type": kind, "status": status, "reason": reason_ok if ok else reason_bad, "message": msg_ok if ok else msg_bad}


def host_pressure(host: HostReadings) -> set[str]:
    """Pressure read straight from the host (for kubelets without an eviction manager)."""
    out = set()
    if host.memory_available < 100 * 1024 * 1024:
        out.add("MemoryPressure")
    if host.disk_bytes and host.disk_available * 10 < host.disk_bytes:
        out.add("DiskPressure")
    if host.pids_used * 10 > host.pid_max * 9:
        out.add("PIDPressure")
    return out


def node_conditions(host: HostReadings, pressure: set[str] | None = None, not_ready: Sequence[str] = ()) -> list[dict[str, str]]:
    """The four conditions without timestamps (compared to detect changes); ``pressure``: the
    eviction manager's conditions (None: read from the host, :func:`host_pressure`); ``not_ready``: why
    the runtime is not ready (Ready False with them as its message, upstream's aggregate of errors)."""
    pressure = host_pressure(host) if pressure is None else pressure
    why = not_ready[0] if len(not_ready) == 1 else f"[{', '.join(not_ready)}]"
    return [
        _condition("MemoryPressure", "MemoryPressure" not in pressure, "KubeletHasSufficientMemory",
                   "kubelet has sufficient memory available", "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        _condition("DiskPressure", "DiskPressure" not in pressure, "KubeletHasNoDiskPressure",
                   "kubelet has no disk pressure", "KubeletHasDiskPressure", "kubelet has disk pressure"),
        _condition("PIDPressure", "PIDPressure" not in pressure, "KubeletHasSufficientPID",
                   "kubelet has sufficient PID available", "KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
        _condition("Ready", not not_ready, "KubeletReady", "kubelet is posting ready status", "KubeletNotReady", why, ready=True),
    ]


def _capacity(config: KubeletConfig, host: HostReadings) -> tuple[dict[str, str], dict[str, str]]:
    cap = {"cpu": str(host.cpus), "memory": f"{host.memory_bytes // 1024}Ki", "ephemeral-storage": f"{host.disk_bytes // 1024}Ki",
           "pods": str(config.max_pods), "hugepages-2Mi": "0"}
    cap.update(config.capacity)
    alloc = dict(cap)
    alloc.update({k: v for k, v in config.system_reserved.items() if k not in cap})  # reserved names only subtract below
    for key, reserved in config.system_reserved.items():
        if key == "cpu" and key in cap:
            alloc[key] = f"{max(0, int(float(cap[key]) * 1000) - _millis(reserved))}m"
        elif key in ("memory", "ephemeral-storage") and key in cap:
            from k8py.kubelet.config import parse_quantity_bytes
            alloc[key] = f"{max(0, parse_quantity_bytes(cap[key]) - parse_quantity_bytes(reserved)) // 1024}Ki"
    return cap, alloc


def _millis(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def build_node(config: KubeletConfig, host: HostReadings, *, runtime_version: str, port: int, images: list[Image]) -> dict[str, Any]:
    arch = _ARCH.get(platform.machine(), platform.machine())
    labels = {
        "kubernetes.io/hostname": config.node_name, "kubernetes.io/os": "linux", "kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": arch, **config.node_labels,
    }
    cap, alloc = _capacity(config, host)
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": config.node_name, "labels": labels,
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {},
        "status": {
            "capacity": cap, "allocatable": alloc,
            "addresses": [{"type": "InternalIP", "address": config.address}, {"type": "Hostname", "address": config.node_name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": {
                "machineID": host.machine_id, "systemUUID": host.machine_id, "bootID": host.boot_id, "kernelVersion": host.kernel,
                "osImage": host.os_image, "containerRuntimeVersion": runtime_version, "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION, "operatingSystem": "linux", "architecture": arch,
            },
            "images": [{"names": [*img.repo_digests, *img.repo_tags], "sizeBytes": img.size} for img in images],
        },
    }
    if config.register_with_taints:
        node["spec"]["taints"] = [dict(t) for t in config.register_with_taints]
    return node


class NodeStatusReporter:
    """Registers the node, then keeps its status current (see the module docstring)."""

    def __init__(self, client: RestClient, config: KubeletConfig, *, runtime_version: str, port: int,
                 host: Callable[[], HostReadings], images: Callable[[], Awaitable[list[Image]]],
                 on_pod_cidr: Callable[[str], Awaitable[None]], pressure: Callable[[], set[str]] | None = None,
                 cached_node: Callable[[], dict[str, Any] | None] | None = None,
                 runtime_errors: Callable[[], Awaitable[list[str]]] | None = None) -> None:
        """``cached_node``: the Node as a shared informer has it (the simulated
        nodes watch all their Nodes once), read instead of a GET per update;
        when it gives None (not seen yet) the update GETs it. ``runtime_errors``:
        why the container runtime is not ready (:class:`~k8py.kubelet.runtime.protocols.HealthRuntime`);
        while it says so, Ready is False and the status is checked every second."""
        self.client = client
        self._runtime_errors = runtime_errors
        self.not_ready: list[str] = []
        self._pressure = pressure
        self._cached_node = cached_node
        self.config = config
        self.runtime_version = runtime_version
        self.port = port
        self._host = host
        self._images = images
        self._on_pod_cidr = on_pod_cidr
        self._last_sent: Any = None
        self._last_report = 0.0
        self._transitions: dict[str, str] = {}
        self.pod_cidr = ""
        self.registered = asyncio.Event()
        #: the last :meth:`register` created the Node (rather than finding it)
        self.created = False
        self._built_node: dict[str, Any] | None = None
        self._built_key: Any = None

    async def register(self) -> dict[str, Any]:
        """Create the Node with its status and conditions in one request, as
        upstream's ``initialNode`` (Ready from its first revision, with no status
        patch right after; the ``not-ready`` taint the NodeTaint admission step
        puts on every new Node is taken off by the node lifecycle controller, as
        upstream); a Node that exists gets our labels and a full status update."""
        host = self._host()
        node = build_node(self.config, host, runtime_version=self.runtime_version, port=self.port, images=await self._images())
        self.not_ready = await self._runtime_errors() if self._runtime_errors is not None else []
        conditions = node_conditions(host, self._pressure() if self._pressure is not None else None, self.not_ready)
        now = rfc3339()
        node["status"]["conditions"] = [{**c, "lastHeartbeatTime": now, "lastTransitionTime": now} for c in conditions]
        try:
            created = await self.client.create(NODES, node)
            logger.info("node registered", extra={"node": self.config.node_name})
        except AlreadyExists:
            current = await self.client.get(NODES, None, self.config.node_name)
            created = await self.client.patch(NODES, None, self.config.node_name, {"metadata": {"labels": node["metadata"]["labels"]}},
                                              patch_type=PatchType.MERGE)
            logger.info("node already registered", extra={"node": self.config.node_name, "uid": current["metadata"].get("uid")})
            self.registered.set()
            await self.update(force=True, node=created)
            return created
        self.created = True
        self._last_sent = (conditions, node["status"]["capacity"], node["status"]["allocatable"], node["status"]["images"])
        self._last_report = time.monotonic()
        self.registered.set()
        await self.update(node=created)  # the pod range, if the Node was created with one
        return created

    async def update(self, *, force: bool = False, node: dict[str, Any] | None = None) -> None:
        if node is None and self._cached_node is not None:
            node = self._cached_node()
        if node is None:
            try:
                node = await self.client.get(NODES, None, self.config.node_name)
            except NotFound:
                logger.warning("node object deleted: registering again", extra={"node": self.config.node_name})
                await self.register()
                return
        cidr = (node.get("spec") or {}).get("podCIDR") or ""
        if cidr and cidr != self.pod_cidr:
            self.pod_cidr = cidr
            await self._on_pod_cidr(cidr)
        host = self._host()
        fresh = self._built(host, await self._images())
        self.not_ready = await self._runtime_errors() if self._runtime_errors is not None else []
        conditions = node_conditions(host, self._pressure() if self._pressure is not None else None, self.not_ready)
        comparable = (conditions, fresh["status"]["capacity"], fresh["status"]["allocatable"], fresh["status"]["images"])
        now_mono = time.monotonic()
        previous = {c["type"]: c for c in ((node.get("status") or {}).get("conditions") or [])}
        # compared with the Node as the API has it, not only with what was last sent, as upstream's
        # nodeStatusHasChanged: the node lifecycle controller sets Ready Unknown while the kubelet is
        # unreachable, and a kubelet back must say Ready again at once, not at the next report
        drifted = any((previous.get(c["type"]) or {}).get("status") != c["status"] for c in conditions)
        if not force and not drifted and comparable == self._last_sent and \
                now_mono - self._last_report < self.config.node_status_report_frequency:
            return
        now = rfc3339()
        stamped = []
        for c in conditions:
            old = previous.get(c["type"])
            transition = old["lastTransitionTime"] if old and old.get("status") == c["status"] and old.get("lastTransitionTime") else now
            stamped.append({**c, "lastHeartbeatTime": now, "lastTransitionTime": transition})
        status = dict(fresh["status"], conditions=stamped)
        await self.client.patch(NODES, None, self.config.node_name, {"status": status}, patch_type=PatchType.MERGE, subresource="status")
        self._last_sent = comparable
        self._last_report = now_mono

    def _built(self, host: HostReadings, images: list[Image]) -> dict[str, Any]:
        """The Node as this kubelet would write it, built again only when its inputs changed
        (a simulated node's never do: at 5,000 nodes, 170 Node dicts a second for nothing).
        Never mutated: the caller copies what it sends."""
        key = (id(self.config), host, self.port, tuple((img.id, tuple(img.repo_tags), tuple(img.repo_digests), img.size) for img in images))
        if self._built_node is None or self._built_key != key:
            self._built_node = build_node(self.config, host, runtime_version=self.runtime_version, port=self.port, images=images)
            self._built_key = key
        return self._built_node

    async def beat(self) -> float | None:
        """One look at the status: ``None`` for the next period, or how soon to look again."""
        try:
            await self.update()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # retried at the next tick; the Lease says we are alive
            logger.warning("node status update failed", extra={"node": self.config.node_name, "error": str(err)})
        # a runtime not ready yet (containerd without its CNI config until the pod CIDR comes) is looked at
        # again soon: the node goes Ready as soon as it is, not a whole period later
        return min(1.0, self.config.node_status_update_frequency) if self.not_ready else None

    async def run(self) -> None:
        while True:
            retry = await self.beat()
            await asyncio.sleep(self.config.node_status_update_frequency if retry is None else retry)
