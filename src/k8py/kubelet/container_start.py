"""Starting one container: back-off, image, config, create, start, postStart.

Upstream's ``startContainer`` and ``EnsureImageExists``, with their waiting
reasons and Events:

- restart back-off → waiting ``CrashLoopBackOff``, Event ``BackOff``;
- image: ``imagePullPolicy`` (default ``Always`` for ``:latest`` or no tag,
  else ``IfNotPresent``) → Events ``Pulling``/``Pulled`` (or "already
  present"), failures ``ErrImagePull`` then ``ImagePullBackOff`` (back-off
  between pulls), ``ErrImageNeverPull``, ``InvalidImageName``;
- config (env, mounts) → ``CreateContainerConfigError``;
- create → Event ``Created``; start → Event ``Started``, or
  ``RunContainerError`` (then CrashLoopBackOff on the next tries);
- postStart: the container is not reported started until its hook ran;
  a failed hook kills it (Event ``FailedPostStartHook``).

:func:`start_container` returns None on success, or the seconds after
which the worker should try again.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any, Mapping

from k8py.kubelet.container_env import ConfigError, build_env, expand
from k8py.kubelet.dns_config import resolv_conf, resolv_conf_mount, write_resolv_conf
from k8py.kubelet.pod_status import ts
from k8py.kubelet.pull_credentials import credentials_for, node_credential_paths
from k8py.kubelet.runtime.protocols import ContainerConfig, ContainerState, ContainerStatus, ImageSpec, Mount, Resources, RuntimeErrorStatus
from k8py.kubelet.volumes.manager import MountError, VolumeManager

if TYPE_CHECKING:
    from k8py.kubelet.pod_sync import PodSyncer
    from k8py.kubelet.pod_workers import PodWorker

__all__ = ["start_container", "next_attempt", "pull_policy", "format_duration", "RESTART_COUNT_ANNOTATION"]

#: upstream's annotation on every container it creates: the run's restart count (what crictl shows)
RESTART_COUNT_ANNOTATION = "io.kubernetes.container.restartCount"
#: a container's log files, ``<restart count>.log`` and its rotations (``.<YYYYMMDD-HHMMSS>``, upstream's ``.gz``)
_LOG_NAME = re.compile(r"^(\d+)\.log(\.\d{8}-\d{6}(\.\d+)?(\.gz)?|\.\d+\.gz)?$")


def pull_policy(container: Mapping[str, Any]) -> str:
    if container.get("imagePullPolicy"):
        return str(container["imagePullPolicy"])
    image = container.get("image", "")
    ref = image.split("@", 1)[0]
    tag = ref.rsplit("/", 1)[-1].partition(":")[2]
    return "Always" if "@" not in image and (not tag or tag == "latest") else "IfNotPresent"


def format_duration(seconds: float) -> str:
    """Go's Duration.String for whole and fractional seconds (``10s``, ``2m40s``, ``500ms``)."""
    if seconds < 1:
        return f"{int(seconds * 1000)}ms"
    m, s = divmod(seconds, 60)
    s_str = f"{s:g}s"
    if m >= 60:
        h, m = divmod(m, 60)
        return f"{int(h)}h{int(m)}m{s_str}"
    return f"{int(m)}m{s_str}" if m else s_str


def _pod_ref(pod: Mapping[str, Any]) -> str:
    m = pod["metadata"]
    return f"{m['name']}_{m.get('namespace', 'default')}({m['uid']})"


def _quantity_bytes(q: str) -> int:
    from k8py.kubelet.config import parse_quantity_bytes
    return parse_quantity_bytes(q)


def _resources(c: Mapping[str, Any]) -> Resources:
    lim = (c.get("resources") or {}).get("limits") or {}
    mem = _quantity_bytes(str(lim["memory"])) if "memory" in lim else 0
    cpu = 0
    if "cpu" in lim:
        q = str(lim["cpu"])
        cpu = int(q[:-1]) * 100 if q.endswith("m") else int(float(q) * 100_000)
    req = (c.get("resources") or {}).get("requests") or {}
    # cpu.shares from the request (a limit alone defaults the request to it, as the API does)
    cpu_req = req.get("cpu", lim.get("cpu"))
    from k8py.kubelet.cgroups.qos import milli_cpu, shares

    return Resources(cpu_quota=cpu, memory_limit=mem, cpu_shares=shares(milli_cpu(cpu_req)) if cpu_req is not None else 2)


