"""The node's heartbeat: a Lease in ``kube-node-lease`` renewed every 10 s.

As upstream's ``nodelease`` controller: the Lease is named after the node,
held by it (``holderIdentity``), ``leaseDurationSeconds`` 40, owned by the
Node (so it goes when the Node does), and its ``renewTime`` moves forward
at every renewal. The node lifecycle controller reads it to tell a live
node from a dead one; the NodeStatus itself is only patched on change.

A failed renewal is retried at the next tick (logged); a conflict means
someone else wrote the Lease: the next renewal reads it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from k8py.api.errors import AlreadyExists, Conflict, NotFound
from k8py.client.resources import LEASES
from k8py.client.rest import RestClient

__all__ = ["NodeLease", "micro_time", "LEASE_NAMESPACE"]

logger = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"


def micro_time(t: float | None = None) -> str:
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1_000_000):06d}Z"


class NodeLease:
    def __init__(self, client: RestClient, node_name: str, *, duration: int = 40, interval: float = 10.0,
                 node_uid: Callable[[], Awaitable[str]] | None = None) -> None:
        self.client = client
        self.node_name = node_name
        self.duration = duration
        self.interval = interval
        self._node_uid = node_uid
        self._lease: dict[str, Any] | None = None
        self.renewals = 0
        #: the first renewal creates the Lease without reading it first (it falls back to the read
        #: on AlreadyExists): set by a caller that has just created the Node, whose Lease cannot
        #: exist yet but for a leftover — at 5,000 new simulated nodes, 5,000 GETs that find nothing
        self.create_first = False

    async def renew(self) -> None:
        now = micro_time()
        if self._lease is None:
            if self.create_first:
                self.create_first = False
            else:
                try:
                    self._lease = await self.client.get(LEASES, LEASE_NAMESPACE, self.node_name)
                except NotFound:
                    pass
        if self._lease is None:
            lease: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.node_name, "namespace": LEASE_NAMESPACE},
                "spec": {"holderIdentity": self.node_name, "leaseDurationSeconds": self.duration, "renewTime": now},
            }
            if self._node_uid is not None:
                uid = await self._node_uid()
                if uid:
                    lease["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": uid}]
            try:
                self._lease = await self.client.create(LEASES, lease)
                self.renewals += 1
                return
            except AlreadyExists:
                self._lease = await self.client.get(LEASES, LEASE_NAMESPACE, self.node_name)
        lease = dict(self._lease)
        lease["spec"] = dict(lease.get("spec") or {}, holderIdentity=self.node_name, leaseDurationSeconds=self.duration, renewTime=now)
        try:
            self._lease = await self.client.update(LEASES, lease)
            self.renewals += 1
        except (Conflict, NotFound):
            self._lease = None
            raise

    async def beat(self) -> float | None:
        """One renewal: ``None`` when it went through, else how soon to try again (logged)."""
        try:
            await self.renew()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            logger.warning("node lease renewal failed", extra={"node": self.node_name, "error": str(err)})
            return min(self.interval, 1.0)
        return None

    async def run(self) -> None:
        while True:
            retry = await self.beat()
            await asyncio.sleep(self.interval if retry is None else retry)
