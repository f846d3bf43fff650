"""A container's securityContext, as the process runtime applies it.

What a container gets is what containerd's CRI plugin gives it upstream:

- **capabilities**: containerd's default set (:data:`DEFAULT_CAPABILITIES`, Docker's 14), or
  every capability the node has for a ``privileged`` container; ``add: [ALL]`` gives all,
  ``drop: [ALL]`` none, then the named adds and the named drops apply (names with or
  without ``CAP_``). The result is the bounding set; a process running as uid 0 has it
  permitted and effective too, a non-root one has none effective (upstream gives no
  ambient capabilities either), so ``/proc/self/status`` reads as it would under runc.
- **user and groups**: ``runAsUser``/``runAsGroup`` (the container's over the pod's), the
  pod's ``supplementalGroups`` and its ``fsGroup`` as supplementary groups.
- **no_new_privs**: set when ``allowPrivilegeEscalation: false``.
- **privileged**: all capabilities and the host's ``/dev``.

How, on a host-view container (a catalog image, the kubelet running as root): bubblewrap runs
util-linux's ``setpriv``, which sets the uid, gid, groups, bounding and inheritable sets and
then execs the command, so the command keeps the pid bwrap started (signalling, exec and
adoption are unchanged). Exec'd commands go through the same ``setpriv``.

What cannot be honoured, said here and in :meth:`ProcessRuntime.info`:

- bubblewrap always sets no_new_privs (and binds every mount nosuid), so under it
  ``allowPrivilegeEscalation: true`` (the default) is not granted: setuid binaries and file
  capabilities do not raise privileges (docs/05-kubelet.md). Without bwrap the flag is
  applied as asked.
- The host view is always read-only (``readOnlyRootFilesystem`` changes nothing there); a
  pulled image gets a read-only root instead of its overlay.
- A pulled image has no ``setpriv`` of its own: there bwrap's ``--cap-drop ALL --cap-add``
  set the effective set (the bounding set stays the node's), a non-root user runs in a user
  namespace (:mod:`.oci_container`) and supplementary groups are not applied.
- A kubelet that is not root cannot give capabilities or another user at all (unprivileged
  bwrap drops every capability): a container asking for ``capabilities.add`` or
  ``privileged`` fails to be created with ``CreateContainerError`` saying so, rather than
  running with less than it asked for; supplementalGroups and fsGroup are not applied (the
  container runs as the kubelet's user, who owns its volumes anyway), and a catalog image's
  runAsUser is not either (a pulled image's is, in a user namespace).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Sequence

from k8py.kubelet.runtime.protocols import ContainerConfig, RuntimeErrorStatus

__all__ = ["DEFAULT_CAPABILITIES", "Security", "security_for", "node_capabilities", "setpriv_argv", "bwrap_cap_args"]

#: containerd's default (``oci.DefaultSpec``): what a non-privileged container gets
DEFAULT_CAPABILITIES = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID",
    "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
)

# Linux's capability numbers (linux/capability.h), for reading CapBnd and naming the bits
_CAP_NAMES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT",
    "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE",
    "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ",
    "PERFMON", "BPF", "CHECKPOINT_RESTORE",
)


@dataclass(frozen=True)
class Security:
    """What one container runs with (stored in its record, so exec and adoption see it)."""

    #: the bounding set, ``CAP_*`` names
    capabilities: tuple[str, ...]
    uid: int = 0
    gid: int = 0
    groups: tuple[int, ...] = ()
    no_new_privs: bool = False
    privileged: bool = False
    readonly_rootfs: bool = False

    def to_record(self) -> dict[str, object]:
        return {"capabilities": list(self.capabilities), "uid": self.uid, "gid": self.gid, "groups": list(self.groups),
                "no_new_privs": self.no_new_privs, "privileged": self.privileged, "readonly_rootfs": self.readonly_rootfs}

    @classmethod
    def from_record(cls, rec: dict[str, object] | None) -> "Security | None":
        if not rec:
            return None
        return cls(tuple(rec["capabilities"]), int(rec["uid"]), int(rec["gid"]), tuple(rec["groups"]),  # type: ignore[arg-type, call-overload]
                   bool(rec["no_new_privs"]), bool(rec["privileged"]), bool(rec["readonly_rootfs"]))


def _canon(name: str) -> str:
    name = name.strip().upper()
    return name if name.startswith("CAP_") or name == "ALL" else "CAP_" + name


def node_capabilities() -> tuple[str, ...]:
    """Every capability the kubelet's own bounding set holds (what ``privileged`` means here)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            bnd = next(int(line.split()[1], 16) for line in f if line.startswith("CapBnd:"))
    except (OSError, StopIteration, ValueError):
        bnd = (1 << len(_CAP_NAMES)) - 1
    return tuple("CAP_" + n for i, n in enumerate(_CAP_NAMES) if bnd >> i & 1)


