"""A real OCI registry for tests, and small images built in Python.

:class:`Registry` runs Debian's ``docker-registry`` (distribution 2.8) on a
free loopback port with its storage in a temp dir, optionally behind
htpasswd basic auth (users hashed with ``htpasswd -B``, Debian's
apache2-utils). :meth:`Registry.push` uploads an :class:`OCIImage` with
the distribution API (monolithic blob uploads, then the manifest), as
skopeo would.

:func:`busybox_layer` makes a rootfs layer from the host's busybox-static
(``/bin/busybox`` plus applet symlinks), with files of the test's choosing
beside it — so a pod whose files are the image's can be told apart from one
that sees the host. :func:`image` assembles layers into an OCI manifest and
config (diff_ids, platform linux/<host arch>); :func:`index` wraps
manifests in an OCI index.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["Registry", "OCIImage", "busybox_layer", "tar_layer", "image", "BUSYBOX"]

BUSYBOX = shutil.which("busybox") or "/bin/busybox"
_APPLETS = ("sh", "cat", "echo", "ls", "sleep", "id", "env", "pwd", "true", "false", "test", "touch", "mkdir", "rm",
            "hostname", "ps", "wc", "head", "grep", "httpd", "nc", "wget", "mount", "readlink", "stat", "whoami")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Layer:
    tar: bytes
    gz: bytes
    media_type: str = LAYER_GZIP

    @property
    def diff_id(self) -> str:
        return _digest(self.tar)

    @property
    def blob(self) -> bytes:
        return self.gz if self.media_type.endswith("gzip") else self.tar


def tar_layer(entries: list[tuple[str, Any]], *, gzip_it: bool = True) -> Layer:
    """``entries``: (name, bytes) for files, (name, None) for dirs, (name, "->target") for symlinks,
    (name, tarfile.TarInfo) for anything else (taken as is, content empty)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in entries:
            if isinstance(content, tarfile.TarInfo):
                tar.addfile(content)
                continue
            info = tarfile.TarInfo(name)
            info.mtime = 1_700_000_000
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif isinstance(content, str) and content.startswith("->"):
                info.type, info.linkname = tarfile.SYMTYPE, content[2:]
                tar.addfile(info)
            else:
                data = content if isinstance(content, bytes) else str(content).encode()
                info.size, info.mode = len(data), 0o755 if name.startswith(("bin/", "usr/bin/")) else 0o644
                tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return Layer(raw, gzip.compress(raw, compresslevel=1, mtime=0), LAYER_GZIP if gzip_it else "application/vnd.oci.image.layer.v1.tar")


def busybox_layer(files: Mapping[str, bytes | str] | None = None, *, padding: int = 0) -> Layer:
    """busybox-static at /bin/busybox with applet links, /etc/passwd, and ``files``;
    ``padding`` bytes of random data in /pad (to make an image of a given size)."""
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    entries: list[tuple[str, Any]] = [("bin", None), ("etc", None), ("tmp", None), ("root", None), ("bin/busybox", bb)]
    entries += [(f"bin/{a}", "->busybox") for a in _APPLETS]
    entries += [("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
                               "app:x:1000:1000:app:/home/app:/bin/sh\n"),
                ("etc/group", "root:x:0:\nnobody:x:65534:\napp:x:1000:\n")]
    for name, data in (files or {}).items():
        entries.append((name, data if isinstance(data, bytes) else data.encode()))
    if padding:
        entries.append(("pad", os.urandom(padding)))
    return tar_layer(entries)


@dataclass
class OCIImage:
    layers: list[Layer]
    config: dict[str, Any]
    config_bytes: bytes = b""
    manifest_bytes: bytes = b""
    media_type: str = OCI_MANIFEST
    extra_blobs: dict[str, bytes] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return _digest(self.manifest_bytes)

    @property
    def id(self) -> str:
        return _digest(self.config_bytes)


def _arch() -> str:
    m = os.uname().machine
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(m, m)


