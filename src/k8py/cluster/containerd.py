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

:func:`cleanup` undoes a node's containerd: it kills the shims that served
its socket (shims outlive containerd by design) and every process left in
its pods' cgroups, unmounts what is mounted below its directories, deletes
its bridge (routes go with it) and cgroups, the host-local leases, the shim
sockets its shims left in ``/run/containerd/s`` (containerd 1.6 puts them
there whatever the config says) and its state directory. It touches only
names derived from the :class:`ContainerdLayout`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import shutil
import signal
import socket as socketlib
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from k8py.cluster.local_images import PAUSE_IMAGE, build_archive, import_images

__all__ = ["ContainerdLayout", "containerd_missing", "render_config", "render_cni", "prepare", "prepare_network",
           "cleanup", "pod_uids", "remove_cgroups", "wait_for_socket", "restrict_oom_score_adj", "CNI_BIN_DIR", "CGROUP_V1_CONTROLLERS"]

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


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


def prepare_network(layout: ContainerdLayout, *, service_cidr: str = "", node: str = "") -> None:
    """The node's bridge (up, ``route_localnet`` on it only) and the Service range routed onto it."""
    if _ip("link", "show", "dev", layout.bridge).returncode != 0:
        made = _ip("link", "add", "name", layout.bridge, "type", "bridge")
        if made.returncode != 0 and _ip("link", "show", "dev", layout.bridge).returncode != 0:
            raise RuntimeError(f"cannot create the pod bridge {layout.bridge}: {made.stderr.strip()}")
    _ip("link", "set", "dev", layout.bridge, "alias", f"k8py containerd pod network of node {node} ({layout.home})"[:120])
    _ip("link", "set", "dev", layout.bridge, "up")
    try:
        with open(f"/proc/sys/net/ipv4/conf/{layout.bridge}/route_localnet", "w") as f:
            f.write("1")
    except OSError:
        pass
    if service_cidr:
        routed = _ip("route", "replace", service_cidr, "dev", layout.bridge, "proto", "static")
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


# -- cleanup ------------------------------------------------------------------------------------


def _cmdline(pid: str) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def shim_pids(layout: ContainerdLayout) -> list[int]:
    """The shims serving this containerd (their command line names its socket)."""
    sock = layout.socket.encode()
    return [int(p) for p in os.listdir("/proc") if p.isdigit()
            and (cmd := _cmdline(p)) and cmd[0].endswith(b"containerd-shim-runc-v2") and sock in cmd]


def containerd_pids(layout: ContainerdLayout) -> list[int]:
    config = layout.config_file.encode()
    return [int(p) for p in os.listdir("/proc") if p.isdigit()
            and (cmd := _cmdline(p)) and os.path.basename(cmd[0]) == b"containerd" and config in cmd]


def _cgroup_roots(layout: ContainerdLayout) -> list[str]:
    rel = layout.cgroup_parent.lstrip("/")
    return [os.path.join("/sys/fs/cgroup", c, rel) for c in CGROUP_V1_CONTROLLERS] + [os.path.join("/sys/fs/cgroup", rel)]


def _cgroup_pids(roots: list[str]) -> set[int]:
    pids: set[int] = set()
    for root in roots:
        for d, _, files in os.walk(root):
            if "cgroup.procs" in files:
                try:
                    with open(os.path.join(d, "cgroup.procs")) as f:
                        pids.update(int(p) for p in f.read().split())
                except OSError:
                    pass
    return pids


def _kill(pids: Sequence[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _rm_cgroup_tree(path: str) -> None:
    if not os.path.isdir(path):
        return
    for root, dirs, _ in os.walk(path, topdown=False):
        for d in dirs:
            try:
                os.rmdir(os.path.join(root, d))
            except OSError:
                pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def _rm_stale_shim_sockets(since: float) -> None:
    try:
        names = os.listdir(SHIM_SOCKETS)
    except OSError:
        return
    for name in names:
        path = os.path.join(SHIM_SOCKETS, name)
        try:
            if os.stat(path).st_mtime < since - 1:
                continue  # older than this containerd: not ours
            with socketlib.socket(socketlib.AF_UNIX) as sock:
                sock.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)  # made by one of our shims, which is gone
        except OSError:
            continue


def pod_uids(layout: ContainerdLayout) -> set[str]:
    """The pods with a cgroup below this node's cgroup parent (``…/pod<uid>``): the ones its kubelet ran."""
    uids: set[str] = set()
    for root in _cgroup_roots(layout):
        for _, dirs, _ in os.walk(root):
            uids.update(d[3:] for d in dirs if d.startswith("pod") and len(d) > 3)
    return uids


def remove_cgroups(layout: ContainerdLayout) -> bool:
    """Remove the node's (empty) cgroup parent in every hierarchy; True if any went."""
    gone = False
    for root in _cgroup_roots(layout):
        if os.path.isdir(root):
            _rm_cgroup_tree(root)
            gone |= not os.path.isdir(root)
    return gone


def cleanup(layout: ContainerdLayout, *, timeout: float = 30.0) -> list[str]:
    """Remove everything this containerd made on the host (see the module docstring); returns what went.
    containerd itself must be stopped first (its pids are killed here if not)."""
    removed: list[str] = []
    _kill(containerd_pids(layout))
    shims = shim_pids(layout)
    _kill(shims)
    if shims:
        removed.append(f"{len(shims)} shims")
    roots = _cgroup_roots(layout)
    deadline = time.monotonic() + timeout
    killed: set[int] = set()
    while (left := _cgroup_pids(roots)) and time.monotonic() < deadline:
        _kill(sorted(left))  # containers outlive their killed shims
        killed |= left
        time.sleep(0.05)
    if killed:
        removed.append(f"{len(killed)} container processes")
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f]
    for point in reversed(mounts):
        if point.startswith((layout.home + "/", layout.state + "/")):
            subprocess.run(["umount", "-l", point], capture_output=True)
    if _ip("link", "show", "dev", layout.bridge).returncode == 0:
        _ip("link", "delete", "dev", layout.bridge)
        removed.append(f"bridge {layout.bridge}")
    if remove_cgroups(layout):
        removed.append(f"cgroup {layout.cgroup_parent}")
    try:
        with open(os.path.join(layout.state, "started")) as f:
            since = float(f.read().strip() or 0)
    except (OSError, ValueError):
        since = time.time() + 10  # unknown: remove none
    _rm_stale_shim_sockets(since)
    shutil.rmtree(layout.ipam_dir, ignore_errors=True)  # the leases of pods that no longer exist
    if os.path.isdir(layout.state):
        shutil.rmtree(layout.state, ignore_errors=True)
        removed.append(f"state {layout.state}")
    return removed