def capability_set(add: Sequence[str], drop: Sequence[str], *, privileged: bool, everything: Sequence[str]) -> tuple[str, ...]:
    """containerd's order: privileged → all; else default, ALL adds, ALL drops, named adds, named drops."""
    if privileged:
        return tuple(everything)
    adds, drops = [_canon(c) for c in add], [_canon(c) for c in drop]
    caps = [c for c in DEFAULT_CAPABILITIES if c in everything]
    if "ALL" in adds:
        caps = list(everything)
    if "ALL" in drops:
        caps = []
    for c in adds:
        if c != "ALL" and c not in caps:
            if c[4:] not in _CAP_NAMES:
                raise RuntimeErrorStatus("CreateContainerError", f"unknown capability {c!r} in securityContext.capabilities.add")
            caps.append(c)
    caps = [c for c in caps if c not in drops]
    return tuple(sorted(caps, key=lambda c: _CAP_NAMES.index(c[4:]) if c[4:] in _CAP_NAMES else 99))


def security_for(config: ContainerConfig, *, oci_user: tuple[int, int] | None = None) -> Security:
    """The container's :class:`Security`; raises CreateContainerError for what this kubelet cannot give."""
    root = os.geteuid() == 0
    everything = node_capabilities()
    caps = capability_set(config.capabilities_add, config.capabilities_drop, privileged=config.privileged, everything=everything)
    uid = config.run_as_user if config.run_as_user is not None else (oci_user[0] if oci_user else 0)
    gid = config.run_as_group if config.run_as_group is not None else (oci_user[1] if oci_user else 0)
    groups = tuple(dict.fromkeys(int(g) for g in config.supplemental_groups))
    if not root:
        wants = [w for w, on in (("capabilities.add", bool(config.capabilities_add)), ("privileged", config.privileged)) if on]
        if wants:
            raise RuntimeErrorStatus("CreateContainerError", f"securityContext {', '.join(wants)} needs a kubelet running as root "
                                     "(an unprivileged bubblewrap gives containers no capabilities); "
                                     "run the kubelet as root or drop these fields")
        groups = ()  # cannot be given; the volumes are the kubelet's user's, whom the container runs as
    return Security(caps, uid, gid, groups, config.no_new_privs, config.privileged, config.readonly_rootfs)


def setpriv_argv(sec: Security, *, bwrapped: bool) -> list[str]:
    """The ``setpriv`` prefix that puts ``sec`` into effect before the command is exec'd
    ([] when the kubelet is not root, or has no setpriv: then nothing is changed)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv:
        return []
    bounding = ",".join(["-all", *("+" + c[4:].lower() for c in sec.capabilities)])
    args = [setpriv, f"--reuid={sec.uid}", f"--regid={sec.gid}"]
    args += [f"--groups={','.join(str(g) for g in sec.groups)}"] if sec.groups else ["--clear-groups"]
    args += ["--inh-caps=-all", f"--bounding-set={bounding}"]
    if sec.no_new_privs and not bwrapped:  # bwrap has set it already
        args.append("--no-new-privs")
    return [*args, "--"]


def bwrap_cap_args(sec: Security) -> list[str]:
    """bwrap's own capability flags, for containers without setpriv in their root (pulled images)."""
    if os.geteuid() != 0:
        return []
    return ["--cap-drop", "ALL", *(a for c in sec.capabilities for a in ("--cap-add", c))]
