"""A container from a pulled OCI image: its process, and how bwrap starts it.

What runs, as the image config and the container spec combine upstream:
``command`` replaces ``Entrypoint`` (and drops ``Cmd``), ``args`` replace
``Cmd``; the image's ``Env`` comes first and the container's ``env``
overrides it; ``workingDir`` overrides ``WorkingDir`` (default ``/``);
``User`` (``uid``, ``uid:gid``, ``name`` or ``name:group``, names looked up
in the image's ``/etc/passwd`` and ``/etc/group``) picks the user.

How it runs (under bubblewrap; a pulled image needs it)::

    [unshare --mount sh -c '[mount -t tmpfs …] mount -t overlay … && exec "$@"' sh]   (root only)
    bwrap --bind <root> / --dev /dev --proc /proc --tmpfs /tmp
          --ro-bind /etc/resolv.conf, /etc/hosts   (unless a volume covers them)
          [volume binds] --unshare-pid --unshare-ipc --unshare-uts --hostname <pod>
          [--unshare-user --uid U --gid G] --json-status-fd <fd> --chdir <dir> -- argv

The image's rootfs in the content store is shared by every container of
that image and never written: on a root node each container gets an
overlayfs (the image as the lower layer, its own upper directory under
the container's state dir, or on a tmpfs where that filesystem cannot be
an upper layer: :func:`overlay_mode` probes once) mounted in a private
mount namespace, so it disappears with the container and the host never
sees it. A rootless
node binds the image read-only with a tmpfs on ``/tmp`` (as a
``readOnlyRootFilesystem`` container runs); a volume whose mountPath the
image lacks gets its parent rebuilt as a tmpfs with the image's entries
bound back, as :mod:`.launcher` does for the host view. A non-root ``User`` runs in a
user namespace mapping that uid to the node's (files owned by other uids
show as ``nobody``). The network is the host's, as for every process
runtime container; bwrap's process tree and status file are the same as
:mod:`.launcher`'s, so signalling, exec and adoption need nothing new.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from k8py.kubelet.images.reference import parse
from k8py.kubelet.runtime.process.image_service import ProcessImages
from k8py.kubelet.runtime.process.launcher import DEFAULT_PATH, Launch, dev_args
from k8py.kubelet.runtime.protocols import ContainerConfig, Mount, RuntimeErrorStatus

__all__ = ["OCIProcess", "prepare", "oci_process", "build_oci_launch", "check_command"]


@dataclass(frozen=True)
class OCIProcess:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    #: (uid, gid), or None for root
    user: tuple[int, int] | None


def prepare(images: ProcessImages, config: ContainerConfig, *, hostname: str, bwrap: bool) -> dict[str, Any] | None:
    """The record fields of a container from a pulled image; None for a catalog image."""
    if not images.is_oci(config.image):
        return None
    rec = images.record(config.image)
    if rec is None:
        raise RuntimeErrorStatus("CreateContainerError", f'failed to create containerd container: image "{config.image}" is not '
                                 "present on the node: pull it first")
    if not bwrap:
        raise RuntimeErrorStatus("CreateContainerError", "images from a registry run under bubblewrap, which this node lacks "
                                 "(install the bubblewrap package, or run without --no-bwrap)")
    assert images.puller is not None
    rootfs = images.puller.store.rootfs(rec.id)
    pod = f"{config.labels.get('io.kubernetes.pod.name', '')}_{config.labels.get('io.kubernetes.pod.namespace', '')}"
    pod += f"({config.labels.get('io.kubernetes.pod.uid', '')})"
    proc = oci_process(rec.config, config, rootfs, hostname=hostname, pod=pod)
    repo = parse(config.image).repository
    image_ref = next((d for d in rec.repo_digests if d.startswith(repo + "@")), rec.repo_digests[0] if rec.repo_digests else rec.id)
    images.puller.store.touch(rec.id)
    return {"argv": proc.argv, "env": proc.env, "cwd": proc.cwd, "image_ref": image_ref, "rootfs": rootfs,
            "user": list(proc.user) if proc.user else None, "image_id": rec.id}


def _lookup(path: str, name: str, field: int) -> int | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split(":")
                if len(parts) > field and parts[0] == name:
                    return int(parts[field])
    except (OSError, ValueError):
        return None
    return None


def resolve_user(rootfs: str, spec: str) -> tuple[int, int] | None:
    if not spec:
        return None
    user, _, group = spec.partition(":")
    uid = int(user) if user.isdigit() else _lookup(os.path.join(rootfs, "etc/passwd"), user, 2)
    if uid is None:
        raise RuntimeErrorStatus("CreateContainerError", f'unable to find user {user}: no matching entries in passwd file')
    if group:
        gid = int(group) if group.isdigit() else _lookup(os.path.join(rootfs, "etc/group"), group, 2)
        if gid is None:
            raise RuntimeErrorStatus("CreateContainerError", f"unable to find group {group}: no matching entries in group file")
    else:
        gid = _primary_gid(rootfs, uid)
    return None if uid == 0 and gid == 0 else (uid, gid)


def _home(rootfs: str, uid: int) -> str:
    """The user's home in the image's /etc/passwd (``/`` if it has none), as runc sets HOME."""
    try:
        with open(os.path.join(rootfs, "etc/passwd"), encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split(":")
                if len(parts) > 5 and parts[2] == str(uid):
                    return parts[5] or "/"
    except OSError:
        pass
    return "/"


def _primary_gid(rootfs: str, uid: int) -> int:
    try:
        with open(os.path.join(rootfs, "etc/passwd"), encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(":")
                if len(parts) > 3 and parts[2] == str(uid):
                    return int(parts[3])
    except (OSError, ValueError):
        pass
    return uid if uid else 0


def _user(rootfs: str, image_user: str, config: ContainerConfig, *, pod: str) -> tuple[int, int] | None:
    """The image's User, overridden by runAsUser/runAsGroup; runAsNonRoot checked as the kubelet does."""
    where = f"(pod: \"{pod}\", container: {config.name})"
    if config.run_as_user is not None:
        uid = config.run_as_user
        gid = config.run_as_group if config.run_as_group is not None else _primary_gid(rootfs, uid)
        if config.run_as_non_root and uid == 0:
            raise RuntimeErrorStatus("CreateContainerConfigError", f"container's runAsUser breaks non-root policy {where}")
        return None if uid == 0 and gid == 0 else (uid, gid)
    name = image_user.partition(":")[0]
    if config.run_as_non_root:
        if not name or name == "0":
            raise RuntimeErrorStatus("CreateContainerConfigError", f"container has runAsNonRoot and image will run as root {where}")
        if not name.isdigit():
            raise RuntimeErrorStatus("CreateContainerConfigError", f"container has runAsNonRoot and image has non-numeric user ({name}), "
                                     f"cannot verify user is non-root {where}")
    user = resolve_user(rootfs, image_user)
    if config.run_as_group is not None:
        return (user[0] if user else 0, config.run_as_group) if (user or config.run_as_group) else None
    return user


