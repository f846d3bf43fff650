"""Mount points the read-only host view lacks, made with one read-only overlay each.

Why: a volume (or an image directory such as nginx's ``/usr/share/nginx/html``)
whose mountPath's parent does not exist on the host needs a mount point that
bwrap cannot create under the read-only host root. :func:`launcher.plan_mounts`
rebuilds the deepest existing ancestor as a tmpfs with every host entry bound
back: for ``/usr/share`` some 110 bind mounts, 200-450 ms of a container's
start here (a mount costs milliseconds in a namespace with that many), the
largest part of a first nginx pod's way from node to Running.

Instead, as root with overlayfs, that ancestor is laid over before bwrap runs
by a read-only overlay (no upper layer) of two lower layers: a directory in the
container's state dir holding just the missing mount points, over the host
directory itself. The container sees the host's entries, read-only as before,
plus the mount points; one mount, made in a private mount namespace
(``unshare --mount``) that bwrap's own then starts from, so the host never
sees it.

Where it does not apply, the tmpfs rebuild stays: the host root itself (an
overlay cannot be laid over ``/`` there), a directory with mounts below it
(an overlay's lower layer shows the directory's own filesystem only, so the
host's submounts there — ``/run``'s, typically — would vanish from the
view), a path overlayfs options cannot name (``,``, ``:``, ``\\``, spaces), and
no overlayfs (the caller passes what :func:`oci_container.overlay_mode` found).

Invariant: the overlay's top layer is created fresh for each container start
and holds directories only; the view is never writable where the host's was not.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Sequence

from k8py.kubelet.runtime.process import launcher
from k8py.kubelet.runtime.protocols import Mount

__all__ = ["HostView", "plan"]

_UNSAFE = frozenset(",:\\ \t\n")
_SCRIPT = 'while [ "$1" != -- ]; do mount -t overlay k8py-view -o "ro,lowerdir=$1:$2" "$2" || exit 125; shift 2; done; shift; exec "$@"'


@dataclass(frozen=True)
class HostView:
    #: rebuilt directories laid over by an overlay (``launcher.plan_mounts``' ``overlaid``)
    overlaid: tuple[str, ...] = ()
    #: what runs bwrap: ``unshare`` and the mounts, ending in ``--`` before bwrap's argv
    prefix: list[str] = field(default_factory=list)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return [*self.prefix, *argv] if self.prefix else list(argv)


def _mount_points() -> list[str]:
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4:
                    out.append(fields[4].encode().decode("unicode_escape"))  # \040 and the like
    except OSError:
        return []
    return out


def plan(mounts: Sequence[Mount], *, view_dir: str, overlay: str) -> HostView:
    """The overlays for ``mounts`` (a container's, before :func:`launcher.host_mounts`) with
    their top layers under ``view_dir``; ``overlay``: ``oci_container.overlay_mode``'s answer."""
    unshare = shutil.which("unshare")
    if not overlay or not unshare or os.geteuid() != 0:
        return HostView()
    resolved = launcher.host_mounts(mounts)
    candidates = [d for d in launcher.rebuilt_dirs(resolved) if d != "/"]
    if not candidates:
        return HostView()
    points = _mount_points()
    overlaid: list[str] = []
    args: list[str] = []
    shutil.rmtree(view_dir, ignore_errors=True)
    for i, d in enumerate(candidates):
        top = os.path.join(view_dir, str(i))
        if any(c in _UNSAFE for c in d + top) or any(p.startswith(d + "/") for p in points):
            continue
        for m in resolved:
            if not m.container_path.startswith(d + "/"):
                continue
            point = os.path.join(top, os.path.relpath(m.container_path, d))
            if os.path.isdir(m.host_path) or not os.path.exists(m.host_path):
                os.makedirs(point, exist_ok=True)
            else:  # a file bound onto a file
                os.makedirs(os.path.dirname(point), exist_ok=True)
                open(point, "a").close()
        if not os.path.isdir(top):
            continue
        overlaid.append(d)
        args += [top, d]
    if not overlaid:
        return HostView()
    return HostView(tuple(overlaid), [unshare, "--mount", "--propagation", "private", "/bin/sh", "-c", _SCRIPT, "k8py-view", *args, "--"])