def _security(pod: Mapping[str, Any], c: Mapping[str, Any]) -> dict[str, Any]:
    """The effective securityContext as upstream's ``determineEffectiveSecurityContext``: the
    container's runAsUser/runAsGroup/runAsNonRoot over the pod's; the pod's supplementalGroups
    plus its fsGroup; capabilities, privileged, readOnlyRootFilesystem and
    allowPrivilegeEscalation (no_new_privs only when it is false) from the container's."""
    pod_sc = (pod.get("spec") or {}).get("securityContext") or {}
    own = {k: v for k, v in (c.get("securityContext") or {}).items() if v is not None}
    sc = {**pod_sc, **own}
    groups = [int(g) for g in pod_sc.get("supplementalGroups") or []]
    if pod_sc.get("fsGroup") is not None:
        groups.append(int(pod_sc["fsGroup"]))
    caps = own.get("capabilities") or {}
    return {"run_as_user": sc.get("runAsUser"), "run_as_group": sc.get("runAsGroup"), "run_as_non_root": bool(sc.get("runAsNonRoot")),
            "supplemental_groups": groups, "capabilities_add": list(caps.get("add") or []), "capabilities_drop": list(caps.get("drop") or []),
            "privileged": bool(own.get("privileged")), "readonly_rootfs": bool(own.get("readOnlyRootFilesystem")),
            "no_new_privs": own.get("allowPrivilegeEscalation") is False}


async def ensure_image(s: PodSyncer, w: PodWorker, c: Mapping[str, Any]) -> float | None:
    pod, name, image = w.pod, c["name"], c.get("image", "")
    key = f"{w.uid}/{name}/image"
    now = time.time()
    policy = pull_policy(c)
    try:
        present = await s.runtime.image_status(ImageSpec(image))
    except RuntimeErrorStatus as err:
        w.waiting[name] = (err.reason, err.message)
        s.event(pod, "Warning", "InspectFailed", err.message)
        return None if err.reason == "InvalidImageName" else s.config.backoff_base
    if policy == "Never" and present is None:
        msg = f'Container image "{image}" is not present with pull policy of Never'
        w.waiting[name] = ("ErrImageNeverPull", msg)
        s.event(pod, "Warning", "ErrImageNeverPull", msg)
        return None
    if present is not None and policy != "Always":
        if not w.memo.get(f"present-{name}"):
            s.event(pod, "Normal", "Pulled", f'Container image "{image}" already present on machine')
            w.memo[f"present-{name}"] = True
        return None
    last_fail = w.memo.get(f"pullfail-{name}")
    if last_fail is not None and s.backoff.in_backoff_since(key, last_fail, now):
        w.waiting[name] = ("ImagePullBackOff", f'Back-off pulling image "{image}"')
        s.event(pod, "Normal", "BackOff", f'Back-off pulling image "{image}"')
        return s.backoff.remaining(key, last_fail, now) + 0.01
    auth, missing = await credentials_for(pod, image, get_object=s.get_object,
                                          node_paths=node_credential_paths(s.config.root_dir, s.config.image_credentials))
    if missing:
        s.event(pod, "Warning", "FailedToRetrieveImagePullSecret", f"Unable to retrieve some image pull secrets ({', '.join(missing)}); "
                "attempting to pull the image may not succeed.")
    s.event(pod, "Normal", "Pulling", f'Pulling image "{image}"')
    started = time.monotonic()
    try:
        await s.runtime.pull_image(ImageSpec(image, auth=auth))
    except RuntimeErrorStatus as err:
        if err.reason == "InvalidImageName":
            w.waiting[name] = ("InvalidImageName", err.message)
            s.event(pod, "Warning", "InspectFailed", err.message)
            s.event(pod, "Warning", "Failed", "Error: InvalidImageName")
            return None
        w.waiting[name] = ("ErrImagePull", err.message)
        s.event(pod, "Warning", "Failed", f'Failed to pull image "{image}": {err.message}')
        s.event(pod, "Warning", "Failed", "Error: ErrImagePull")
        w.memo[f"pullfail-{name}"] = now
        return s.backoff.next(key, now) + 0.01
    took = format_duration(time.monotonic() - started)
    info = await s.runtime.image_status(ImageSpec(image))
    size = info.size if info else 0
    s.event(pod, "Normal", "Pulled", f'Successfully pulled image "{image}" in {took} ({took} including waiting). Image size: {size} bytes.')
    w.memo.pop(f"pullfail-{name}", None)
    s.backoff.reset(key)
    return None