def oci_process(image_config: Mapping[str, Any], config: ContainerConfig, rootfs: str, *, hostname: str, pod: str = "") -> OCIProcess:
    entrypoint = list(image_config.get("Entrypoint") or [])
    cmd = list(image_config.get("Cmd") or [])
    if config.command:
        argv = [*config.command, *config.args]
    else:
        argv = [*entrypoint, *(config.args if config.args else cmd)]
    if not argv:
        raise RuntimeErrorStatus("CreateContainerError", "no command specified: the image has no Entrypoint or Cmd and the container no command")
    env: dict[str, str] = {}
    for item in image_config.get("Env") or []:
        k, _, v = str(item).partition("=")
        env[k] = v
    env.setdefault("PATH", DEFAULT_PATH)
    env["HOSTNAME"] = hostname
    user = _user(rootfs, str(image_config.get("User") or ""), config, pod=pod)
    env.setdefault("HOME", "/root" if user is None else _home(rootfs, user[0]))
    env.update(dict(config.env))
    cwd = config.working_dir or str(image_config.get("WorkingDir") or "") or "/"
    return OCIProcess(argv, env, cwd, user)


def check_command(rootfs: str, argv0: str, path: str, mounts: Sequence[Mount]) -> None:
    """RunContainerError with runc's words when the executable is not in the image."""
    if "/" in argv0:
        for m in mounts:
            base = m.container_path.rstrip("/")
            if argv0.startswith(base + "/"):
                return  # inside a volume: trust it
        if os.path.lexists(os.path.join(rootfs, argv0.lstrip("/"))):
            return
        why = "no such file or directory"
    else:
        for d in path.split(":"):
            if d and os.path.lexists(os.path.join(rootfs, d.lstrip("/"), argv0)):
                return
        why = "executable file not found in $PATH"
    raise RuntimeErrorStatus("RunContainerError", 'failed to create containerd task: failed to create shim task: OCI runtime create failed: '
                             f'runc create failed: unable to start container process: exec: "{argv0}": {why}: unknown')


_DISK_SCRIPT = 'mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4" && shift 4 && exec "$@"'
# upper and work on a tmpfs of their own, for when the state dir cannot hold an overlay's upper
# layer (it is itself on overlayfs, as in many CI containers); the lower may be on overlayfs
_TMPFS_SCRIPT = ('mount -t tmpfs -o mode=0755 tmpfs "$2" && mkdir "$2/upper" "$2/work" && '
                 'mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/upper,workdir=$2/work" "$4" && shift 4 && exec "$@"')
_overlay_modes: dict[str, str] = {}


