"""Node IPAM (``nodeipam``): give every Node a pod CIDR from the cluster CIDR
(upstream's *range allocator*).

``--cluster-cidr`` (default ``127.64.0.0/10``: inside 127.0.0.0/8 and away
from 127.0.0.1, because the process runtime's pod IPs are loopback
addresses) is cut into subnets of ``--node-cidr-mask-size`` bits (default
24). A node without ``spec.podCIDR`` gets the lowest free subnet, written as
``spec.podCIDR`` and ``spec.podCIDRs``; the kubelet takes pod IPs from it.
The allocator's memory of used subnets is rebuilt from the nodes at start,
a node's subnet is freed when it is deleted, and a cluster out of subnets
records a ``CIDRNotAvailable`` Warning on the node (as upstream).

Queue ``cidrallocator_node`` of node names.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from k8py.api.errors import NotFound
from k8py.client.keys import DeletedFinalStateUnknown
from k8py.client.resources import NODES
from k8py.client.rest import PatchType
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController

__all__ = ["CIDRSet", "NodeIPAMController", "new_controller"]

logger = logging.getLogger(__name__)


class CIDRSet:
    """The subnets of ``cluster_cidr`` of prefix ``mask``, with which are used."""

    def __init__(self, cluster_cidr: str, mask: int) -> None:
        self.network = ipaddress.ip_network(cluster_cidr, strict=True)
        if mask < self.network.prefixlen or mask > self.network.max_prefixlen:
            raise ValueError(f"--node-cidr-mask-size {mask} must be between the cluster CIDR's prefix "
                             f"({self.network.prefixlen}) and {self.network.max_prefixlen}")
        self.mask = mask
        self.size = 2 ** (mask - self.network.prefixlen)
        self._used: set[int] = set()
        self._next = 0

    def _index(self, cidr: str) -> int | None:
        try:
            subnet = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            return None
        if subnet.prefixlen != self.mask or not subnet.subnet_of(self.network):  # type: ignore[arg-type]
            return None
        return (int(subnet.network_address) - int(self.network.network_address)) >> (self.network.max_prefixlen - self.mask)

    def _cidr(self, index: int) -> str:
        base = int(self.network.network_address) + (index << (self.network.max_prefixlen - self.mask))
        return str(ipaddress.ip_network((base, self.mask)))

    def occupy(self, cidr: str) -> bool:
        index = self._index(cidr)
        if index is None:
            return False
        self._used.add(index)
        return True

    def release(self, cidr: str) -> None:
        index = self._index(cidr)
        if index is not None:
            self._used.discard(index)

    def allocate(self) -> str | None:
        """The next free subnet (round robin from the last one given), or ``None`` when full."""
        for step in range(self.size):
            index = (self._next + step) % self.size
            if index not in self._used:
                self._used.add(index)
                self._next = index + 1
                return self._cidr(index)
        return None


class NodeIPAMController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="nodeipam", queue_name="cidrallocator_node", workers=1)
        self.cidrs = CIDRSet(ctx.options.cluster_cidr, ctx.options.node_cidr_mask_size)
        self.recorder = ctx.recorder("cidrAllocator")
        self.nodes = ctx.informers.informer(NODES)
        #: CIDRs written but not yet seen in the cache: a sync for the same node before the
        #: informer catches up must not allocate (and write over the first with) a second one
        self._written: dict[str, str] = {}
        self.wait_for(self.nodes)
        self.nodes.add_event_handler(on_add=self._seen, on_update=lambda old, new: self._seen(new), on_delete=self._deleted)

    def _seen(self, node: Any) -> None:
        for cidr in (node.get("spec") or {}).get("podCIDRs") or ():
            self.cidrs.occupy(cidr)
        if (node.get("spec") or {}).get("podCIDR"):
            self._written.pop((node.get("metadata") or {}).get("name", ""), None)
        else:
            self.enqueue(node)

    def _deleted(self, obj: Any) -> None:
        node = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if node is None:
            return
        for cidr in (node.get("spec") or {}).get("podCIDRs") or ():
            self.cidrs.release(cidr)
        written = self._written.pop((node.get("metadata") or {}).get("name", ""), None)
        if written is not None:
            self.cidrs.release(written)

    async def sync(self, name: str) -> None:
        node = self.nodes.lister.try_get(None, name)
        if node is None or (node.get("spec") or {}).get("podCIDR") or name in self._written:
            return
        cidr = self.cidrs.allocate()
        if cidr is None:
            self.recorder.event(node, "Warning", "CIDRNotAvailable",
                                f"Node {name} status is now: CIDRNotAvailable", resource=NODES)
            raise RuntimeError(f"no pod CIDR left in {self.cidrs.network} for node {name}")
        try:
            await self.client.patch(NODES, None, name, {"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}}, patch_type=PatchType.MERGE)
        except NotFound:
            self.cidrs.release(cidr)
            return
        except Exception:
            self.cidrs.release(cidr)
            raise
        self._written[name] = cidr
        logger.info("allocated pod CIDR", extra={"node": name, "cidr": cidr})


def new_controller(ctx: ControllerContext) -> NodeIPAMController:
    return NodeIPAMController(ctx)

