"""``metrics.k8s.io/v1beta1``: NodeMetrics and PodMetrics, computed as metrics-server does.

What ``kubectl top nodes|pods`` reads. Upstream serves it from metrics-server
(an aggregated API) scraping every kubelet's ``/metrics/resource``; k8py's
API server does that scrape itself, on demand:

- a request scrapes the kubelets it needs (every node for NodeMetrics, the
  pods' nodes for PodMetrics), at most 32 at a time;
- CPU usage is a *rate*: the difference of cumulative core-seconds between
  this scrape and an earlier one of the same node at least ``min_window``
  seconds older and at most ``max_age`` old (kept per node). With none (the
  first request, or after a long pause) it waits ``min_window`` and scrapes
  again — the only wait, so ``kubectl top`` works on a fresh cluster;
- memory is the working set of the newest scrape;
- a container missing from either scrape has no metrics yet, and a pod with
  such a container is left out, as metrics-server leaves it out; a pod asked
  for by name then is a 404.

Quantities as metrics-server writes them: CPU in nanocores (``"1234567n"``),
memory in KiB (``"2048Ki"``); ``window`` is the interval the rate covers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

import orjson
from aiohttp import web

from k8py.api.errors import BadRequest, MethodNotAllowed, NotFound
from k8py.api.field_selectors import parse_field_selector
from k8py.api.selectors import parse_label_selector
from k8py.apiserver.streaming.kubelet_client import KubeletClient, node_location

__all__ = ["ResourceMetrics", "parse_resource_metrics", "NodeScrape", "GROUP", "VERSION"]

log = logging.getLogger(__name__)

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
Object = dict[str, Any]
#: (plural, namespace or "") -> the objects, as the watch cache has them
Lister = Callable[[str, str], Awaitable[Sequence[Object]]]


@dataclass(frozen=True, slots=True)
class NodeScrape:
    """One ``/metrics/resource`` answer: cumulative CPU seconds and working sets."""

    timestamp: float
    node_cpu: float | None = None
    node_memory: int | None = None
    #: (namespace, pod, container) -> (cpu seconds, memory bytes)
    containers: dict[tuple[str, str, str], tuple[float, int]] = field(default_factory=dict)


def _labels(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key:
            out[key.strip()] = value.strip().strip('"').replace('\\"', '"').replace("\\\\", "\\")
    return out


def parse_resource_metrics(text: str, now: float) -> NodeScrape:
    """The kubelet's Prometheus text → a scrape (timestamps from the samples when present)."""
    cpu: dict[tuple[str, str, str], float] = {}
    mem: dict[tuple[str, str, str], int] = {}
    node_cpu = node_mem = None
    stamp = 0.0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, brace, rest = line.partition("{")
        labels: dict[str, str] = {}
        if brace:
            label_text, _, rest = rest.partition("}")
            labels = _labels(label_text)
        else:
            name, _, rest = line.partition(" ")
        fields = rest.split()
        if not fields:
            continue
        value = float(fields[0])
        if len(fields) > 1:
            stamp = max(stamp, int(fields[1]) / 1000)
        key = (labels.get("namespace", ""), labels.get("pod", ""), labels.get("container", ""))
        if name == "node_cpu_usage_seconds_total":
            node_cpu = value
        elif name == "node_memory_working_set_bytes":
            node_mem = int(value)
        elif name == "container_cpu_usage_seconds_total":
            cpu[key] = value
        elif name == "container_memory_working_set_bytes":
            mem[key] = int(value)
    containers = {k: (cpu[k], mem.get(k, 0)) for k in cpu}
    return NodeScrape(stamp or now, node_cpu, node_mem, containers)


def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _duration(seconds: float) -> str:
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return f"{text}s"


def _cpu(rate: float) -> str:
    return f"{max(0, int(rate * 1e9))}n"


def _memory(nbytes: int) -> str:
    return f"{max(0, nbytes) // 1024}Ki"


