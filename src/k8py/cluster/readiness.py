"""Is it up yet? The questions ``k8py up`` asks over HTTP while it starts.

Plain HTTP GETs (the supervisor polls them; a health check may wait 30 s
for its answer: a simulated kubelet running 5,000 nodes on a busy machine
answers ``/healthz`` in tens of seconds, and is up all the same): a
component's ``/healthz`` (or the API server's ``/readyz``), and the names of
the Nodes whose ``Ready`` condition is ``True``. Errors are answers ("not
yet"), never exceptions: the caller polls until its own deadline.
"""

from __future__ import annotations

import aiohttp
import orjson

__all__ = ["http_ok", "ready_nodes", "node_is_ready"]

_TIMEOUT = aiohttp.ClientTimeout(total=30)


async def http_ok(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url, timeout=_TIMEOUT) as response:
            await response.read()
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError, OSError):
        return False


def node_is_ready(node: dict) -> bool:  # type: ignore[type-arg]
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or ())


#: the Nodes as ``kubectl get nodes`` has them: a Table of names and statuses, without the
#: objects (at 5,000 nodes some 0.5 MB instead of 20 MB to encode and parse at every poll)
_TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"}


async def ready_nodes(session: aiohttp.ClientSession, api_url: str) -> list[str] | None:
    """Names of the Ready nodes, or None when the API server does not answer."""
    try:
        async with session.get(f"{api_url}/api/v1/nodes", params={"includeObject": "None"}, headers=_TABLE,
                               timeout=_TIMEOUT) as response:
            if response.status != 200:
                return None
            doc = orjson.loads(await response.read())
    except (aiohttp.ClientError, TimeoutError, OSError, orjson.JSONDecodeError):
        return None
    if doc.get("kind") != "Table":  # a server without tables: the Nodes themselves
        return sorted(n["metadata"]["name"] for n in doc.get("items") or [] if node_is_ready(n))
    columns = [c.get("name", "").lower() for c in doc.get("columnDefinitions") or []]
    if "name" not in columns or "status" not in columns:
        return None
    name, status = columns.index("name"), columns.index("status")
    return sorted(str(row["cells"][name]) for row in doc.get("rows") or []
                  if str(row["cells"][status]).split(",")[0] == "Ready")
