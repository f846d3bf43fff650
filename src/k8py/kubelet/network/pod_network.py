"""CNIPodNetwork: a network namespace per pod sandbox, wired by the CNI plugins.

The runtime calls it at four points:

- :meth:`CNIPodNetwork.set_cidr` when the node's pod CIDR is known: the
  node's bridge is made (named for k8py and the node) and the Service range
  routed onto it;
- :meth:`CNIPodNetwork.setup` in RunPodSandbox: ``ip netns add`` a
  namespace named for the sandbox, then CNI ADD of two networks, as
  containerd's CRI plugin does: ``loopback`` (``lo``), then the pod network
  (``bridge`` with ``host-local`` IPAM over the pod CIDR, and ``portmap``
  when the pod asks for hostPorts) on ``eth0``. The pod IP is the result's
  first address. A failure undoes both;
- :meth:`CNIPodNetwork.wrap` when a container starts: its argv is prefixed
  with ``nsenter --net=/run/netns/<name>`` so the process (and bwrap, and
  everything they fork) lives in the pod's namespace;
- :meth:`CNIPodNetwork.teardown` in StopPodSandbox: CNI DEL (reverse
  order, the cached config) then the namespace goes. Idempotent.

:meth:`CNIPodNetwork.cleanup` removes everything the node's names cover
(namespaces, cached attachments, leases, the bridge and its routes) — for
``k8py down``, tests, and a kubelet stopping with no pod left.

Safety on a shared machine: ``ipMasq`` is off (pod traffic never gets NATed
out of the uplink), addresses are only ever put on this node's bridge and
inside this node's namespaces, and only names from
:class:`~k8py.kubelet.network.names.NetworkNames` are ever deleted.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import shutil
from typing import Any, Sequence

from k8py.kubelet.network import host
from k8py.kubelet.network.cni import CNI, Attachment, CNIError
from k8py.kubelet.network.names import NetworkNames
from k8py.kubelet.runtime.protocols import PodSandboxConfig, RuntimeErrorStatus

__all__ = ["CNIPodNetwork", "CNI_VERSION", "DEFAULT_PLUGIN_DIRS"]

logger = logging.getLogger(__name__)

CNI_VERSION = "1.0.0"
DEFAULT_PLUGIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")


class CNIPodNetwork:
    def __init__(self, names: NetworkNames, state_dir: str, *, plugin_dirs: Sequence[str] = DEFAULT_PLUGIN_DIRS,
                 service_cidr: str = "") -> None:
        self.names = names
        self.state_dir = os.path.join(state_dir, "cni")
        self.cni = CNI(plugin_dirs, self.state_dir)
        self.service_cidr = service_cidr
        self.pod_cidr = ""
        self._lock = asyncio.Lock()

    @staticmethod
    def available(plugin_dirs: Sequence[str] = DEFAULT_PLUGIN_DIRS) -> str | None:
        """Why this mode cannot run here, or None."""
        if os.geteuid() != 0:
            return "--pod-network=cni needs root (network namespaces, a bridge)"
        for plugin in ("bridge", "host-local", "loopback", "portmap"):
            if not any(os.access(os.path.join(d, plugin), os.X_OK) for d in plugin_dirs):
                return (f"the CNI plugin {plugin!r} is not in {list(plugin_dirs)}: "
                        "install Debian's containernetworking-plugins (apt-get install containernetworking-plugins)")
        if not shutil.which("ip") or not shutil.which("nsenter"):
            return "--pod-network=cni needs the ip (iproute2) and nsenter (util-linux) commands"
        return None

    def describe(self) -> str:
        return f"own network namespace per pod (CNI bridge {self.names.bridge}, pod CIDR {self.pod_cidr or 'not yet known'})"

    # -- configuration --------------------------------------------------------------------

    async def set_cidr(self, pod_cidr: str) -> None:
        net = ipaddress.ip_network(pod_cidr, strict=False)
        if net.is_loopback:
            raise RuntimeErrorStatus("NetworkNotReady", f"pod CIDR {net} is a loopback range, which cannot live on a bridge: "
                                     "give the cluster a --cluster-cidr such as 10.244.0.0/16 with --pod-network=cni")
        self.pod_cidr = str(net)
        host.remember_ip_forward()
        await host.ensure_bridge(self.names.bridge, f"k8py pod network of node {self.names.node} ({self.names.root_dir})")
        if self.service_cidr:
            await host.route_onto(self.service_cidr, self.names.bridge)

    def _pod_network(self, port_mappings: bool) -> dict[str, Any]:
        plugins: list[dict[str, Any]] = [{
            "type": "bridge", "bridge": self.names.bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": self.pod_cidr}]], "routes": [{"dst": "0.0.0.0/0"}],
                     "dataDir": os.path.join(self.state_dir, "networks")},
        }]
        if port_mappings:
            plugins.append({"type": "portmap", "capabilities": {"portMappings": True}, "snat": True})
        return {"cniVersion": CNI_VERSION, "name": self.names.network, "plugins": plugins}

    def _loopback(self) -> dict[str, Any]:
        return {"cniVersion": CNI_VERSION, "name": f"{self.names.network}-lo", "plugins": [{"type": "loopback"}]}

    @staticmethod
    def _mappings(config: PodSandboxConfig) -> list[dict[str, Any]]:
        out = []
        for protocol, container_port, host_port, host_ip in config.port_mappings:
            if host_port:
                m: dict[str, Any] = {"hostPort": host_port, "containerPort": container_port, "protocol": protocol.lower()}
                if host_ip:
                    m["hostIP"] = host_ip
                out.append(m)
        return out

    # -- sandboxes ------------------------------------------------------------------------

    async def setup(self, sandbox_id: str, config: PodSandboxConfig) -> tuple[str, str]:
        """(pod IP, netns name) for a new sandbox."""
        if not self.pod_cidr:
            raise RuntimeErrorStatus("NetworkNotReady", "network is not ready: the runtime has no pod CIDR yet")
        name = self.names.netns(sandbox_id)
        args = {"K8S_POD_NAMESPACE": config.namespace, "K8S_POD_NAME": config.name, "K8S_POD_INFRA_CONTAINER_ID": sandbox_id,
                "K8S_POD_UID": config.uid}
        mappings = self._mappings(config)
        try:
            path = await host.netns_add(name)
            await self.cni.add(self._loopback(), Attachment(sandbox_id, path, "lo", args))
            result = await self.cni.add(self._pod_network(bool(mappings)),
                                        Attachment(sandbox_id, path, "eth0", args, {"portMappings": mappings} if mappings else {}))
        except (CNIError, host.HostError) as err:
            await asyncio.shield(self.teardown(sandbox_id, name))
            raise RuntimeErrorStatus("FailedCreatePodSandBox", f'failed to setup network for sandbox "{sandbox_id[:12]}": {err}') from err
        except BaseException:
            await asyncio.shield(self.teardown(sandbox_id, name))
            raise
        ips = [i["address"].split("/")[0] for i in result.get("ips") or [] if i.get("address")]
        if not ips:
            await asyncio.shield(self.teardown(sandbox_id, name))
            raise RuntimeErrorStatus("FailedCreatePodSandBox", f"CNI network {self.names.network} returned no IP: {result}")
        logger.info("pod network set up", extra={"pod": f"{config.namespace}/{config.name}", "netns": name, "ip": ips[0]})
        return ips[0], name

    async def teardown(self, sandbox_id: str, name: str = "") -> None:
        name = name or self.names.netns(sandbox_id)
        path = host.netns_path(name)
        errors: list[str] = []
        for conflist, ifname in ((self._pod_network(False), "eth0"), (self._loopback(), "lo")):
            att = Attachment(sandbox_id, path if os.path.exists(path) else "", ifname)
            if self.cni.cached(conflist["name"], att) is None and (ifname == "lo" or not self.pod_cidr):
                continue  # nothing recorded to delete (and no config to DEL with without a CIDR)
            try:
                await self.cni.delete(conflist, att)
            except CNIError as err:
                errors.append(str(err))
        await host.netns_delete(name)
        if errors:
            logger.warning("CNI DEL reported errors (namespace removed anyway): %s", "; ".join(errors), extra={"netns": name})

    @staticmethod
    def wrap(netns: str, argv: Sequence[str]) -> list[str]:
        if not netns:
            return list(argv)
        return [shutil.which("nsenter") or "nsenter", f"--net={host.netns_path(netns)}", "--", *argv]

    # -- cleanup --------------------------------------------------------------------------

    def leftovers(self) -> list[str]:
        """This node's namespaces that exist now (for cleanup and tests)."""
        return [n for n in host.netns_list() if self.names.owns_netns(n)]

    async def cleanup(self) -> None:
        """Remove every namespace, attachment, lease, route and the bridge of this node."""
        async with self._lock:
            ids = {str(c.get("containerId", "")) for c in self.cni.cached_attachments()
                   if str(c.get("networkName", "")).startswith(self.names.network)}
            for cid in sorted(ids - {""}):
                await self.teardown(cid)
            for name in self.leftovers():
                await host.netns_delete(name)
            if await host.link_exists(self.names.bridge):
                await host.delete_link(self.names.bridge)  # its routes (the Service range's too) go with it
            shutil.rmtree(os.path.join(self.state_dir, "networks", self.names.network), ignore_errors=True)
            await host.restore_machine_settings()