class ResourceMetrics:
    def __init__(
        self,
        kubelets: KubeletClient,
        list_objects: Lister,
        *,
        min_window: float = 1.0,
        max_age: float = 600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._kubelets = kubelets
        self._list = list_objects
        self._min_window = min_window
        self._max_age = max_age
        self._clock = clock
        self._history: dict[str, deque[NodeScrape]] = {}
        #: at most this many kubelets scraped at once (a simulated cluster has thousands)
        self._scrapes = asyncio.Semaphore(32)

    # -- scraping ---------------------------------------------------------------

    async def _scrape(self, node: Object) -> NodeScrape | None:
        name = node["metadata"]["name"]
        try:
            where = node_location(node, self._kubelets.scheme)
            async with self._scrapes, self._kubelets.session.get(f"{where.base_url}/metrics/resource") as resp:
                if resp.status != 200:
                    raise OSError(f"HTTP {resp.status}")
                scrape = parse_resource_metrics(await resp.text(), self._clock())
        except Exception as err:  # one unreachable kubelet must not fail the others
            log.info("cannot scrape kubelet resource metrics", extra={"node": name, "error": str(err)})
            return None
        history = self._history.setdefault(name, deque(maxlen=8))
        history.append(scrape)
        return scrape

    def _baseline(self, name: str, current: NodeScrape) -> NodeScrape | None:
        for earlier in reversed(self._history.get(name, ())):
            gap = current.timestamp - earlier.timestamp
            if self._min_window <= gap <= self._max_age:
                return earlier
        return None

    async def _pairs(self, nodes: Sequence[Object]) -> dict[str, tuple[NodeScrape, NodeScrape]]:
        """node name -> (earlier, current) scrapes a rate can be taken over."""
        scrapes = await asyncio.gather(*(self._scrape(n) for n in nodes))
        out: dict[str, tuple[NodeScrape, NodeScrape]] = {}
        cold = []
        for node, current in zip(nodes, scrapes):
            if current is None:
                continue
            name = node["metadata"]["name"]
            earlier = self._baseline(name, current)
            if earlier is None:
                cold.append(node)
            else:
                out[name] = (earlier, current)
        if cold:
            await asyncio.sleep(self._min_window)
            for node, current in zip(cold, await asyncio.gather(*(self._scrape(n) for n in cold))):
                name = node["metadata"]["name"]
                earlier = self._baseline(name, current) if current is not None else None
                if current is not None and earlier is not None:
                    out[name] = (earlier, current)
        return out

    # -- the API ----------------------------------------------------------------------

    async def node_metrics(self, selector: str = "") -> list[Object]:
        labels = parse_label_selector(selector)
        nodes = [n for n in await self._list("nodes", "") if labels.matches((n.get("metadata") or {}).get("labels"))]
        pairs = await self._pairs(nodes)
        items = []
        for node in nodes:
            meta = node["metadata"]
            pair = pairs.get(meta["name"])
            if pair is None or pair[1].node_cpu is None or pair[0].node_cpu is None:
                continue
            earlier, current = pair
            window = current.timestamp - earlier.timestamp
            items.append(
                {
                    "metadata": {"name": meta["name"], "creationTimestamp": _rfc3339(current.timestamp), "labels": meta.get("labels") or {}},
                    "timestamp": _rfc3339(current.timestamp),
                    "window": _duration(window),
                    "usage": {
                        "cpu": _cpu((current.node_cpu - earlier.node_cpu) / window),
                        "memory": _memory(current.node_memory or 0),
                    },
                }
            )
        return items

    async def pod_metrics(self, namespace: str, selector: str = "", field_selector: str = "") -> list[Object]:
        labels = parse_label_selector(selector)
        fields = parse_field_selector(field_selector)
        pods = [
            p
            for p in await self._list("pods", namespace)
            if labels.matches(p["metadata"].get("labels"))
            and fields.matches(lambda f, p=p: {"metadata.name": p["metadata"]["name"], "metadata.namespace": p["metadata"].get("namespace", "")}.get(f))
            and (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") == "Running"
        ]
        node_names = {p["spec"]["nodeName"] for p in pods}
        nodes = [n for n in await self._list("nodes", "") if n["metadata"]["name"] in node_names]
        pairs = await self._pairs(nodes)
        items = []
        for pod in pods:
            meta = pod["metadata"]
            pair = pairs.get(pod["spec"]["nodeName"])
            if pair is None:
                continue
            earlier, current = pair
            window = current.timestamp - earlier.timestamp
            containers = []
            for c in pod["spec"].get("containers") or []:
                key = (meta.get("namespace", ""), meta["name"], c["name"])
                if key not in current.containers or key not in earlier.containers:
                    break
                (cpu_now, mem_now), (cpu_then, _) = current.containers[key], earlier.containers[key]
                containers.append({"name": c["name"], "usage": {"cpu": _cpu((cpu_now - cpu_then) / window), "memory": _memory(mem_now)}})
            else:
                items.append(
                    {
                        "metadata": {
                            "name": meta["name"],
                            "namespace": meta.get("namespace", ""),
                            "creationTimestamp": _rfc3339(current.timestamp),
                            "labels": meta.get("labels") or {},
                        },
                        "timestamp": _rfc3339(current.timestamp),
                        "window": _duration(window),
                        "containers": containers,
                    }
                )
        return items

    async def serve(self, request: web.Request, *, plural: str, namespace: str, name: str) -> web.Response:
        if request.method != "GET":
            raise MethodNotAllowed(f"{request.method} is not supported on {plural}.{GROUP}")
        if request.query.get("watch") in ("1", "true", "True"):
            raise MethodNotAllowed(f"watch is not supported on {plural}.{GROUP}")
        selector = request.query.get("labelSelector", "")
        kind = {"nodes": "NodeMetrics", "pods": "PodMetrics"}.get(plural)
        if kind is None:
            raise NotFound("the server could not find the requested resource")
        try:
            if plural == "nodes":
                items = await self.node_metrics(selector)
            else:
                fields = request.query.get("fieldSelector", "")
                if name:
                    fields = f"metadata.name={name}"
                items = await self.pod_metrics(namespace, selector, fields)
        except ValueError as err:
            raise BadRequest(str(err)) from None
        if name:
            items = [i for i in items if i["metadata"]["name"] == name]
            if not items:
                raise NotFound(f'{plural}.{GROUP} "{name}" not found', name=name, group=GROUP, kind=plural)
            body: Mapping[str, Any] = {"kind": kind, "apiVersion": f"{GROUP}/{VERSION}", **items[0]}
        else:
            body = {
                "kind": f"{kind}List",
                "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {},
                "items": [{"kind": kind, "apiVersion": f"{GROUP}/{VERSION}", **i} for i in items],
            }
        return web.Response(body=orjson.dumps(body), content_type="application/json")
