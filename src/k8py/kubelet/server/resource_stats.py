"""``/metrics/resource`` and ``/stats/summary``: what metrics-server (and k8py's metrics API) reads.

``/metrics/resource`` is upstream's resource-metrics endpoint in the
Prometheus text format, every sample stamped with the time it was measured
(milliseconds): ``node_cpu_usage_seconds_total``,
``node_memory_working_set_bytes``, ``container_cpu_usage_seconds_total``,
``container_memory_working_set_bytes``, ``container_start_time_seconds``,
``pod_cpu_usage_seconds_total``, ``pod_memory_working_set_bytes``,
``resource_scrape_error``. Cumulative CPU seconds: the reader computes rates
from two scrapes, as metrics-server does.

``/stats/summary`` is the kubelet Summary API (``stats/v1alpha1``) with the
fields ``kubectl get --raw .../proxy/stats/summary`` users read (node and per
pod/container cpu and memory, the pod's ``network`` when the runtime
measures it, the node's ``fs`` and ``runtime.imageFs``: the filesystems of
the kubelet's root directory and of the images, the runtime's own on
containerd); ``usageNanoCores`` is the rate since the previous call (0 on
the first).

Measurements come from :mod:`k8py.kubelet.stats` (``/proc``), or from the
runtime when it measures its containers itself (a ``StatsRuntime``: CRI
``ListContainerStats``, containerd reading their cgroups); containers are
the newest running attempt of each container the kubelet's pods have.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import orjson
from aiohttp import web

from k8py.kubelet import stats
from k8py.kubelet.runtime.protocols import ContainerState, ContainerStatus, PodNetworkUsage, StatsRuntime
from k8py.kubelet.server_context import ServerContext

__all__ = ["resource_metrics_handler", "summary_handler", "collect"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class ContainerSample:
    namespace: str
    pod: str
    uid: str
    container: str
    started_at: float
    usage: stats.Usage


@dataclass(frozen=True, slots=True)
class Sample:
    timestamp: float
    node_cpu_seconds: float
    node_memory: stats.NodeMemory
    containers: list[ContainerSample]
    #: pod UID → its network counters, when the runtime measures them (CRI ListPodSandboxStats)
    networks: dict[str, PodNetworkUsage] = field(default_factory=dict)


async def collect(ctx: ServerContext) -> Sample:
    running: list[tuple[str, str, str, ContainerStatus]] = []
    for pod in ctx.pods.pods():
        meta = pod.get("metadata") or {}
        ns, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
        newest: dict[str, ContainerStatus] = {}
        for c in await ctx.pods.containers(ns, name):
            newest[c.name] = c
        running += [(ns, name, uid, c) for c in newest.values() if c.state == ContainerState.RUNNING]
    if isinstance(ctx.runtime, StatsRuntime):  # CRI: the runtime measures its containers (ListContainerStats)
        measured = {u.container_id: stats.Usage(u.cpu_seconds, u.memory_bytes, u.timestamp)
                    for u in await ctx.runtime.list_container_stats()}
        containers = [ContainerSample(ns, name, uid, c.name, c.started_at, measured[c.id])
                      for ns, name, uid, c in running if c.id in measured]
        networks = {n.pod_uid: n for n in await ctx.runtime.list_pod_network_stats()}
        return Sample(time.time(), stats.node_cpu_seconds(), stats.node_memory(), containers, networks)
    running = [r for r in running if r[3].pid > 0]
    usage = stats.usage_of(c.pid for *_, c in running)
    containers = [
        ContainerSample(ns, name, uid, c.name, c.started_at, usage[c.pid]) for ns, name, uid, c in running if c.pid in usage
    ]
    return Sample(time.time(), stats.node_cpu_seconds(), stats.node_memory(), containers)


def _labels(**kv: str) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in kv.items()) + "}"


_HELP = {
    "container_cpu_usage_seconds_total": ("counter", "[STABLE] Cumulative cpu time consumed by the container in core-seconds"),
    "container_memory_working_set_bytes": ("gauge", "[STABLE] Current working set of the container in bytes"),
    "container_start_time_seconds": ("gauge", "[STABLE] Start time of the container since unix epoch in seconds"),
    "node_cpu_usage_seconds_total": ("counter", "[STABLE] Cumulative cpu time consumed by the node in core-seconds"),
    "node_memory_working_set_bytes": ("gauge", "[STABLE] Current working set of the node in bytes"),
    "pod_cpu_usage_seconds_total": ("counter", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds"),
    "pod_memory_working_set_bytes": ("gauge", "[STABLE] Current working set of the pod in bytes"),
    "resource_scrape_error": ("gauge", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise"),
}


def render_resource_metrics(sample: Sample) -> str:
    ms = int(sample.timestamp * 1000)
    series: dict[str, list[str]] = {name: [] for name in _HELP}
    pods: dict[tuple[str, str], list[stats.Usage]] = {}
    for c in sample.containers:
        labels = _labels(container=c.container, namespace=c.namespace, pod=c.pod)
        series["container_cpu_usage_seconds_total"].append(f"{labels} {c.usage.cpu_seconds:.9f} {ms}")
        series["container_memory_working_set_bytes"].append(f"{labels} {c.usage.memory_bytes} {ms}")
        series["container_start_time_seconds"].append(f"{labels} {c.started_at:.3f}")
        pods.setdefault((c.namespace, c.pod), []).append(c.usage)
    for (ns, pod), usages in pods.items():
        labels = _labels(namespace=ns, pod=pod)
        series["pod_cpu_usage_seconds_total"].append(f"{labels} {sum(u.cpu_seconds for u in usages):.9f} {ms}")
        series["pod_memory_working_set_bytes"].append(f"{labels} {sum(u.memory_bytes for u in usages)} {ms}")
    series["node_cpu_usage_seconds_total"].append(f" {sample.node_cpu_seconds:.9f} {ms}")
    series["node_memory_working_set_bytes"].append(f" {sample.node_memory.working_set} {ms}")
    series["resource_scrape_error"].append(" 0")
    lines = []
    for name, (kind, text) in _HELP.items():
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{s}" for s in series[name]]
    return "\n".join(lines) + "\n"


def resource_metrics_handler(ctx: ServerContext) -> Handler:
    async def handler(_: web.Request) -> web.Response:
        sample = await collect(ctx)
        return web.Response(text=render_resource_metrics(sample), content_type="text/plain", charset="utf-8")

    return handler


def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class _Rates:
    """Core-nanoseconds per second since the previous summary, per key."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, float]] = {}

    def rate(self, key: str, when: float, cpu_seconds: float) -> int:
        previous = self._last.get(key)
        self._last[key] = (when, cpu_seconds)
        if previous is None or when <= previous[0] or cpu_seconds < previous[1]:
            return 0
        return int((cpu_seconds - previous[1]) / (when - previous[0]) * 1e9)