def overlay_mode(state_dir: str) -> str:
    """How this node gives a container a writable root: ``disk`` (the upper layer in the
    container's state dir), ``tmpfs`` (in memory, when the state dir's filesystem refuses to
    be an upper layer) or ``""`` (read-only root: not root, or no overlayfs). Probed once
    per state dir by mounting one in a throwaway mount namespace."""
    if state_dir in _overlay_modes:
        return _overlay_modes[state_dir]
    mode = ""
    unshare = shutil.which("unshare")
    if os.geteuid() == 0 and unshare:
        import subprocess
        import tempfile
        os.makedirs(state_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="overlay-probe-", dir=state_dir) as d:
            dirs = [os.path.join(d, x) for x in ("lower", "upper", "work", "merged")]
            for x in dirs:
                os.mkdir(x)
            for name, script in (("disk", _DISK_SCRIPT), ("tmpfs", _TMPFS_SCRIPT)):
                try:
                    ok = subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh", *dirs, "true"],
                                        capture_output=True, timeout=30).returncode == 0
                except (OSError, subprocess.TimeoutExpired):
                    ok = False
                if ok:
                    mode = name
                    break
    _overlay_modes[state_dir] = mode
    return mode


def overlay_dirs(container_dir: str) -> tuple[str, str, str]:
    base = os.path.join(container_dir, "rootfs")
    return os.path.join(base, "upper"), os.path.join(base, "work"), os.path.join(base, "merged")


def _rebuilt_for_mount_points(rootfs: str, mounts: Sequence[Mount]) -> list[str]:
    """A read-only root cannot take new mount points: where a volume's mountPath is missing from
    the image, its deepest existing directory becomes a tmpfs with the image's entries there
    bound back read-only (and symlinks re-made), so bwrap can create the mount point."""
    rebuilt: list[str] = []
    for m in mounts:
        path = os.path.normpath(m.container_path)
        if path.split("/")[1:2] in (["tmp"], ["dev"], ["proc"]) or os.path.lexists(os.path.join(rootfs, path.lstrip("/"))):
            continue
        while path != "/" and not os.path.isdir(os.path.join(rootfs, path.lstrip("/"))):
            path = os.path.dirname(path)
        if path not in rebuilt:
            rebuilt.append(path)
    args: list[str] = []
    for d in sorted(rebuilt, key=lambda d: (d.count("/") if d != "/" else 0, d)):
        if d == "/":
            continue  # the root itself cannot be rebuilt under a read-only bind: such a volume stays unmountable
        host = os.path.join(rootfs, d.lstrip("/"))
        args += ["--tmpfs", d]
        for entry in sorted(os.listdir(host)):
            full, inside = os.path.join(host, entry), os.path.join(d, entry)
            if any(inside == r for r in rebuilt):
                continue
            if os.path.islink(full):
                args += ["--symlink", os.readlink(full), inside]
            elif os.path.isdir(full) or os.path.isfile(full):
                args += ["--ro-bind", full, inside]
    return args


def build_oci_launch(argv: Sequence[str], *, bwrap: str, rootfs: str, container_dir: str, mounts: Sequence[Mount], cwd: str,
                     hostname: str, status_fd: int, user: tuple[int, int] | None, overlay: str | bool,
                     cap_args: Sequence[str] = (), host_dev: bool = False) -> Launch:
    """``overlay``: :func:`overlay_mode`'s answer (``True`` means ``disk``; ``""`` for a
    ``readOnlyRootFilesystem``); ``cap_args``: bwrap's capability flags (:mod:`.security`);
    ``host_dev``: a privileged container's host /dev."""
    prefix: list[str] = []
    root = rootfs
    if overlay:
        upper, work, merged = overlay_dirs(container_dir)
        for d in (upper, work, merged):
            os.makedirs(d, exist_ok=True)
        unshare = shutil.which("unshare") or "unshare"
        script = _TMPFS_SCRIPT if overlay == "tmpfs" else _DISK_SCRIPT
        prefix = [unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh", rootfs, upper, work, merged]
        root = merged
    args = [bwrap, "--bind" if overlay else "--ro-bind", root, "/"]
    if not overlay:
        args += _rebuilt_for_mount_points(rootfs, mounts)
    args += [*dev_args(host_dev), "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]
    covered = {m.container_path.rstrip("/") for m in mounts}
    for host_file in ("/etc/resolv.conf", "/etc/hosts"):
        if host_file not in covered and os.path.isfile(host_file) and (overlay or os.path.lexists(os.path.join(rootfs, host_file[1:]))):
            args += ["--ro-bind", host_file, host_file]
    for m in sorted(mounts, key=lambda m: m.container_path.count("/")):
        if m.container_path in ("/dev", "/proc"):
            continue
        args += ["--ro-bind" if m.readonly else "--bind", m.host_path, m.container_path]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if hostname:
        args += ["--hostname", hostname[:63]]
    if user is not None:
        args += ["--unshare-user", "--uid", str(user[0]), "--gid", str(user[1])]
    else:
        args += list(cap_args)
    args += ["--json-status-fd", str(status_fd), "--chdir", cwd or "/", "--", *argv]
    return Launch([*prefix, *args], "/", True)