def _termination_log(s: PodSyncer, w: PodWorker, c: Mapping[str, Any], attempt: int) -> Mount:
    """A host file shown at terminationMessagePath (upstream bind-mounts one the same way)."""
    host = os.path.join(s.volumes.pod_dir(w.uid), "containers", c["name"], str(attempt))
    os.makedirs(os.path.dirname(host), exist_ok=True)
    open(host, "wb").close()
    os.chmod(host, 0o666)  # as upstream: a container running as any user can write its message
    w.memo[f"termlog-{c['name']}-{attempt}"] = host
    return Mount(c.get("terminationMessagePath") or "/dev/termination-log", host, False, "termination-log")


async def _env_and_mounts(s: PodSyncer, w: PodWorker, c: Mapping[str, Any], volume_paths: Mapping[str, str],
                          pod_ip: str) -> tuple[dict[str, str], list[Any]]:
    env = await build_env(w.pod, c, get=s.get_object, services=s.services(), pod_ip=pod_ip, host_ip=s.config.address,
                          node_alloc=s.node_allocatable())
    return env, VolumeManager.mounts(c, volume_paths) + _dns_mounts(s, w)


def _dns_mounts(s: PodSyncer, w: PodWorker) -> list[Mount]:
    """The pod's resolv.conf (see :mod:`k8py.kubelet.dns_config`), when the kubelet has a
    cluster DNS or the pod asks for its own; otherwise the host's file shows through."""
    spec = w.pod.get("spec") or {}
    if not s.config.cluster_dns and spec.get("dnsPolicy") != "None" and not spec.get("dnsConfig"):
        return []
    text, warning = resolv_conf(w.pod, cluster_dns=s.config.cluster_dns, cluster_domain=s.config.cluster_domain,
                                host_resolv_conf=s.config.resolv_conf)
    if warning and not w.memo.get("dns-warned"):
        s.event(w.pod, "Warning", "MissingClusterDNS", warning)
        w.memo["dns-warned"] = True
    return [resolv_conf_mount(write_resolv_conf(s.volumes.pod_dir(w.uid), text))]


def next_attempt(previous: ContainerStatus | None, log_directory: str, name: str) -> int:
    """The restart count of a container's next run, as upstream's ``startContainer`` counts it.

    One more than the previous run's (in this sandbox, or the last one in the pod's dead sandboxes that
    the worker kept); with none known (a new kubelet finding the pod's sandbox gone), one more than the
    highest ``<n>.log`` (or rotated ``<n>.log.<stamp>``) in the container's log directory, which outlives
    sandboxes (upstream's ``calcRestartCountByLogDir``); 0 for a first run."""
    if previous is not None:
        return previous.attempt + 1
    try:
        names = os.listdir(os.path.join(log_directory, name))
    except OSError:
        return 0
    counts = [int(m.group(1)) for m in (_LOG_NAME.match(n) for n in names) if m]
    return max(counts) + 1 if counts else 0


