"""NftablesBackend: the proxier's table applied as one nftables transaction.

``sync`` renders the whole table (:func:`~k8py.proxy.nftables.ruleset.render`)
and pipes it to ``nft -f -``; nft applies a file atomically, so a failed
sync changes nothing and is raised (the proxier tries it again after a
backoff). After each applied sync the UDP/SCTP flows the change left stale
are flushed from conntrack (:mod:`.conntrack`). ``close`` deletes the table:
a stopped proxy leaves no rule behind. Needs root (CAP_NET_ADMIN) and the ``nft`` command; :func:`available`
says why not.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from typing import Mapping, Sequence

from k8py.proxy.nftables import conntrack, ruleset
from k8py.proxy.service_table import ServicePort, ServicePortKey

__all__ = ["NftablesBackend", "NftablesError", "available"]

logger = logging.getLogger(__name__)


class NftablesError(RuntimeError):
    pass


def available() -> str | None:
    if os.geteuid() != 0:
        return "the nftables proxy needs root (CAP_NET_ADMIN)"
    if not shutil.which("nft"):
        return "the nft command is missing: install Debian's nftables (apt-get install nftables)"
    return None


async def nft(text: str) -> None:
    proc = await asyncio.create_subprocess_exec("nft", "-f", "-", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate(text.encode())
    if proc.returncode != 0:
        raise NftablesError(f"nft -f failed: {err.decode(errors='replace').strip()}")


class NftablesBackend:
    def __init__(self, node_name: str, table: str = "") -> None:
        self.table = table or ruleset.table_name(node_name)
        self.syncs = 0
        self._applied: Mapping[ServicePortKey, ServicePort] = {}

    async def sync(self, table: Mapping[ServicePortKey, ServicePort], node_addresses: Sequence[str]) -> None:
        await nft(ruleset.render(self.table, table, node_addresses))
        before, self._applied = self._applied, dict(table)
        await conntrack.flush(conntrack.stale_flows(before, table))
        self.syncs += 1
        logger.info("nftables rules synced", extra={"table": self.table, "service_ports": len(table)})

    async def close(self) -> None:
        try:
            await asyncio.shield(nft(ruleset.delete(self.table)))
        except NftablesError as err:
            logger.warning("could not delete the proxy's nftables table", extra={"table": self.table, "error": str(err)})
