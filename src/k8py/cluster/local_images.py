"""The images a containerd node needs without a registry: the sandbox ("pause") image and busybox.

These machines cannot reach registry.k8s.io or Docker Hub, and containerd
will not start a pod without its sandbox image. So ``k8py up --runtime
containerd`` builds two small images from the host's busybox-static, writes
them as one OCI image-layout archive and imports it into containerd's
``k8s.io`` namespace (the one its CRI plugin serves) with Debian's ``ctr``,
as ``kind load`` does:

- :data:`PAUSE_IMAGE` (``localhost/k8py/pause:1``): ``/bin/sleep`` forever,
  the process that holds a pod's namespaces (upstream's pause does the same
  with a smaller binary);
- :data:`BUSYBOX_IMAGE` (``docker.io/library/busybox:1.35``): busybox 1.35
  (the host's Debian busybox-static) at ``/bin`` with its applets linked, an
  ``/etc/passwd``; ``image: busybox:1.35`` in a pod spec names it. A pod
  that says ``busybox`` or ``busybox:latest`` gets imagePullPolicy ``Always``
  and so a pull from Docker Hub, as upstream; use the tag (or
  ``imagePullPolicy: IfNotPresent``), as with kind.

Invariants: the archive is a pure function of the busybox binary (fixed
mtimes, sorted JSON, gzip without a timestamp), so the same host yields the
same digests and a second import is a no-op for containerd.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from typing import Any

__all__ = ["PAUSE_IMAGE", "BUSYBOX_IMAGE", "BUSYBOX", "build_archive", "import_images", "LocalImageError"]

PAUSE_IMAGE = "localhost/k8py/pause:1"
BUSYBOX_IMAGE = "docker.io/library/busybox:1.35"
BUSYBOX = "/bin/busybox"
#: the applets the busybox image links (what pods and probes commonly run)
APPLETS = ("sh", "ash", "cat", "echo", "ls", "sleep", "id", "env", "pwd", "true", "false", "test", "touch", "mkdir",
           "rm", "cp", "mv", "ln", "hostname", "ps", "wc", "head", "tail", "grep", "sed", "awk", "httpd", "nc", "wget",
           "mount", "readlink", "stat", "whoami", "date", "kill", "nslookup", "ping", "ip", "ifconfig", "netstat",
           "seq", "tr", "cut", "sort", "uniq", "dd", "chmod", "chown", "find", "xargs", "timeout", "tee", "uname",
           "printf", "expr", "basename", "dirname", "yes", "vi", "top", "free", "df", "du", "tar", "gzip", "nproc")
_MTIME = 1_700_000_000
_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


class LocalImageError(RuntimeError):
    """The images could not be built or imported; the message says what to install or check."""


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _arch() -> str:
    machine = os.uname().machine
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _rootfs_layer(busybox: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(name: str, *, data: bytes | None = None, link: str = "", mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.mtime, info.mode = _MTIME, mode
            if link:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        for d in ("bin", "etc", "tmp", "root", "proc", "sys", "dev", "var", "home"):
            add(d, mode=0o1777 if d == "tmp" else 0o755)
        add("bin/busybox", data=busybox)
        for applet in APPLETS:
            add(f"bin/{applet}", link="busybox")
        add("etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n", mode=0o644)
        add("etc/group", data=b"root:x:0:\nnobody:x:65534:\n", mode=0o644)
    return buf.getvalue()


def build_archive(path: str, *, busybox_path: str = BUSYBOX) -> list[str]:
    """Write the OCI image-layout archive of both images to ``path``; returns their names."""
    try:
        with open(busybox_path, "rb") as f:
            busybox = f.read()
    except OSError as err:
        raise LocalImageError(f"cannot read {busybox_path} ({err.strerror}): the local images are built from "
                              "Debian's busybox-static (apt-get install busybox-static)") from err
    layer_tar = _rootfs_layer(busybox)
    layer = gzip.compress(layer_tar, compresslevel=6, mtime=0)
    blobs: dict[str, bytes] = {_digest(layer): layer}
    env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    manifests: list[dict[str, Any]] = []
    for name, cfg in ((PAUSE_IMAGE, {"Env": env, "Entrypoint": ["/bin/sleep", "2147483647"]}),
                      (BUSYBOX_IMAGE, {"Env": env, "Cmd": ["sh"]})):
        config = json.dumps({"architecture": _arch(), "os": "linux", "config": cfg, "created": "2023-11-14T22:13:20Z",
                             "rootfs": {"type": "layers", "diff_ids": [_digest(layer_tar)]}}, sort_keys=True).encode()
        manifest = json.dumps({"schemaVersion": 2, "mediaType": _OCI_MANIFEST,
                               "config": {"mediaType": _OCI_CONFIG, "digest": _digest(config), "size": len(config)},
                               "layers": [{"mediaType": _LAYER, "digest": _digest(layer), "size": len(layer)}]},
                              sort_keys=True).encode()
        blobs[_digest(config)] = config
        blobs[_digest(manifest)] = manifest
        manifests.append({"mediaType": _OCI_MANIFEST, "digest": _digest(manifest), "size": len(manifest),
                          "platform": {"architecture": _arch(), "os": "linux"},
                          # ctr reads the full name from the first, other tools the tag from the second
                          "annotations": {"io.containerd.image.name": name,
                                          "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}})
    index = json.dumps({"schemaVersion": 2, "mediaType": _OCI_INDEX, "manifests": manifests}, sort_keys=True).encode()
    with tarfile.open(path, "w") as tar:
        def put(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), _MTIME, 0o644
            tar.addfile(info, io.BytesIO(data))
        put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        put("index.json", index)
        for digest, data in sorted(blobs.items()):
            put(f"blobs/sha256/{digest.split(':', 1)[1]}", data)
    return [PAUSE_IMAGE, BUSYBOX_IMAGE]


def import_images(socket: str, archive: str, *, timeout: float = 120.0) -> None:
    """``ctr -n k8s.io images import`` of ``archive`` into the containerd at ``socket`` (unpacked for overlayfs)."""
    ctr = shutil.which("ctr")
    if ctr is None:
        raise LocalImageError("ctr is not on PATH: it comes with Debian's containerd (apt-get install containerd)")
    try:
        done = subprocess.run([ctr, "--address", socket, "-n", "k8s.io", "images", "import", "--snapshotter", "overlayfs", archive],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        raise LocalImageError(f"ctr images import took more than {timeout:.0f}s (is containerd at {socket} stuck?)") from err
    if done.returncode != 0:
        raise LocalImageError(f"ctr images import {archive} failed: {(done.stderr or done.stdout).strip()}")
