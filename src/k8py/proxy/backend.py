"""The one seam between kube-proxy's bookkeeping and how traffic is moved.

The proxy (:mod:`k8py.proxy.proxier`) turns Services and EndpointSlices into
a table of :class:`~k8py.proxy.service_table.ServicePort` values and hands the
whole table to a backend after every change. A backend makes the node
forward accordingly; it must be idempotent (the same table twice is no
work) and must never leave traffic pointed at an endpoint that is gone.

Backends:

- :class:`~k8py.proxy.userspace.UserspaceBackend`: asyncio listeners on each
  cluster IP:port and node port, relaying TCP and UDP to the endpoints; no
  root needed, works with pods that share the host network (the process
  runtime);
- :class:`~k8py.proxy.nftables.backend.NftablesBackend`: kube-proxy's
  nftables mode (DNAT, ``numgen`` load balancing) in the proxy's own table,
  for nodes whose pods have their own network namespaces (root).
"""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from k8py.proxy.service_table import ServicePort, ServicePortKey

__all__ = ["ProxyBackend", "SyncIncomplete"]


class SyncIncomplete(RuntimeError):
    """A sync applied what it could, but some of the table is not in force yet
    (a cluster IP's port was in use); the proxier calls ``sync`` again later."""


class ProxyBackend(Protocol):
    async def sync(self, table: Mapping[ServicePortKey, ServicePort], node_addresses: Sequence[str]) -> None:
        """Forward as ``table`` says: cluster IPs to ``cluster_endpoints``, node ports on
        ``node_addresses`` to ``external_endpoints``; a port with no endpoint refuses
        connections at once (upstream's REJECT). Raises when some of it could not be
        put in force; the proxier then records nothing as applied and syncs again later."""

    async def close(self) -> None:
        """Stop forwarding; connections in flight may be cut."""
