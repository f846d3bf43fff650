"""Debian's containerd for one node, with everything it writes in k8py's own directories.

``k8py up --runtime containerd`` runs one containerd per node (the
``containerd/<node>`` component, :func:`run`), and the node's kubelet talks
CRI to its socket. Tests start one the same way (tests/support/containerd.py).

What :func:`render_config` generates (runtime.md rows 3b-3e, measured on
these machines):

- ``root`` (images, snapshots: kept across ``k8py up`` runs) below
  ``DATA_DIR/containerd/<node>``; ``state`` (sockets, runc state, the pods'
  netns mounts: ``netns_mounts_under_state_dir``) in a short directory under
  ``/run/k8py`` (a unix socket path must fit 108 bytes); the ``opt`` plugin's
  directory and host-local IPAM's ``dataDir`` below ``root`` too, so that
  nothing lands in /opt/containerd, /var/lib/cni or /run/netns;
- ``restrict_oom_score_adj = true`` when this process lacks
  CAP_SYS_RESOURCE (without it runc cannot lower the pause container's
  oom_score_adj and every RunPodSandbox fails);
- the sandbox image :data:`~.local_images.PAUSE_IMAGE`, imported locally
  (:mod:`.local_images`: these machines reach no public registry);
- the CNI network (:func:`render_cni`): a bridge named for this node, the
  host-local range being the node's ``spec.podCIDR``. containerd writes it
  itself from ``conf_template`` when the kubelet calls ``UpdateRuntimeConfig``
  with the pod CIDR, as upstream's kubelet and containerd do; tests without a
  Node give a fixed subnet instead. No masquerade: pod traffic never leaves
  the machine NATed.

Before containerd starts, :func:`prepare_network` makes the bridge (the
bridge plugin adopts it) and routes the Service range onto it, so a packet
for a Service IP without a rule dies on the bridge instead of leaving the
machine.

:mod:`.containerd_cleanup` undoes it all (``k8py down``, the tests). Every
host name used (bridge, cgroup parent, state directory) derives from the
:class:`ContainerdLayout`'s tag.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import shutil
import socket as socketlib
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from k8py.cluster.local_images import PAUSE_IMAGE, build_archive, import_images

__all__ = ["ContainerdLayout", "containerd_missing", "render_config", "render_cni", "prepare", "prepare_network",
           "wait_for_socket", "load_images", "restrict_oom_score_adj", "CNI_BIN_DIR", "CGROUP_V1_CONTROLLERS", "SHIM_SOCKETS", "ip"]

logger = logging.getLogger(__name__)

CNI_BIN_DIR = "/usr/lib/cni"
STATE_BASE = "/run/k8py"
SHIM_SOCKETS = "/run/containerd/s"
CGROUP_V1_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "hugetlb",
                         "net_cls", "perf_event", "systemd")
_CAP_SYS_RESOURCE = 24


@dataclass(frozen=True)
class ContainerdLayout:
    """Where one containerd keeps everything, and the host names it uses (all derived from ``tag``)."""

    #: persistent: config, images and snapshots, CNI config and leases, the log
    home: str
    #: runtime: sockets, runc state, netns mounts (short: socket paths are limited)
    state: str
    #: 6 hex digits naming the bridge and the cgroup parent
    tag: str

    @classmethod
    def for_node(cls, data_dir: str, node: str) -> "ContainerdLayout":
        data_dir = os.path.realpath(data_dir)
        tag = hashlib.sha1(f"containerd\0{data_dir}\0{node}".encode()).hexdigest()[:6]
        return cls(os.path.join(data_dir, "containerd", node), os.path.join(STATE_BASE, f"containerd-{tag}"), tag)

    @classmethod
    def in_dir(cls, workdir: str, tag: str) -> "ContainerdLayout":
        return cls(workdir, os.path.join(workdir, "state"), tag)

    @property
    def socket(self) -> str:
        return os.path.join(self.state, "containerd.sock")

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    @property
    def config_file(self) -> str:
        return os.path.join(self.home, "config.toml")

    @property
    def log_file(self) -> str:
        return os.path.join(self.home, "containerd.log")

    @property
    def cni_conf_dir(self) -> str:
        return os.path.join(self.home, "cni", "net.d")

    @property
    def cni_template(self) -> str:
        return os.path.join(self.home, "cni", "template.conflist")

    @property
    def ipam_dir(self) -> str:
        return os.path.join(self.home, "cni", "ipam")

    @property
    def bridge(self) -> str:
        # the prefix the kubelet's pod networks use: the host's ip_forward is put back when the last k8pybr- goes
        return f"k8pybr-{self.tag}"

    @property
    def cgroup_parent(self) -> str:
        """The cgroup (cgroupfs driver) the kubelet puts pods below: ``--cgroup-root``."""
        return f"/k8py-cd-{self.tag}"


def containerd_missing(cni_bin_dir: str = CNI_BIN_DIR) -> str | None:
    """Why containerd pods cannot run here (what to do about it), or None."""
    if os.geteuid() != 0:
        return ("--runtime containerd needs root (containerd, network namespaces, a bridge, cgroups): "
                "run k8py up as root, or use the default process runtime")
    for tool, package in (("containerd", "containerd"), ("containerd-shim-runc-v2", "containerd"), ("ctr", "containerd"),
                          ("runc", "runc"), ("ip", "iproute2")):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH: apt-get install {package}"
    for plugin in ("bridge", "host-local", "loopback", "portmap"):
        if not os.access(os.path.join(cni_bin_dir, plugin), os.X_OK):
            return f"the CNI plugin {plugin} is not in {cni_bin_dir}: apt-get install containernetworking-plugins"
    return None


def restrict_oom_score_adj() -> bool:
    """True when this process lacks CAP_SYS_RESOURCE (it cannot lower oom_score_adj, so runc must not try)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return not int(line.split()[1], 16) >> _CAP_SYS_RESOURCE & 1
    except (OSError, ValueError):
        pass
    return True