def image(layers: list[Layer], *, entrypoint: list[str] | None = None, cmd: list[str] | None = None, env: list[str] | None = None,
          working_dir: str = "", user: str = "", arch: str = "", diff_ids: list[str] | None = None, docker: bool = False) -> OCIImage:
    """An image manifest over ``layers``: OCI media types, or Docker schema2 ones with ``docker``."""
    cfg: dict[str, Any] = {"Env": env if env is not None else ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
    if entrypoint is not None:
        cfg["Entrypoint"] = entrypoint
    if cmd is not None:
        cfg["Cmd"] = cmd
    if working_dir:
        cfg["WorkingDir"] = working_dir
    if user:
        cfg["User"] = user
    config = {"architecture": arch or _arch(), "os": "linux", "config": cfg,
              "rootfs": {"type": "layers", "diff_ids": diff_ids if diff_ids is not None else [l.diff_id for l in layers]}}
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest_type = DOCKER_MANIFEST if docker else OCI_MANIFEST
    manifest = {"schemaVersion": 2, "mediaType": manifest_type,
                "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG, "digest": _digest(config_bytes), "size": len(config_bytes)},
                "layers": [{"mediaType": DOCKER_LAYER if docker and l.media_type == LAYER_GZIP else l.media_type,
                            "digest": _digest(l.blob), "size": len(l.blob)} for l in layers]}
    return OCIImage(layers, config, config_bytes, json.dumps(manifest).encode(), manifest_type)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """``docker-registry serve`` on 127.0.0.1:<free port>; ``users`` turns on htpasswd auth."""

    def __init__(self, workdir: str, *, users: Mapping[str, str] | None = None, token_auth: bool = False) -> None:
        self.workdir = workdir
        self.users = dict(users or {})
        #: with ``token_auth`` the registry sends Bearer challenges answered by a TokenServer (else htpasswd)
        self.token_server: Any = None
        if token_auth:
            from tests.support.registry_token import TokenServer
            self.token_server = TokenServer(workdir, users=self.users)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> "Registry":
        os.makedirs(self.workdir, exist_ok=True)
        auth = ""
        if self.token_server is not None:
            auth = self.token_server.start().registry_config()
        elif self.users:
            htpasswd = os.path.join(self.workdir, "htpasswd")
            with open(htpasswd, "w") as f:
                for user, password in self.users.items():
                    f.write(subprocess.run(["htpasswd", "-Bbn", user, password], check=True, capture_output=True, text=True).stdout.strip() + "\n")
            auth = f"auth:\n  htpasswd:\n    realm: k8py-test\n    path: {htpasswd}\n"
        for _ in range(5):
            self.port = free_port()
            cfg = os.path.join(self.workdir, "config.yml")
            with open(cfg, "w") as f:
                f.write(f"version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n"
                        f"    rootdirectory: {self.workdir}/data\n  delete:\n    enabled: true\nhttp:\n  addr: {self.host}\n{auth}")
            log = open(os.path.join(self.workdir, "registry.log"), "ab")
            self.proc = subprocess.Popen(["docker-registry", "serve", cfg], stdout=log, stderr=log)
            log.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2).close()
                    return self
                except urllib.error.HTTPError as err:
                    if err.code == 401:
                        return self
                except OSError:
                    time.sleep(0.05)
            self.stop()  # the port was taken meanwhile, or it never answered: try another
        with open(os.path.join(self.workdir, "registry.log"), errors="replace") as f:
            raise RuntimeError("docker-registry did not start:\n" + f.read()[-2000:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        if self.token_server is not None:
            self.token_server.stop()

    def _req(self, method: str, url: str, data: bytes | None = None, headers: Mapping[str, str] | None = None,
             auth: tuple[str, str] | None = None) -> urllib.request.addinfourl:
        h = dict(headers or {})
        if auth is None and self.users:
            auth = next(iter(self.users.items()))
        if self.token_server is not None:
            repo = url.split("/v2/", 1)[1].split("/blobs/")[0].split("/manifests/")[0] if "/v2/" in url else ""
            h["Authorization"] = "Bearer " + self.token_server.token(auth[0] if auth else "", f"repository:{repo}:pull,push")
        elif auth:
            h["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req = urllib.request.Request(url if url.startswith("http") else f"http://{self.host}{url}", data=data, method=method, headers=h)
        return urllib.request.urlopen(req, timeout=30)

    def push_blob(self, repo: str, data: bytes) -> str:
        digest = _digest(data)
        with self._req("POST", f"/v2/{repo}/blobs/uploads/") as r:
            location = r.headers["Location"]
        sep = "&" if "?" in location else "?"
        with self._req("PUT", f"{location}{sep}digest={digest}", data, {"Content-Type": "application/octet-stream"}):
            pass
        return digest

    def push_manifest(self, repo: str, ref: str, body: bytes, media_type: str) -> None:
        with self._req("PUT", f"/v2/{repo}/manifests/{ref}", body, {"Content-Type": media_type}):
            pass

    def push(self, repo: str, tag: str, img: OCIImage) -> str:
        """Upload ``img`` as ``repo:tag``; returns ``<host>/<repo>:<tag>``."""
        for layer in img.layers:
            self.push_blob(repo, layer.blob)
        for blob in img.extra_blobs.values():
            self.push_blob(repo, blob)
        self.push_blob(repo, img.config_bytes)
        self.push_manifest(repo, tag, img.manifest_bytes, img.media_type)
        return f"{self.host}/{repo}:{tag}"

    def push_index(self, repo: str, tag: str, images: list[tuple[OCIImage, str]], *, docker: bool = False) -> str:
        """An OCI index (a Docker manifest list with ``docker``) over ``images`` (each with its
        architecture), pushed as ``repo:tag``."""
        manifests = []
        for img, arch in images:
            self.push(repo, img.digest.split(":", 1)[1][:20], img)
            manifests.append({"mediaType": img.media_type, "digest": img.digest, "size": len(img.manifest_bytes),
                              "platform": {"os": "linux", "architecture": arch}})
        kind = DOCKER_LIST if docker else OCI_INDEX
        body = json.dumps({"schemaVersion": 2, "mediaType": kind, "manifests": manifests}).encode()
        self.push_manifest(repo, tag, body, kind)
        return f"{self.host}/{repo}:{tag}"

    def __enter__(self) -> "Registry":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
