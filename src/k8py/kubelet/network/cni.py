"""A CNI runtime: run a network configuration list's plugins for one container.

As the CNI spec (v1.0) and libcni do it:

- each plugin is the executable ``<type>`` found in the plugin directories,
  run with ``CNI_COMMAND``, ``CNI_CONTAINERID``, ``CNI_NETNS``,
  ``CNI_IFNAME``, ``CNI_ARGS`` and ``CNI_PATH`` in its environment and its
  network config on stdin: the plugin's own object plus the list's
  ``cniVersion`` and ``name``, ``runtimeConfig`` filled from the
  capability arguments the plugin declares, and ``prevResult``;
- ADD runs the plugins in order, each given the previous one's result;
  the last result is the attachment's and is cached, with the config list
  used, under ``<cache>/results/<network>-<container>-<ifname>``;
- DEL runs them in reverse with the cached result as ``prevResult`` and
  the *cached* config list (what was added is what gets deleted, even if
  the configuration changed since), then drops the cache entry. DEL of an
  attachment that does not exist is not an error (the spec says plugins
  must tolerate it);
- a plugin's error is its stdout JSON ``{"code", "msg", "details"}``; it
  becomes a :class:`CNIError` whose message names the plugin and what it
  said.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["CNIError", "Attachment", "CNI"]

logger = logging.getLogger(__name__)


class CNIError(RuntimeError):
    def __init__(self, plugin: str, command: str, code: int, msg: str, details: str = "") -> None:
        self.plugin, self.command, self.code, self.msg, self.details = plugin, command, code, msg, details
        super().__init__(f"plugin type={plugin!r} failed ({command}): {msg}" + (f": {details}" if details else ""))


@dataclass(frozen=True)
class Attachment:
    container_id: str
    netns: str
    ifname: str = "eth0"
    #: K8S_POD_* and the like, joined into CNI_ARGS
    args: Mapping[str, str] = field(default_factory=dict)
    #: e.g. {"portMappings": [...]}: given to plugins that declare the capability
    capabilities: Mapping[str, Any] = field(default_factory=dict)


class CNI:
    def __init__(self, plugin_dirs: Sequence[str], cache_dir: str) -> None:
        self.plugin_dirs = list(plugin_dirs)
        self.cache_dir = cache_dir
        os.makedirs(os.path.join(cache_dir, "results"), exist_ok=True)

    def _find(self, plugin: str) -> str:
        for d in self.plugin_dirs:
            path = os.path.join(d, plugin)
            if os.access(path, os.X_OK):
                return path
        raise CNIError(plugin, "find", 0, f"failed to find plugin {plugin!r} in path {self.plugin_dirs}",
                       "install Debian's containernetworking-plugins (apt-get install containernetworking-plugins)")

    def _cache_path(self, network: str, att: Attachment) -> str:
        return os.path.join(self.cache_dir, "results", f"{network}-{att.container_id}-{att.ifname}")

    def cached(self, network: str, att: Attachment) -> dict[str, Any] | None:
        try:
            with open(self._cache_path(network, att), encoding="utf-8") as f:
                return dict(json.load(f))
        except (OSError, ValueError):
            return None

    def cached_attachments(self) -> list[dict[str, Any]]:
        out = []
        base = os.path.join(self.cache_dir, "results")
        for name in sorted(os.listdir(base)):
            try:
                with open(os.path.join(base, name), encoding="utf-8") as f:
                    out.append(json.load(f))
            except (OSError, ValueError):
                continue
        return out

    async def _exec(self, plugin: Mapping[str, Any], conflist: Mapping[str, Any], command: str, att: Attachment,
                    prev: Mapping[str, Any] | None) -> dict[str, Any]:
        kind = str(plugin["type"])
        conf: dict[str, Any] = {**plugin, "cniVersion": conflist["cniVersion"], "name": conflist["name"]}
        runtime_config = {k: v for k, v in att.capabilities.items() if (plugin.get("capabilities") or {}).get(k)}
        if runtime_config:
            conf["runtimeConfig"] = runtime_config
        if prev is not None:
            conf["prevResult"] = prev
        env = {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "CNI_COMMAND": command, "CNI_CONTAINERID": att.container_id, "CNI_NETNS": att.netns,
            "CNI_IFNAME": att.ifname, "CNI_PATH": os.pathsep.join(self.plugin_dirs),
            "CNI_ARGS": ";".join(["IgnoreUnknown=1", *(f"{k}={v}" for k, v in att.args.items())]),
        }
        proc = await asyncio.create_subprocess_exec(self._find(kind), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE, env=env)
        out, err = await proc.communicate(json.dumps(conf).encode())
        if proc.returncode != 0:
            try:
                doc = json.loads(out or b"{}")
            except ValueError:
                doc = {}
            raise CNIError(kind, command, int(doc.get("code") or proc.returncode or 0),
                           str(doc.get("msg") or err.decode(errors="replace").strip() or f"exit status {proc.returncode}"),
                           str(doc.get("details") or ""))
        if command != "ADD" or not out.strip():
            return dict(prev or {})
        return dict(json.loads(out))

    async def add(self, conflist: Mapping[str, Any], att: Attachment) -> dict[str, Any]:
        """ADD every plugin; returns (and caches) the final result."""
        prev: dict[str, Any] | None = None
        done: list[Mapping[str, Any]] = []
        try:
            for plugin in conflist["plugins"]:
                prev = await self._exec(plugin, conflist, "ADD", att, prev)
                done.append(plugin)
        except BaseException:
            # undo what was added so a failed ADD leaves no lease, no veth
            partial = {**conflist, "plugins": done}
            try:
                await asyncio.shield(self._delete(partial, att, prev))
            except CNIError as err:
                logger.warning("cleanup after a failed CNI ADD failed", extra={"error": str(err)})
            raise
        result = prev or {}
        cache = {"kind": "cniCacheV1", "containerId": att.container_id, "ifName": att.ifname, "networkName": conflist["name"],
                 "netns": att.netns, "cniArgs": dict(att.args), "capabilityArgs": dict(att.capabilities), "config": dict(conflist),
                 "result": result}
        path = self._cache_path(str(conflist["name"]), att)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(cache, f)
        os.replace(path + ".tmp", path)
        return result

    async def _delete(self, conflist: Mapping[str, Any], att: Attachment, prev: Mapping[str, Any] | None) -> None:
        first: CNIError | None = None
        for plugin in reversed(list(conflist["plugins"])):
            try:
                await self._exec(plugin, conflist, "DEL", att, prev)
            except CNIError as err:  # go on: the other plugins' state must go too
                first = first or err
        if first is not None:
            raise first

    async def delete(self, conflist: Mapping[str, Any], att: Attachment) -> None:
        """DEL with the cached config and result when there are some (see the module docstring)."""
        cache = self.cached(str(conflist["name"]), att)
        if cache is not None:
            conflist = cache["config"]
            att = Attachment(att.container_id, att.netns, att.ifname, cache.get("cniArgs") or att.args,
                             cache.get("capabilityArgs") or att.capabilities)
        await self._delete(conflist, att, cache["result"] if cache else None)
        try:
            os.unlink(self._cache_path(str(conflist["name"]), att))
        except FileNotFoundError:
            pass