def summary_handler(ctx: ServerContext, *, boot_time: float | None = None) -> Handler:
    rates = _Rates()
    started = boot_time if boot_time is not None else time.time()

    def cpu(key: str, when: float, seconds: float) -> dict[str, Any]:
        return {"time": _rfc3339(when), "usageNanoCores": rates.rate(key, when, seconds), "usageCoreNanoSeconds": int(seconds * 1e9)}

    def memory(when: float, working_set: int, available: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"time": _rfc3339(when), "usageBytes": working_set, "workingSetBytes": working_set, "rssBytes": working_set}
        if available is not None:
            out["availableBytes"] = available
        return out

    def network(n: PodNetworkUsage) -> dict[str, Any]:
        def iface(i: Any) -> dict[str, Any]:
            return {"name": i.name, "rxBytes": i.rx_bytes, "rxErrors": i.rx_errors, "txBytes": i.tx_bytes, "txErrors": i.tx_errors}

        # upstream's NetworkStats: the default interface's counters inline, every interface in the list
        return {"time": _rfc3339(n.timestamp), **iface(n.interfaces[0]), "interfaces": [iface(i) for i in n.interfaces]}

    def fs(when: float, path: str) -> dict[str, Any] | None:
        """Upstream's FsStats of the filesystem holding ``path`` (None when it cannot be read)."""
        try:
            st = os.statvfs(path)
        except OSError:
            return None
        capacity, available = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        return {"time": _rfc3339(when), "availableBytes": available, "capacityBytes": capacity,
                "usedBytes": (st.f_blocks - st.f_bfree) * st.f_frsize, "inodesFree": st.f_ffree, "inodes": st.f_files,
                "inodesUsed": st.f_files - st.f_ffree}

    async def handler(_: web.Request) -> web.Response:
        s = await collect(ctx)
        node_path, image_path = ctx.filesystems()
        node_fs = fs(s.timestamp, node_path) if node_path else None
        image_fs = fs(s.timestamp, image_path) if image_path else None
        pods: dict[tuple[str, str, str], list[ContainerSample]] = {}
        for c in s.containers:
            pods.setdefault((c.namespace, c.pod, c.uid), []).append(c)
        body = {
            "node": {
                "nodeName": ctx.node_name,
                "startTime": _rfc3339(started),
                "cpu": cpu("node", s.timestamp, s.node_cpu_seconds),
                "memory": memory(s.timestamp, s.node_memory.working_set, s.node_memory.available),
                **({"fs": node_fs} if node_fs else {}),
                **({"runtime": {"imageFs": image_fs}} if image_fs else {}),
            },
            "pods": [
                {
                    "podRef": {"name": pod, "namespace": ns, "uid": uid},
                    "startTime": _rfc3339(min(c.started_at for c in cs)),
                    "containers": [
                        {
                            "name": c.container,
                            "startTime": _rfc3339(c.started_at),
                            "cpu": cpu(f"{ns}/{pod}/{c.container}", c.usage.timestamp, c.usage.cpu_seconds),
                            "memory": memory(c.usage.timestamp, c.usage.memory_bytes),
                        }
                        for c in cs
                    ],
                    "cpu": cpu(f"{ns}/{pod}", s.timestamp, sum(c.usage.cpu_seconds for c in cs)),
                    "memory": memory(s.timestamp, sum(c.usage.memory_bytes for c in cs)),
                    **({"network": network(s.networks[uid])} if uid in s.networks else {}),
                }
                for (ns, pod, uid), cs in pods.items()
            ],
        }
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    return handler
