"""What a created container of the process runtime is: its record.

:func:`new_record` turns a CRI ``ContainerConfig`` into the record the runtime keeps in memory
and on disk (:mod:`.records`): the argv, environment and working directory resolved from the
image (a pulled one through :mod:`.oci_container`, a catalog one through :mod:`.images`), the
mounts, the resources and the securityContext (:mod:`.security`) as the launch will apply it,
plus the ids, times and state the status is made from. Everything a restarted kubelet needs
to adopt, signal or exec into the container is in it; nothing here starts a process.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Any, Mapping

import k8py
from k8py.kubelet.runtime.process import launcher, oci_container, security
from k8py.kubelet.runtime.process.image_service import ProcessImages
from k8py.kubelet.runtime.process.images import ImageCatalog
from k8py.kubelet.runtime.protocols import ContainerConfig, ContainerState, ContainerStatus, PodSandboxConfig, RuntimeErrorStatus

__all__ = ["new_record", "status_of", "add_image_dirs"]

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(k8py.__file__)))


def new_record(images: ProcessImages, catalog: ImageCatalog, config: ContainerConfig, sandbox: PodSandboxConfig,
               sb: Mapping[str, Any], *, bwrap: bool) -> dict[str, Any]:
    hostname = sandbox.hostname or sandbox.name
    oci = oci_container.prepare(images, config, hostname=hostname, bwrap=bwrap)
    if oci is not None:
        argv, env, cwd, image_ref = oci["argv"], oci["env"], oci["cwd"], oci["image_ref"]
        user = tuple(oci["user"]) if oci["user"] else None
    else:
        recipe = catalog.resolve(config.image)
        argv = recipe.argv(config.command, config.args)
        if not argv:
            raise RuntimeErrorStatus("CreateContainerError", "no command specified: the image has no entrypoint and the container no command")
        if config.run_as_non_root and (config.run_as_user is None or config.run_as_user == 0):
            pod = f"{config.labels.get('io.kubernetes.pod.name', '')}_{config.labels.get('io.kubernetes.pod.namespace', '')}"
            raise RuntimeErrorStatus("CreateContainerConfigError", f'container has runAsNonRoot and image will run as root '
                                     f'(pod: "{pod}({config.labels.get("io.kubernetes.pod.uid", "")})", container: {config.name})')
        env = {"PATH": launcher.DEFAULT_PATH, "HOSTNAME": hostname, "HOME": "/root" if not config.run_as_user else "/"}
        env.update({k: v.replace("{pod_ip}", sb["ip"]) for k, v in recipe.env.items()})
        if recipe.name == "nginx":
            env.update({"NGINX_LISTEN_ADDRESS": sb["ip"], "PYTHONPATH": _PKG_PARENT})
        env.update(dict(config.env))
        cwd, image_ref, user = config.working_dir or recipe.working_dir, catalog.image_for(config.image).id, None
    sec = security.security_for(config, oci_user=user)
    # a catalog container runs the host's setpriv inside bwrap; a pulled image has none (bwrap's flags then)
    setpriv = [] if oci is not None else security.setpriv_argv(sec, bwrapped=bwrap)
    cid = secrets.token_hex(32)
    return {
        "id": cid, "sandbox_id": sb["id"], "pod_uid": sandbox.uid, "name": config.name, "attempt": config.attempt,
        "image": config.image, "image_ref": image_ref, "state": ContainerState.CREATED.value,
        "created_at": time.time(), "started_at": 0.0, "finished_at": 0.0, "exit_code": 0, "reason": "", "message": "",
        "labels": dict(config.labels), "annotations": dict(config.annotations),
        "log_path": os.path.join(sandbox.log_directory, config.log_path), "pid": 0, "ns_init": 0, "start_ticks": 0,
        # a container joining its target's pid namespace is signalled as a process group (see launcher.build_launch)
        "bwrap": bwrap and not (config.target_container_id and oci is None), "argv": argv, "env": env, "cwd": cwd,
        "mounts": [[m.container_path, m.host_path, m.readonly] for m in config.mounts], "stdin": config.stdin,
        "stdin_once": config.stdin_once, "tty": config.tty,
        "hostname": hostname, "cgroups": [],
        "resources": [config.resources.cpu_quota, config.resources.cpu_period, config.resources.memory_limit, config.resources.cpu_shares],
        "security": sec.to_record(), "setpriv": setpriv, "target": config.target_container_id,
        **({"rootfs": oci["rootfs"], "user": oci["user"], "image_id": oci["image_id"]} if oci is not None else {}),
    }


def status_of(rec: Mapping[str, Any]) -> ContainerStatus:
    return ContainerStatus(
        id=rec["id"], sandbox_id=rec["sandbox_id"], name=rec["name"], attempt=rec["attempt"], state=ContainerState(rec["state"]),
        image=rec["image"], image_ref=rec["image_ref"], created_at=rec["created_at"], started_at=rec["started_at"],
        finished_at=rec["finished_at"], exit_code=rec["exit_code"], reason=rec["reason"], message=rec["message"],
        labels=rec["labels"], annotations=rec["annotations"], log_path=rec["log_path"], pid=rec["pid"])


def add_image_dirs(rec: dict[str, Any], layer: str, image_dirs: Mapping[str, Mapping[str, bytes]]) -> None:
    """The directories a catalog image ships (nginx's docroot), each a writable copy under
    ``layer``, the container's own directory (removed with it), mounted at its path in the
    record unless a volume is mounted there."""
    mounted = {m[0] for m in rec["mounts"]}
    for path, files in image_dirs.items():
        if path in mounted:
            continue
        host = os.path.join(layer, path.lstrip("/"))
        os.makedirs(host, exist_ok=True)
        for name, content in files.items():
            with open(os.path.join(host, name), "wb") as f:
                f.write(content)
        rec["mounts"].append([path, host, False])
