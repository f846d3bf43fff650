"""Conntrack cleanup for UDP and SCTP Services, as kube-proxy's
``pkg/proxy/conntrack`` does after each sync.

Why: DNAT is decided once per flow; netfilter then keeps a conntrack entry
that sends every later packet of the flow to the same endpoint. A TCP flow
to a dead pod fails and the client reconnects, but a UDP (or SCTP) client
that keeps sending from the same port keeps its entry alive forever and
talks to a pod that is gone. So, once the new rules are in:

- for every endpoint that a UDP/SCTP service port no longer uses, the flows
  DNATed to it are deleted — those whose original destination is one of the
  port's cluster, external or load-balancer IPs at the Service port, and
  those to its node port — so the client's next packet is DNATed afresh;
- for a service port that had no endpoint and now has one, every flow to
  its addresses (and node port) is deleted: while it had none, packets were
  rejected or dropped, and an entry left from then must not shadow the new rules.

:func:`stale_flows` is pure (old table, new table → filters);
:func:`flush` runs ``conntrack -D`` (Debian's ``conntrack``) per filter. A
filter that matches nothing is not an error. Without the ``conntrack``
command the cleanup is skipped with one warning (the rules still apply).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from dataclasses import dataclass
from typing import Iterable, Mapping

from k8py.proxy.service_table import ServicePort, ServicePortKey

__all__ = ["Flow", "stale_flows", "flush", "PROTOCOLS"]

logger = logging.getLogger(__name__)

PROTOCOLS = ("UDP", "SCTP")


@dataclass(frozen=True, order=True)
class Flow:
    """A conntrack filter: the flows of ``protocol`` whose original destination
    is ``dst``:``dport`` (either may be unset) and, when set, whose reply comes
    from ``reply_src``:``reply_sport`` (the endpoint the flow was DNATed to)."""

    protocol: str
    dst: str = ""
    dport: int = 0
    reply_src: str = ""
    reply_sport: int = 0

    def args(self) -> list[str]:
        out = ["-D", "-p", self.protocol.lower()]
        if self.dst:
            out += ["--orig-dst", self.dst]
        if self.dport:
            out += ["--orig-port-dst", str(self.dport)]
        if self.reply_src:
            out += ["--reply-src", self.reply_src]
        if self.reply_sport:
            out += ["--reply-port-src", str(self.reply_sport)]
        return out


def _used(sp: ServicePort | None) -> set[tuple[str, int]]:
    if sp is None:
        return set()
    return {ep.address for ep in sp.cluster_endpoints + sp.external_endpoints}


def _destinations(sp: ServicePort) -> list[tuple[str, int]]:
    """Where clients reach the port: each service address at the port, and the node port on any address."""
    out = [(ip, sp.port) for ip in sp.cluster_ips + sp.external_ips + sp.load_balancer_ips]
    if sp.node_port:
        out.append(("", sp.node_port))
    return out


def stale_flows(old: Mapping[ServicePortKey, ServicePort], new: Mapping[ServicePortKey, ServicePort]) -> list[Flow]:
    """The conntrack filters to delete after the rules moved from ``old`` to ``new``."""
    flows: set[Flow] = set()
    for key, before in old.items():
        if before.protocol not in PROTOCOLS:
            continue
        after = new.get(key)
        gone = _used(before) - _used(after)
        for ip, port in gone:
            for dst, dport in _destinations(before):
                flows.add(Flow(before.protocol, dst, dport, ip, port))
    for key, after in new.items():
        if after.protocol in PROTOCOLS and _used(after) and not _used(old.get(key)):
            for dst, dport in _destinations(after):
                flows.add(Flow(after.protocol, dst, dport))
    return sorted(flows)


_warned = False


async def flush(flows: Iterable[Flow], *, binary: str = "conntrack") -> int:
    """Delete the flows each filter matches; returns how many commands ran."""
    global _warned
    flows = list(flows)
    if not flows:
        return 0
    path = shutil.which(binary)
    if path is None:
        if not _warned:
            logger.warning("the conntrack command is missing: stale UDP/SCTP flows are not flushed "
                           "(install Debian's conntrack)")
            _warned = True
        return 0
    ran = 0
    for flow in flows:
        proc = await asyncio.create_subprocess_exec(path, *flow.args(), stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        ran += 1
        text = err.decode(errors="replace").strip()
        if proc.returncode != 0 and "0 flow entries have been deleted" not in text:
            logger.warning("conntrack cleanup failed", extra={"filter": " ".join(flow.args()), "error": text})
        else:
            logger.debug("conntrack flows deleted", extra={"filter": " ".join(flow.args()), "result": text})
    return ran

