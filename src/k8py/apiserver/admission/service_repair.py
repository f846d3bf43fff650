"""The repair loops the API server runs over Service allocations (upstream's
``ipallocator`` and ``portallocator`` repair controllers).

Allocation makes two writes: the claim (:mod:`.range_claims`), then the
Service. A crash between them, a store restored from an older backup, or a
bug leaves the two out of step, so every ``interval`` seconds (upstream: 3
minutes, fixed; here ``--service-repair-interval``) and once at start,
:meth:`ServiceRepair.run_once` rebuilds what the claims should be from the
Services and compares:

- a Service whose cluster IP or node port has no claim gets one made for it
  (Warning Events ``ClusterIPNotAllocated`` "Cluster IP [IPv4]:A is not
  allocated; repairing" / ``PortNotAllocated`` "Port N is not allocated;
  repairing", and upstream's log line);
- a claim whose owner is gone while a Service uses the item is handed to
  that Service (so deleting it frees the item);
- an item two Services use (``ClusterIPAlreadyAllocated`` /
  ``PortAlreadyAllocated``) or one outside the configured range
  (``ClusterIPOutOfRange`` / ``PortOutOfRange``) gets a Warning Event on
  each Service but the one that keeps it: only recreating the Service fixes it;
- a claim no Service uses is a leak: it is flagged first ("may have leaked:
  flagging for later clean up") and freed when it is still a leak after
  ``leak_passes`` passes (upstream: 3) *and* older than ``leak_grace``
  seconds, so a claim whose Service is still on its way into the store is
  never freed under it.

Invariants: the claims are read before the Services (a claim made after
that read is not judged); every write is guarded by the revision read
(:meth:`.RangeClaims.mark` / ``take_over`` / ``free``), so several API
servers repairing one store at once agree. Events are events.k8s.io/v1
(reportingController ``ipallocator-repair-controller`` /
``portallocator-repair-controller``) on the Service, a repeat counted in its
``series``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

import orjson

from k8py.api.errors import StatusError
from k8py.apiserver.admission.range_claims import Claim, RangeClaims
from k8py.apiserver.admission.service_ips import ServiceAllocator
from k8py.apiserver.registry import Registry
from k8py.apiserver.store.object_store import ObjectStore

__all__ = ["ServiceRepair", "RepairReport"]

log = logging.getLogger(__name__)

IP_CONTROLLER = "ipallocator-repair-controller"
PORT_CONTROLLER = "portallocator-repair-controller"


@dataclass
class RepairReport:
    """What one pass did (for tests and logs)."""

    remarked: list[str] = field(default_factory=list)
    taken_over: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    freed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


@dataclass
class _Use:
    service: dict[str, Any]
    owner: dict[str, str]


def _micro_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _family(ip: str) -> str:
    return "IPv6" if ":" in ip else "IPv4"


class ServiceRepair:
    def __init__(self, registry: Registry, store: ObjectStore, allocator: ServiceAllocator, *,
                 interval: float = 180.0, leak_grace: float = 60.0, leak_passes: int = 3,
                 clock: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.store = store
        self.allocator = allocator
        self.interval = interval
        self.leak_grace = leak_grace
        self.leak_passes = max(1, leak_passes)
        self.clock = clock
        self.instance = os.uname().nodename
        #: (prefix, item) -> (passes seen leaked, the claim's revision then)
        self._leaks: dict[tuple[str, str], tuple[int, int]] = {}
        #: (service uid, reason, note) -> event name, for series of repeats
        self._events: dict[tuple[str, str, str], str] = {}

    async def run(self) -> None:
        """A pass every ``interval`` seconds until cancelled (0: never)."""
        if self.interval <= 0:
            return
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next pass tries again; a repair loop must not die
                log.exception("service allocation repair failed; retrying at the next pass")

    async def run_once(self) -> RepairReport:
        report = RepairReport()
        ip_claims = await self.allocator.ips.claims()
        port_claims = await self.allocator.ports.claims()
        services = await self._services()
        live = {(s.get("metadata") or {}).get("uid", "") for s in services}
        ip_uses: dict[str, list[_Use]] = {}
        port_uses: dict[str, list[_Use]] = {}
        for service in services:
            meta, spec = service.get("metadata") or {}, service.get("spec") or {}
            owner = {"namespace": meta.get("namespace", ""), "name": meta.get("name", ""), "uid": meta.get("uid", "")}
            for ip in {ip for ip in (spec.get("clusterIPs") or [spec.get("clusterIP")]) if ip and ip != "None"}:
                ip_uses.setdefault(ip, []).append(_Use(service, owner))
            ports = {str(p["nodePort"]) for p in spec.get("ports") or [] if isinstance(p, dict) and p.get("nodePort")}
            if spec.get("healthCheckNodePort"):
                ports.add(str(spec["healthCheckNodePort"]))
            for port in ports:
                port_uses.setdefault(port, []).append(_Use(service, owner))
        await self._repair(self.allocator.ips, ip_claims, ip_uses, live, report, self._ip_in_range, _IP_TEXT)
        await self._repair(self.allocator.ports, port_claims, port_uses, live, report, self._port_in_range, _PORT_TEXT)
        return report

    async def _services(self) -> list[dict[str, Any]]:
        definition = self.registry.get("", "v1", "services")
        assert definition is not None
        result = await self.store.storage.list(definition.key_prefix)
        out = []
        for kv in result.kvs:
            obj = orjson.loads(kv.value)
            obj.setdefault("metadata", {})["resourceVersion"] = str(kv.mod_revision)
            out.append(obj)
        return out

    def _ip_in_range(self, ip: str) -> bool:
        network = self.allocator.network
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return address in network and address not in (network.network_address, network.broadcast_address)

    def _port_in_range(self, port: str) -> bool:
        low, high = self.allocator.node_ports
        return port.isdigit() and low <= int(port) <= high

    async def _repair(self, claims_of: RangeClaims, claims: dict[str, Claim], uses: dict[str, list[_Use]], live: set[str],
                      report: RepairReport, in_range: Callable[[str], bool], text: "_Texts") -> None:
        for item, users in sorted(uses.items()):
            if not in_range(item):
                for use in users:
                    await self._event(use, text, "OutOfRange", text.out_of_range(item, self._range_text(text)))
                    log.warning(text.log_out_of_range(item, use.owner), extra={"item": item})
                    report.conflicts.append(item)
                continue
            claim = claims.get(item)
            keeper = self._keeper(users, claim)
            for use in users:
                if use is not keeper:
                    await self._event(use, text, "AlreadyAllocated", text.duplicate(item))
                    log.warning(text.log_duplicate(item, use.owner), extra={"item": item})
                    report.conflicts.append(item)
            self._leaks.pop((claims_of.prefix, item), None)  # used, so not leaked
            if claim is None:
                found = await claims_of.mark(item, keeper.owner)
                if found is None:
                    await self._event(keeper, text, "NotAllocated", text.not_allocated(item))
                    log.warning(text.log_not_allocated(item, keeper.owner), extra={"item": item})
                    report.remarked.append(item)
                    continue
                claim = found  # made since the claims were read: judged as it is now
            if claim.uid != keeper.owner["uid"] and claim.uid not in live:
                if await claims_of.take_over(item, claim, keeper.owner):
                    log.info("claim of a deleted Service handed to the Service using it",
                             extra={"item": item, "namespace": keeper.owner["namespace"], "name": keeper.owner["name"]})
                    report.taken_over.append(item)
        now = self.clock()
        for item, claim in sorted(claims.items()):
            if item in uses:
                continue
            key = (claims_of.prefix, item)
            seen, revision = self._leaks.get(key, (0, claim.revision))
            seen = seen + 1 if revision == claim.revision else 1
            if seen >= self.leak_passes and now - claim.claimed_at >= self.leak_grace:
                self._leaks.pop(key, None)
                if await claims_of.free(item, claim):
                    log.warning(text.log_leak_freed(item), extra={"item": item})
                    report.freed.append(item)
                continue
            self._leaks[key] = (seen, claim.revision)
            if seen == 1:
                log.info(text.log_leak_flagged(item), extra={"item": item})
            report.flagged.append(item)
        for key in [k for k in self._leaks if k[0] == claims_of.prefix and k[1] not in claims]:
            del self._leaks[key]  # released by someone else meanwhile

    def _range_text(self, text: "_Texts") -> str:
        if text is _IP_TEXT:
            return str(self.allocator.network)
        low, high = self.allocator.node_ports
        return f"{low}-{high}"

    @staticmethod
    def _keeper(users: list[_Use], claim: Claim | None) -> _Use:
        """The Service that keeps an item several use: the claim's owner, else the oldest."""
        if claim is not None:
            for use in users:
                if use.owner["uid"] == claim.uid:
                    return use
        return min(users, key=lambda u: ((u.service.get("metadata") or {}).get("creationTimestamp") or "",
                                         u.owner["namespace"], u.owner["name"]))

    async def _event(self, use: _Use, text: "_Texts", suffix: str, note: str) -> None:
        definition = self.registry.get("events.k8s.io", "v1", "events")
        if definition is None:
            return
        reason = text.reason_prefix + suffix
        namespace = use.owner["namespace"] or "default"
        now = _micro_time(self.clock())
        known = self._events.get((use.owner["uid"], reason, note))
        try:
            if known is not None:
                def count(event: dict[str, Any]) -> dict[str, Any]:
                    series = event.get("series") or {"count": 1}
                    event["series"] = {"count": int(series.get("count") or 1) + 1, "lastObservedTime": now}
                    return event

                await self.store.guaranteed_update(definition, namespace, known, count)
                return
            name = f"{use.owner['name']}.{secrets.token_hex(8)}"
            meta = use.service.get("metadata") or {}
            event = {
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "eventTime": now, "reportingController": text.controller,
                "reportingInstance": f"{text.controller}-{self.instance}", "action": text.action,
                "reason": reason, "note": note, "type": "Warning",
                "regarding": {"kind": "Service", "apiVersion": "v1", "namespace": namespace, "name": use.owner["name"],
                              "uid": use.owner["uid"], "resourceVersion": meta.get("resourceVersion", "")},
            }
            await self.store.create(definition, namespace, event)
            self._events[(use.owner["uid"], reason, note)] = name
        except StatusError as err:  # an Event is best effort, the repair is not
            if known is not None:
                self._events.pop((use.owner["uid"], reason, note), None)
            log.warning("could not record the repair Event", extra={"reason": reason, "error": err.message})