async def start_container(s: PodSyncer, w: PodWorker, c: Mapping[str, Any], latest: ContainerStatus | None,
                          volume_paths: Mapping[str, str], pod_ip: str) -> float | None:
    pod, name = w.pod, c["name"]
    now = time.time()
    key = f"{w.uid}/{name}"
    # the previous run: in this sandbox, or the last one in the pod's dead sandboxes (upstream's pod status has
    # both; the back-off and the count go on across sandboxes)
    previous = latest or (w.memo.get("carried") or {}).get(name)
    if previous is not None:
        if previous.started_at and previous.finished_at - previous.started_at >= s.config.backoff_reset:
            s.backoff.reset(key)
        if s.backoff.in_backoff_since(key, previous.finished_at, now):
            delay = s.backoff.get(key)
            w.waiting[name] = ("CrashLoopBackOff", f"back-off {format_duration(delay)} restarting failed container={name} pod={_pod_ref(pod)}")
            if w.memo.get(f"backoff-event-{name}") != previous.id:
                s.event(pod, "Warning", "BackOff", f"Back-off restarting failed container {name} in pod {_pod_ref(pod)}")
                w.memo[f"backoff-event-{name}"] = previous.id
            return s.backoff.remaining(key, previous.finished_at, now) + 0.01
        s.backoff.next(key, now)
    retry = await ensure_image(s, w, c)
    if name in w.waiting and w.waiting[name][0] in ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "InspectFailed"):
        return retry
    try:
        if s.config.simulated:  # no process will read it: spare the API server the lookups
            env: dict[str, str] = {e["name"]: str(e.get("value", "")) for e in c.get("env") or [] if "value" in e}
            mounts = []
        else:
            env, mounts = await _env_and_mounts(s, w, c, volume_paths, pod_ip)
    except (ConfigError, MountError) as err:
        w.waiting[name] = ("CreateContainerConfigError", str(err))
        s.event(pod, "Warning", "Failed", f"Error: {err}")
        return 2.0
    attempt = next_attempt(previous, s.sandbox_config(w).log_directory, name)
    if not s.config.simulated:
        mounts.append(_termination_log(s, w, c, attempt))
    meta = pod["metadata"]
    target_id = ""
    if c.get("targetContainerName"):  # an ephemeral container joining another's process namespace (kubectl debug --target)
        running = [cs for cs in await s.runtime.list_containers(w.sandbox_id)
                   if cs.name == c["targetContainerName"] and cs.state is ContainerState.RUNNING]
        if not running:
            w.waiting[name] = ("CreateContainerError", f'target container "{c["targetContainerName"]}" is not running')
            return 2.0
        target_id = max(running, key=lambda cs: cs.attempt).id
    config = ContainerConfig(
        name=name, image=c.get("image", ""), attempt=attempt,
        command=[expand(x, env) for x in c.get("command") or []], args=[expand(x, env) for x in c.get("args") or []],
        working_dir=c.get("workingDir") or "", env=list(env.items()), mounts=mounts,
        labels={"io.kubernetes.container.name": name, "io.kubernetes.pod.name": meta["name"],
                "io.kubernetes.pod.namespace": meta.get("namespace", "default"), "io.kubernetes.pod.uid": w.uid},
        annotations={RESTART_COUNT_ANNOTATION: str(attempt)},
        log_path=f"{name}/{attempt}.log", stdin=bool(c.get("stdin")), stdin_once=bool(c.get("stdinOnce")), tty=bool(c.get("tty")),
        resources=_resources(c), target_container_id=target_id, **_security(pod, c),
    )
    try:
        cid = await s.runtime.create_container(w.sandbox_id, config, s.sandbox_config(w))
    except RuntimeErrorStatus as err:
        w.waiting[name] = (err.reason if err.reason == "CreateContainerConfigError" else "CreateContainerError", err.message)
        s.event(pod, "Warning", "Failed", f"Error: {err.message}")
        return 2.0
    s.event(pod, "Normal", "Created", f"Created container: {name}")
    try:
        await s.runtime.start_container(cid)
    except RuntimeErrorStatus as err:
        s.metrics.start_errors.labels(code="RunContainerError").inc()
        w.waiting[name] = ("RunContainerError", err.message)
        s.event(pod, "Warning", "Failed", f"Error: {err.message}")
        return 0.05
    w.waiting.pop(name, None)
    s.metrics.started.inc()
    s.event(pod, "Normal", "Started", f"Started container {name}")
    w.memo[f"started-at-{name}"] = ts(now)
    await s.after_start(w, c, cid, pod_ip)
    await s.prune(w, name, keep={cid} | ({latest.id} if latest else set()))
    return None
