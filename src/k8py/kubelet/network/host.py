"""The host-side pieces of a node's pod network that CNI does not make.

All through the ``ip`` command (iproute2, on every Linux host), run as
asyncio subprocesses so the kubelet's loop never blocks:

- named network namespaces (``ip netns add|del``; they live in
  ``/run/netns``, where CNI plugins, ``nsenter --net`` and ``ip netns exec``
  find them);
- the node's bridge, made before the first pod so the Service range can be
  routed onto it (the bridge plugin then adopts it and puts the gateway
  address on it). The route means a packet for a Service IP that has no
  rule (yet, or any more) goes to the bridge and dies there, never out of
  the machine's uplink; ``route_localnet`` is set on this bridge only, so
  node ports on 127.0.0.1 can be DNATed to pods;
- deletion that waits: a link is gone when ``ip link show`` says so (veths
  go asynchronously when only their namespace is removed).

Nothing here touches a name it was not given; callers pass only names from
:class:`~k8py.kubelet.network.names.NetworkNames`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

__all__ = ["HostError", "ip", "netns_add", "netns_delete", "netns_list", "netns_path", "ensure_bridge", "delete_link",
           "link_exists", "route_onto"]

logger = logging.getLogger(__name__)

NETNS_DIR = "/run/netns"


class HostError(RuntimeError):
    pass


async def ip(*args: str, check: bool = True) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec("ip", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if check and proc.returncode != 0:
        raise HostError(f"ip {' '.join(args)}: {err.decode(errors='replace').strip() or f'exit status {proc.returncode}'}")
    return proc.returncode or 0, out.decode(errors="replace")


def netns_path(name: str) -> str:
    return os.path.join(NETNS_DIR, name)


def netns_list() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


async def netns_add(name: str) -> str:
    if name not in netns_list():
        await ip("netns", "add", name)
    return netns_path(name)


async def netns_delete(name: str) -> None:
    if name in netns_list():
        await ip("netns", "delete", name, check=False)


async def link_exists(name: str) -> bool:
    rc, _ = await ip("link", "show", "dev", name, check=False)
    return rc == 0


async def ensure_bridge(name: str, alias: str) -> None:
    if not await link_exists(name):
        rc, _ = await ip("link", "add", "name", name, "type", "bridge", check=False)
        if rc != 0 and not await link_exists(name):  # lost a race with the bridge plugin: fine
            raise HostError(f"cannot create the pod bridge {name}")
    await ip("link", "set", "dev", name, "alias", alias[:120])
    await ip("link", "set", "dev", name, "up")
    try:
        with open(f"/proc/sys/net/ipv4/conf/{name}/route_localnet", "w", encoding="ascii") as f:
            f.write("1")
    except OSError as err:
        logger.info("route_localnet not set on the bridge: node ports on 127.0.0.1 will not reach pods", extra={"error": str(err)})


async def route_onto(cidr: str, bridge: str) -> None:
    await ip("route", "replace", cidr, "dev", bridge, "proto", "static")


async def delete_link(name: str, timeout: float = 10.0) -> None:
    """Delete ``name`` and return once it is gone (or raise after ``timeout``)."""
    await ip("link", "delete", "dev", name, check=False)
    deadline = time.monotonic() + timeout
    pause = 0.005
    while await link_exists(name):
        if time.monotonic() > deadline:
            raise HostError(f"link {name} still exists {timeout:.0f}s after its deletion")
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.2)


# -- machine-wide leftovers of the plugins, restored when the last k8py bridge goes ---------------

_FORWARD = "/proc/sys/net/ipv4/ip_forward"
_SAVED_FORWARD = "/run/k8py-pod-network-ip_forward"
_PORTMAP_CHAINS = {"CNI-HOSTPORT-SETMARK", "CNI-HOSTPORT-MASQ", "CNI-HOSTPORT-DNAT"}
_BASE_CHAINS = {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}


def remember_ip_forward() -> None:
    """Note ``ip_forward`` before the bridge plugin (``isGateway``) turns it on."""
    try:
        with open(_FORWARD, encoding="ascii") as f:
            value = f.read().strip()
    except OSError:
        return
    _note_machine_value(value)


def _note_machine_value(value: str) -> None:
    try:
        fd = os.open(_SAVED_FORWARD, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return  # another k8py node noted it first: its value is the machine's
    with os.fdopen(fd, "w") as f:
        f.write(value)


async def k8py_bridges() -> list[str]:
    _, out = await ip("-o", "link", "show", "type", "bridge", check=False)
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()
            if line.count(":") >= 2 and line.split(":")[1].strip().startswith("k8pybr-")]


async def _nft(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec("nft", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace")


async def _drop_portmap_table(family: str) -> None:
    """Delete ``<family> nat`` if it holds nothing but portmap's idle, shared chains."""
    import json

    rc, out = await _nft("-j", "list", "table", family, "nat")
    if rc != 0:
        return
    chains: dict[str, list[dict[str, object]]] = {}
    for item in json.loads(out).get("nftables", []):
        if "chain" in item:
            chains.setdefault(item["chain"]["name"], [])
        elif "rule" in item:
            chains.setdefault(item["rule"]["chain"], []).append(item["rule"])
    for name, rules in chains.items():
        if name in _PORTMAP_CHAINS:
            if name == "CNI-HOSTPORT-DNAT" and rules:
                return  # a pod somewhere still has a hostPort
            continue
        if name not in _BASE_CHAINS:
            return  # someone else's chain
        for rule in rules:
            if not any("jump" in e and e["jump"]["target"] in _PORTMAP_CHAINS for e in rule.get("expr", []) if isinstance(e, dict)):
                return  # someone else's rule
    await _nft("delete", "table", family, "nat")


async def restore_machine_settings() -> None:
    """When no k8py bridge is left: put ``ip_forward`` back, drop portmap's idle nat tables."""
    if await k8py_bridges():
        return
    for family in ("ip", "ip6"):
        await _drop_portmap_table(family)
    try:
        with open(_SAVED_FORWARD, encoding="ascii") as f:
            value = f.read().strip()
        with open(_FORWARD, "w", encoding="ascii") as f:
            f.write(value)
        os.unlink(_SAVED_FORWARD)
    except OSError:
        return
    if value != "1" and await k8py_bridges():
        # another cluster's node made its bridge between the check above and the write:
        # it needs forwarding (its remember_ip_forward saw the old note and kept it), so
        # forwarding goes back on and the machine's value is noted again for the last one out
        with open(_FORWARD, "w", encoding="ascii") as f:
            f.write("1")
        _note_machine_value(value)