@dataclass(frozen=True)
class _Texts:
    """Upstream's Event reasons, notes and log lines for one kind of item."""

    controller: str
    action: str
    reason_prefix: str
    what: str  # in log lines: "cluster IP" / "node port"

    def shown(self, item: str) -> str:
        return f"[{_family(item)}]:{item}" if self.reason_prefix == "ClusterIP" else item

    def not_allocated(self, item: str) -> str:
        return f"{self._subject()} {self.shown(item)} is not allocated; repairing"

    def duplicate(self, item: str) -> str:
        return f"{self._subject()} {self.shown(item)} was assigned to multiple services; please recreate service"

    def out_of_range(self, item: str, valid: str) -> str:
        where = f"the configured Service CIDR {valid}" if self.reason_prefix == "ClusterIP" else f"the port range {valid}"
        return f"{self._subject()} {self.shown(item)} is not within {where}; please recreate service"

    def _subject(self) -> str:
        return "Cluster IP" if self.reason_prefix == "ClusterIP" else "Port"

    def log_not_allocated(self, item: str, owner: dict[str, str]) -> str:
        return f"the {self.what} {self.shown(item)} for service {owner['name']}/{owner['namespace']} is not allocated; repairing"

    def log_duplicate(self, item: str, owner: dict[str, str]) -> str:
        return f"the {self.what} {self.shown(item)} for service {owner['name']}/{owner['namespace']} was assigned to multiple services; please recreate"

    def log_out_of_range(self, item: str, owner: dict[str, str]) -> str:
        return f"the {self.what} {self.shown(item)} for service {owner['name']}/{owner['namespace']} is not within the range; please recreate"

    def log_leak_flagged(self, item: str) -> str:
        return f"the {self.what} {item} may have leaked: flagging for later clean up"

    def log_leak_freed(self, item: str) -> str:
        return f"the {self.what} {item} appears to have leaked: cleaning up"


_IP_TEXT = _Texts(IP_CONTROLLER, "ClusterIPAllocation", "ClusterIP", "cluster IP")
_PORT_TEXT = _Texts(PORT_CONTROLLER, "PortAllocation", "Port", "node port")
