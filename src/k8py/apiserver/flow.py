"""The list-watch flow, recorded: who wrote what, and which watcher was sent which event.

An audit-style record kept in memory when the API server runs with
``--trace`` (``k8py up --trace``), served at ``GET /debug/flow`` and read by
``k8py flow``. Two kinds of record, in the order the server did them:

- ``write``: a successful create/update/patch/delete (subresources such as
  ``pods/binding`` and ``pods/status`` included) — who (the client's
  ``component``, the first word of its User-Agent, and the agent itself),
  the verb, resource, namespace, name, the resourceVersion stored and a small
  ``summary`` of the object (a pod's node and phase, a set's replica counts,
  an Event's reason and message: Events are how components say what they did);
- ``watch``: one event written to one watch stream — the watcher (its
  component and a number per stream), the event type, the object and its
  resourceVersion.

Facts only: nothing is inferred; ``k8py flow`` groups and filters. The
buffer is bounded (``capacity`` records, oldest dropped, ``dropped``
counts them); each record has a ``seq`` so a reader resumes with
``?since=SEQ``. Recording costs a JSON decode per write and per watch event,
so it is off unless asked for. Never on the request path's failure modes: a
record that cannot be summarized is kept without its summary.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from typing import Any, Callable, Iterable

import orjson

__all__ = ["FlowRecorder", "component_of"]


def component_of(user_agent: str) -> str:
    """``kubectl/v1.32.0 (linux/amd64) …`` -> ``kubectl``; ``k8py-scheduler/0.1`` -> ``scheduler``."""
    product = (user_agent or "unknown").split(" ", 1)[0].split("/", 1)[0]
    return product[5:] if product.startswith("k8py-") else product


def _summary(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {}
    if resource == "pods":
        out = {"nodeName": spec.get("nodeName", ""), "phase": status.get("phase", ""), "podIP": status.get("podIP", "")}
        if meta.get("deletionTimestamp"):
            out["deleting"] = True
        owners = meta.get("ownerReferences") or []
        if owners:
            out["owner"] = f"{owners[0].get('kind')}/{owners[0].get('name')}"
    elif resource in ("replicasets", "deployments", "statefulsets", "replicationcontrollers"):
        out = {"replicas": spec.get("replicas"), "statusReplicas": status.get("replicas", 0),
               "readyReplicas": status.get("readyReplicas", 0)}
    elif resource == "events":
        involved = obj.get("involvedObject") or obj.get("regarding") or {}
        out = {"reason": obj.get("reason", ""), "message": obj.get("message") or obj.get("note", ""),
               "involvedObject": f"{involved.get('kind', '')}/{involved.get('name', '')}",
               "reportingComponent": obj.get("reportingComponent") or obj.get("reportingController") or (obj.get("source") or {}).get("component", "")}
    elif resource == "nodes":
        ready = [c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"]
        out = {"ready": ready[0] if ready else ""}
    return out


class FlowRecorder:
    """See the module docstring. ``clock`` gives wall-clock seconds."""

    def __init__(self, *, capacity: int = 200_000, clock: Callable[[], float] = time.time) -> None:
        self._records: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._seq = 0
        self._clock = clock
        self._watch_ids = itertools.count(1)
        self.dropped = 0
        self._waiters: set[asyncio.Future[None]] = set()

    @property
    def last_seq(self) -> int:
        return self._seq

    def _append(self, record: dict[str, Any]) -> None:
        self._seq += 1
        if len(self._records) == self._records.maxlen:
            self.dropped += 1
        record["seq"] = self._seq
        record["time"] = round(self._clock(), 6)
        self._records.append(record)
        if self._waiters:
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._waiters.clear()

    def record_write(self, *, user_agent: str, verb: str, resource: str, subresource: str, namespace: str, name: str,
                     code: int, body: bytes | None) -> None:
        record: dict[str, Any] = {"kind": "write", "component": component_of(user_agent), "userAgent": user_agent, "verb": verb,
                                  "resource": resource, "subresource": subresource, "namespace": namespace, "name": name,
                                  "code": code, "rv": "", "summary": {}}
        if body:
            try:
                obj = orjson.loads(body)
            except orjson.JSONDecodeError:
                obj = None
            if isinstance(obj, dict) and obj.get("kind") != "Status":
                meta = obj.get("metadata") or {}
                record["name"] = meta.get("name") or name
                record["namespace"] = meta.get("namespace") or namespace
                record["rv"] = meta.get("resourceVersion", "")
                record["uid"] = meta.get("uid", "")
                record["summary"] = _summary(resource, obj)
        self._append(record)

    def new_watcher(self, user_agent: str, resource: str, namespace: str) -> Callable[[Iterable[tuple[str, bytes]]], None]:
        """A callback for one watch stream: record each batch of events written to it."""
        watcher = f"{component_of(user_agent)}#{next(self._watch_ids)}"
        component = component_of(user_agent)

        def sent(events: Iterable[tuple[str, bytes]]) -> None:
            for type_, data in events:
                try:
                    obj = orjson.loads(data)
                except orjson.JSONDecodeError:
                    continue
                meta = obj.get("metadata") or {}
                self._append({"kind": "watch", "component": component, "userAgent": user_agent, "watcher": watcher,
                              "watchNamespace": namespace, "event": type_, "resource": resource,
                              "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
                              "rv": meta.get("resourceVersion", ""), "summary": _summary(resource, obj)})

        return sent

    def since(self, seq: int) -> list[dict[str, Any]]:
        """Records with ``seq`` greater than ``seq``, oldest first."""
        if not self._records or self._records[-1]["seq"] <= seq:
            return []
        first = self._records[0]["seq"]
        start = max(seq - first + 1, 0)
        return list(itertools.islice(self._records, start, None))

    async def wait(self, seq: int, timeout: float) -> None:
        """Return once a record after ``seq`` exists, or after ``timeout``."""
        if self._seq > seq:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass
        finally:
            self._waiters.discard(waiter)
