"""fsGroup: a pod's volumes owned by its group, as upstream's ``SetVolumeOwnership``.

For the volume kinds that support ownership management (emptyDir, configMap, secret,
downwardAPI, projected) every file and directory gets the group ``fsGroup``; files gain
group read (and write on a writable volume), directories also the setgid bit, so files a
container creates there stay in the group. The container's process has ``fsGroup`` among its
supplementary groups (:func:`k8py.kubelet.container_start._security`), which is what lets a
non-root ``runAsUser`` use the volume. hostPath volumes are never touched (as upstream).

Symlinks are not followed (the ``..data`` links of payload volumes point inside the volume,
which is walked anyway). Needs root to change the group; otherwise nothing is changed.
"""

from __future__ import annotations

import os
import stat

__all__ = ["set_volume_ownership", "fs_group_mode"]

_RW, _RO, _EXEC = 0o660, 0o440, 0o110


def fs_group_mode(mode: int, *, readonly: bool) -> int:
    """A file's mode once owned by the fsGroup (payload files are written with it)."""
    return mode | (_RO if readonly else _RW)


def set_volume_ownership(path: str, fs_group: int, *, readonly: bool) -> None:
    if os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files, None]:
            full = root if name is None else os.path.join(root, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                os.lchown(full, -1, fs_group)
                continue
            if name is not None and stat.S_ISDIR(st.st_mode):
                continue  # walked as its own root
            if st.st_gid != fs_group:
                os.chown(full, -1, fs_group)
            mode = fs_group_mode(stat.S_IMODE(st.st_mode), readonly=readonly)
            if stat.S_ISDIR(st.st_mode):
                mode |= stat.S_ISGID | _EXEC
            if mode != stat.S_IMODE(st.st_mode):
                os.chmod(full, mode)
