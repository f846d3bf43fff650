"""Clients for the failover test: an acknowledged-write recorder and a
watch that fails over between API servers the way a reflector does.

Both run in threads and use the official client, as a controller would.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

__all__ = ["Ack", "Writer", "FailoverWatch"]


@dataclass(frozen=True)
class Ack:
    name: str
    uid: str
    rv: str
    at: float


@dataclass
class Writer:
    """Creates ConfigMaps through one server as fast as it answers, recording
    every acknowledged create; failures are counted and retried with a new name."""

    core: kubernetes.client.CoreV1Api
    namespace: str
    tag: str
    acks: list[Ack] = field(default_factory=list)
    failures: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"writer-{self.tag}", daemon=True)

    def start(self) -> "Writer":
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            name = f"{self.tag}-{i:05d}"
            i += 1
            try:
                obj = self.core.create_namespaced_config_map(
                    self.namespace, {"metadata": {"name": name}, "data": {"i": str(i)}}, _request_timeout=15
                )
            except (ApiException, urllib3.exceptions.HTTPError, OSError):
                self.failures += 1
                self._stop.wait(0.1)
                continue
            self.acks.append(Ack(name, obj.metadata.uid, obj.metadata.resource_version, time.monotonic()))
            self._stop.wait(0.02)

    def acked_since(self, t: float) -> int:
        return sum(1 for a in self.acks if a.at > t)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(20)


class FailoverWatch:
    """A watch through ``cores[0]``; when its server goes away it moves to the
    next one and resumes from the last resourceVersion it saw. A 410 (the
    ERROR event the official client raises as ApiException) makes it relist
    on the server it is on and watch from the list's resourceVersion.

    ``events`` holds (type, name, resourceVersion) of every event received;
    ``reconnects`` counts failovers, ``ends`` streams the server closed
    cleanly, ``relists`` lists after a 410.
    """

    def __init__(self, cores: list[kubernetes.client.CoreV1Api], namespace: str, resource: str, *, resource_version: str) -> None:
        self.cores = cores
        self.namespace = namespace
        self.resource = resource
        self.rv = resource_version
        self.server = 0
        self.events: list[tuple[str, str, str]] = []
        self.listed: set[str] = set()
        self.reconnects = self.ends = self.relists = 0
        self.errors: list[str] = []
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"failover-watch-{resource}", daemon=True)

    def start(self) -> "FailoverWatch":
        self._thread.start()
        return self

    def _list_fn(self) -> Any:
        return getattr(self.cores[self.server], f"list_namespaced_{self.resource}")

    def _run(self) -> None:
        while not self._stopped:
            try:
                watch = kubernetes.watch.Watch()
                for event in watch.stream(self._list_fn(), self.namespace, resource_version=self.rv, timeout_seconds=300):
                    meta = event["object"].metadata
                    with self._cond:
                        self.events.append((event["type"], meta.name, meta.resource_version))
                        self.rv = meta.resource_version
                        self._cond.notify_all()
                    if self._stopped:
                        return
                with self._cond:
                    self.ends += 1
            except ApiException as err:
                if err.status != 410:
                    self.errors.append(f"{err.status} {err.reason}")
                    time.sleep(0.2)
                    continue
                listed = self._list_fn()(self.namespace)
                with self._cond:
                    self.relists += 1
                    self.listed = {o.metadata.name for o in listed.items}
                    self.rv = listed.metadata.resource_version
                    self._cond.notify_all()
            except (urllib3.exceptions.HTTPError, OSError):
                with self._cond:
                    self.reconnects += 1
                    self.server = (self.server + 1) % len(self.cores)
                time.sleep(0.1)

    def wait_for(self, names: set[str], *, timeout: float = 15.0) -> bool:
        """Until an ADDED event for every name in ``names`` arrived."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not names <= {n for t, n, _ in self.events if t == "ADDED"}:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def stop(self) -> None:
        self._stopped = True
