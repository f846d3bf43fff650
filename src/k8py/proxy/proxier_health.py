"""The proxy's own health server on ``--healthz-bind-address`` (upstream
kube-proxy's ``ProxierHealthServer``, default ``0.0.0.0:10256`` there; off
unless asked for here, since several node proxies share one machine).

- ``/livez``: 200 while the proxier keeps up — it has synced, and no change
  has waited longer than ``timeout`` (upstream: twice the sync period) for a
  sync; 503 otherwise. Body ``{"lastUpdated": "...","currentTime": "..."}``.
- ``/healthz``: the same, and also 503 when the node is not eligible for
  traffic (its Node is being deleted or carries the cluster autoscaler's
  ``ToBeDeletedByClusterAutoscaler`` taint); the body adds ``"nodeEligible"``.

A healthy answer's ``lastUpdated`` is the current time, as upstream keeps it
for older clients. Times print as Go's ``time.Time.String()``.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Callable

from aiohttp import web

__all__ = ["ProxierHealthServer", "go_time", "node_eligible"]

TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"


def go_time(epoch: float) -> str:
    when = datetime.fromtimestamp(epoch, timezone.utc)
    nanos = f"{when.microsecond * 1000:09d}".rstrip("0")
    return when.strftime("%Y-%m-%d %H:%M:%S") + (f".{nanos}" if nanos else "") + " +0000 UTC"


def node_eligible(node: dict[str, Any] | None) -> bool:
    """Upstream ``NodeEligible``: a node that is not going away (an unknown one is eligible)."""
    if node is None:
        return True
    if (node.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return not any(t.get("key") == TO_BE_DELETED_TAINT for t in (node.get("spec") or {}).get("taints") or ())


class ProxierHealthServer:
    def __init__(self, *, synced: Callable[[], bool], waiting_since: Callable[[], float | None],
                 node: Callable[[], dict[str, Any] | None], timeout: float = 60.0, clock: Callable[[], float] = time.time) -> None:
        """``waiting_since``: when the oldest change not yet synced arrived (None: none)."""
        self._synced, self._waiting_since, self._node = synced, waiting_since, node
        self.timeout, self._clock = timeout, clock
        self.last_updated = 0.0
        self.port = 0
        self._runner: web.AppRunner | None = None

    def healthy(self) -> tuple[bool, float]:
        now = self._clock()
        since = self._waiting_since()
        ok = self._synced() and (since is None or now - since < self.timeout)
        if ok:
            self.last_updated = now
        return ok, now

    def _reply(self, ok: bool, text: str) -> web.Response:
        return web.Response(status=200 if ok else 503, text=text, content_type="application/json",
                            headers={"X-Content-Type-Options": "nosniff"})

    async def _healthz(self, request: web.Request) -> web.Response:
        ok, now = self.healthy()
        eligible = node_eligible(self._node())
        return self._reply(ok and eligible, f'{{"lastUpdated": "{go_time(self.last_updated if not ok else now)}",'
                                            f'"currentTime": "{go_time(now)}", "nodeEligible": {"true" if eligible else "false"}}}')

    async def _livez(self, request: web.Request) -> web.Response:
        ok, now = self.healthy()
        return self._reply(ok, f'{{"lastUpdated": "{go_time(self.last_updated if not ok else now)}","currentTime": "{go_time(now)}"}}')

    async def start(self, address: str) -> None:
        """``address`` is ``HOST:PORT`` (port 0 picks a free one: :attr:`port`)."""
        host, _, port = address.rpartition(":")
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._livez)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host.strip("[]") or "0.0.0.0", int(port or 0))
        await site.start()
        server = site._server  # aiohttp exposes the bound socket only here
        self.port = server.sockets[0].getsockname()[1] if server is not None and getattr(server, "sockets", None) else int(port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