def render_config(layout: ContainerdLayout, *, sandbox_image: str = PAUSE_IMAGE, registries: Sequence[str] = (),
                  cni_bin_dir: str = CNI_BIN_DIR, conf_template: bool = True) -> str:
    """containerd's ``config.toml`` (version 2, containerd 1.6). ``registries``: hosts reached over plain HTTP."""
    home, cri = layout.home, 'plugins."io.containerd.grpc.v1.cri"'
    lines = [
        "version = 2",
        f'root = "{home}/root"',
        f'state = "{layout.state}"',
        'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",',
        '  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]',
        "[grpc]", f'  address = "{layout.socket}"',
        "[ttrpc]", f'  address = "{layout.socket}.ttrpc"',
        '[plugins."io.containerd.internal.v1.opt"]', f'  path = "{home}/opt"',
        f"[{cri}]",
        f'  sandbox_image = "{sandbox_image}"',
        f"  restrict_oom_score_adj = {'true' if restrict_oom_score_adj() else 'false'}",
        "  netns_mounts_under_state_dir = true",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        "  enable_selinux = false",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        f"[{cri}.containerd.runtimes.runc]", '  runtime_type = "io.containerd.runc.v2"',
        f"[{cri}.containerd.runtimes.runc.options]", f'  Root = "{layout.state}/runc"', "  SystemdCgroup = false",
        f"[{cri}.cni]",
        f'  bin_dir = "{cni_bin_dir}"',
        f'  conf_dir = "{layout.cni_conf_dir}"',
        "  max_conf_num = 1",
    ]
    if conf_template:
        lines.append(f'  conf_template = "{layout.cni_template}"')
    for host in registries:
        lines += [f'[{cri}.registry.mirrors."{host}"]', f'  endpoint = ["http://{host}"]']
    return "\n".join(lines) + "\n"


def render_cni(layout: ContainerdLayout, subnet: str = "{{.PodCIDR}}") -> str:
    """The pod network's CNI conflist; with the default ``subnet`` it is containerd's ``conf_template``."""
    return json.dumps({
        "cniVersion": "1.0.0", "name": f"k8py-{layout.tag}",
        "plugins": [
            {"type": "bridge", "bridge": layout.bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": layout.ipam_dir, "ranges": [[{"subnet": subnet}]],
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True},
        ]}, indent=1) + "\n"


def prepare(layout: ContainerdLayout, *, subnet: str = "", sandbox_image: str = PAUSE_IMAGE,
            registries: Sequence[str] = (), cni_bin_dir: str = CNI_BIN_DIR) -> None:
    """Write the config and the CNI template (or, with ``subnet``, a fixed CNI config)."""
    for d in (layout.home, layout.state, layout.cni_conf_dir, layout.ipam_dir):
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(layout.state, "started"), "w") as f:
        f.write(str(time.time()))  # cleanup removes only shim sockets made since then
    with open(layout.config_file, "w") as f:
        f.write(render_config(layout, sandbox_image=sandbox_image, registries=registries, cni_bin_dir=cni_bin_dir,
                              conf_template=not subnet))
    if subnet:
        with open(os.path.join(layout.cni_conf_dir, "10-k8py.conflist"), "w") as f:
            f.write(render_cni(layout, subnet))
    else:
        with open(layout.cni_template, "w") as f:
            f.write(render_cni(layout))


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    """``ip ARGS``, its output captured (the caller reads the return code)."""
    return subprocess.run(["ip", *args], capture_output=True, text=True)


def prepare_network(layout: ContainerdLayout, *, service_cidr: str = "", node: str = "") -> None:
    """The node's bridge (up, ``route_localnet`` on it only) and the Service range routed onto it."""
    if ip("link", "show", "dev", layout.bridge).returncode != 0:
        made = ip("link", "add", "name", layout.bridge, "type", "bridge")
        if made.returncode != 0 and ip("link", "show", "dev", layout.bridge).returncode != 0:
            raise RuntimeError(f"cannot create the pod bridge {layout.bridge}: {made.stderr.strip()}")
    ip("link", "set", "dev", layout.bridge, "alias", f"k8py containerd pod network of node {node} ({layout.home})"[:120])
    ip("link", "set", "dev", layout.bridge, "up")
    try:
        with open(f"/proc/sys/net/ipv4/conf/{layout.bridge}/route_localnet", "w") as f:
            f.write("1")
    except OSError:
        pass
    if service_cidr:
        routed = ip("route", "replace", service_cidr, "dev", layout.bridge, "proto", "static")
        if routed.returncode != 0:
            raise RuntimeError(f"cannot route the Service range {service_cidr} onto {layout.bridge}: {routed.stderr.strip()}")


def _connectable(path: str) -> bool:
    with socketlib.socket(socketlib.AF_UNIX) as s:
        try:
            s.connect(path)
        except OSError:
            return False
    return True


async def wait_for_socket(path: str, *, timeout: float, alive: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout
    pause = 0.01
    while not (os.path.exists(path) and _connectable(path)):
        if not alive():
            raise RuntimeError("containerd exited before it served its socket")
        if time.monotonic() > deadline:
            raise RuntimeError(f"containerd did not serve {path} within {timeout:.0f}s")
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.1)


async def load_images(layout: ContainerdLayout) -> list[str]:
    """Build the local images' archive once (in ``home``) and import it into the running containerd."""
    archive = os.path.join(layout.home, "local-images.tar")
    names = await asyncio.to_thread(build_archive, archive)
    await asyncio.to_thread(import_images, layout.socket, archive)
    return names
