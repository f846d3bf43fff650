"""Choosing an endpoint for a new connection (upstream's userspace
``LoadBalancerRR``): round-robin over the usable endpoints, and under
``sessionAffinity: ClientIP`` the endpoint a client last used, for as long as
it stays usable and the client came back within the affinity timeout.

One :class:`Balancer` per service port and traffic kind (cluster IP, node
port). :meth:`Balancer.pick` takes the endpoints usable *now* (the backend
hands the latest list), so a removed endpoint is never picked again, and an
affinity entry pointing at one is dropped. ``exclude`` skips endpoints that
already refused this connection (the backend retries on the next one).

Time comes from an injectable ``monotonic`` function; affinity entries are
pruned as they are looked up and in :meth:`prune`, so the map holds at most
one entry per client seen within the timeout.
"""

from __future__ import annotations

import time
from typing import Callable, Collection, Sequence

from k8py.proxy.service_table import Endpoint

__all__ = ["Balancer"]


class Balancer:
    def __init__(self, *, affinity: bool = False, affinity_timeout: float = 10800.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.affinity = affinity
        self.affinity_timeout = affinity_timeout
        self._monotonic = monotonic
        self._next = 0
        self._sessions: dict[str, tuple[tuple[str, int], float]] = {}

    def configure(self, *, affinity: bool, affinity_timeout: float) -> None:
        if not affinity:
            self._sessions.clear()
        self.affinity = affinity
        self.affinity_timeout = affinity_timeout

    def pick(self, client_ip: str, endpoints: Sequence[Endpoint],
             exclude: Collection[tuple[str, int]] = ()) -> Endpoint | None:
        candidates = [ep for ep in endpoints if ep.address not in exclude]
        if not candidates:
            return None
        now = self._monotonic()
        if self.affinity:
            session = self._sessions.get(client_ip)
            if session is not None and now - session[1] <= self.affinity_timeout:
                for ep in candidates:
                    if ep.address == session[0]:
                        self._sessions[client_ip] = (ep.address, now)
                        return ep
        chosen = candidates[self._next % len(candidates)]
        self._next = (self._next + 1) % (1 << 30)
        if self.affinity:
            self._sessions[client_ip] = (chosen.address, now)
        return chosen

    def prune(self) -> None:
        now = self._monotonic()
        for client, (_, seen) in list(self._sessions.items()):
            if now - seen > self.affinity_timeout:
                del self._sessions[client]
