"""Pod IPs from the node's pod CIDR (host-local IPAM, in the runtime as CNI's is).

The process runtime gives every pod its own loopback address: the node's
``spec.podCIDR`` lies inside 127.0.0.0/8 (the default cluster CIDR is
127.64.0.0/10), and on Linux every 127.x.y.z address answers on ``lo``
without configuration, so pods can all bind port 80 side by side.

Invariants: an address is handed out at most once until released; the
network and broadcast addresses and the first host (the "gateway", by CNI
convention) are never handed out; allocation is round-robin from the last
one given, so a freshly released address is not reused at once.
"""

from __future__ import annotations

import ipaddress

__all__ = ["PodIPAllocator", "IPExhausted"]


class IPExhausted(RuntimeError):
    pass


class PodIPAllocator:
    def __init__(self, cidr: str) -> None:
        self.network = ipaddress.ip_network(cidr, strict=False)
        self._used: set[str] = set()
        self._cursor = 1

    @property
    def cidr(self) -> str:
        return str(self.network)

    def reserve(self, ip: str) -> None:
        """Mark an address as taken (adoption after a restart)."""
        self._used.add(ip)

    def allocate(self) -> str:
        size = self.network.num_addresses
        if size < 4:
            raise IPExhausted(f"pod CIDR {self.network} is too small")
        for _ in range(size):
            self._cursor += 1
            if self._cursor >= size - 1:
                self._cursor = 2
            ip = str(self.network[self._cursor])
            if ip not in self._used:
                self._used.add(ip)
                return ip
        raise IPExhausted(f"no free address left in pod CIDR {self.network}")

    def release(self, ip: str) -> None:
        self._used.discard(ip)
