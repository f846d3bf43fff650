"""Lay out a pod's volumes and turn volumeMounts into runtime mounts.

Kinds: emptyDir (a directory; past its ``sizeLimit`` the pod is evicted, as
upstream's eviction manager does: :mod:`k8py.kubelet.eviction.local_storage`),
configMap and secret (keys, or ``items`` with ``path``/``mode``,
``defaultMode``; ``optional``), downwardAPI (``fieldRef`` and
``resourceFieldRef`` items), projected (any of those sources plus
``serviceAccountToken``: a TokenRequest bound to the pod, from the
:class:`~k8py.kubelet.token_manager.TokenManager`, refreshed when due; a
placeholder without one, as on simulated nodes), and hostPath (``DirectoryOrCreate``/``FileOrCreate`` create
it). With the pod's ``fsGroup`` every volume but hostPath is owned by that group
(:mod:`.ownership`). Payload volumes are written with the atomic ``..data`` swap and
re-projected at every sync, so a changed ConfigMap shows up in a running
pod on the next sync.

A required ConfigMap or Secret that does not exist raises
:class:`MountError` with upstream's message; the worker turns it into a
``FailedMount`` Event and keeps the pod ``ContainerCreating``.
"""

from __future__ import annotations

import base64
import os
import shutil
from typing import Any, Awaitable, Callable, Mapping

from k8py.api.errors import StatusError
from k8py.kubelet.container_env import ConfigError, field_value, resource_value
from k8py.kubelet.token_manager import TokenManager, TokenSource
from k8py.kubelet.runtime.protocols import Mount
from k8py.kubelet.volumes.atomic_writer import FileProjection, write_atomic
from k8py.kubelet.volumes.ownership import fs_group_mode, set_volume_ownership

__all__ = ["MountError", "VolumeManager"]

Getter = Callable[[str, str, str], Awaitable[dict[str, Any] | None]]


class MountError(Exception):
    def __init__(self, volume: str, message: str) -> None:
        super().__init__(f'MountVolume.SetUp failed for volume "{volume}" : {message}')
        self.volume = volume


def _kv(kind: str, obj: Mapping[str, Any]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    if kind == "secret":
        for k, v in (obj.get("data") or {}).items():
            out[k] = base64.b64decode(v)
        for k, v in (obj.get("stringData") or {}).items():
            out[k] = str(v).encode()
    else:
        for k, v in (obj.get("data") or {}).items():
            out[k] = str(v).encode()
        for k, v in (obj.get("binaryData") or {}).items():
            out[k] = base64.b64decode(v)
    return out


class VolumeManager:
    def __init__(self, pods_dir: str, *, get: Getter, node_alloc: Callable[[], Mapping[str, str]],
                 tokens: TokenManager | None = None) -> None:
        self.pods_dir = pods_dir
        self._get = get
        self._node_alloc = node_alloc
        self.tokens = tokens

    def pod_dir(self, uid: str) -> str:
        return os.path.join(self.pods_dir, uid)

    async def setup(self, pod: Mapping[str, Any], *, pod_ip: str, host_ip: str) -> dict[str, str]:
        """Lay out every volume; returns volume name -> host path."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ns, uid = meta.get("namespace", "default"), meta["uid"]
        paths: dict[str, str] = {}
        fs_group = (spec.get("securityContext") or {}).get("fsGroup")
        for vol in spec.get("volumes") or []:
            name = vol["name"]
            if "hostPath" in vol:
                hp = vol["hostPath"]
                path, kind = hp["path"], hp.get("type") or ""
                if kind == "DirectoryOrCreate":
                    os.makedirs(path, exist_ok=True)
                elif kind == "FileOrCreate" and not os.path.exists(path):
                    os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
                    open(path, "a").close()
                elif kind in ("Directory", "File", "Socket") and not os.path.exists(path):
                    raise MountError(name, f"hostPath type check failed: {path} is not a {kind.lower()}")
                paths[name] = path
                continue
            kind = next((k for k in ("emptyDir", "configMap", "secret", "downwardAPI", "projected") if k in vol), None)
            if kind is None:
                raise MountError(name, f"volume kind {sorted(set(vol) - {'name'})} is not supported by k8py's kubelet")
            target = os.path.join(self.pod_dir(uid), "volumes", f"kubernetes.io~{kind.lower()}", name)
            paths[name] = target
            if kind == "emptyDir":
                if not os.path.isdir(target):
                    os.makedirs(target)
                    os.chmod(target, 0o777)  # as upstream: any runAsUser can write it
                if fs_group is not None:
                    set_volume_ownership(target, fs_group, readonly=False)
                continue
            payload = await self._payload(name, kind, vol[kind], pod, ns, pod_ip=pod_ip, host_ip=host_ip)
            if payload is not None:
                if fs_group is not None:
                    payload = {p: FileProjection(f.data, fs_group_mode(f.mode, readonly=True)) for p, f in payload.items()}
                if write_atomic(target, payload) and fs_group is not None:
                    set_volume_ownership(target, fs_group, readonly=True)
            else:
                os.makedirs(target, exist_ok=True)
        return paths

    async def _source(self, volume: str, kind: str, src: Mapping[str, Any], ns: str, default_mode: int) -> dict[str, FileProjection] | None:
        name = src.get("name", "")
        obj = await self._get(kind, ns, name)
        if obj is None:
            if src.get("optional"):
                return {}
            raise MountError(volume, f'{kind} "{name}" not found')
        data = _kv(kind, obj)
        items = src.get("items")
        out: dict[str, FileProjection] = {}
        if items:
            for it in items:
                if it["key"] not in data:
                    if src.get("optional"):
                        continue
                    raise MountError(volume, f'configmap references non-existent config key: {it["key"]}' if kind == "configmap"
                                     else f'references non-existent secret key: {it["key"]}')
                out[it["path"]] = FileProjection(data[it["key"]], int(it.get("mode", default_mode)))
        else:
            for k, v in data.items():
                out[k] = FileProjection(v, default_mode)
        return out

    def _downward(self, items: list[Mapping[str, Any]], pod: Mapping[str, Any], default_mode: int, *, pod_ip: str, host_ip: str) -> dict[str, FileProjection]:
        out = {}
        for it in items:
            if "fieldRef" in it:
                value = field_value(pod, it["fieldRef"]["fieldPath"], pod_ip=pod_ip, host_ip=host_ip)
            else:
                ref = it["resourceFieldRef"]
                containers = (pod.get("spec") or {}).get("containers") or []
                target = next((c for c in containers if c["name"] == ref.get("containerName")), containers[0] if containers else {})
                value = resource_value(target, ref["resource"], ref.get("divisor"), node_alloc=self._node_alloc())
            out[it["path"]] = FileProjection(value.encode(), int(it.get("mode", default_mode)))
        return out

    async def _payload(self, volume: str, kind: str, src: Mapping[str, Any], pod: Mapping[str, Any], ns: str, *,
                       pod_ip: str, host_ip: str) -> dict[str, FileProjection] | None:
        mode = int(src.get("defaultMode", 0o644 if kind != "secret" else 0o644))
        try:
            if kind == "configMap":
                return await self._source(volume, "configmap", src, ns, mode)
            if kind == "secret":
                return await self._source(volume, "secret", {**src, "name": src.get("secretName", "")}, ns, mode)
            if kind == "downwardAPI":
                return self._downward(src.get("items") or [], pod, mode, pod_ip=pod_ip, host_ip=host_ip)
            out: dict[str, FileProjection] = {}
            for s in src.get("sources") or []:
                if "configMap" in s:
                    out.update(await self._source(volume, "configmap", s["configMap"], ns, mode) or {})
                elif "secret" in s:
                    out.update(await self._source(volume, "secret", s["secret"], ns, mode) or {})
                elif "downwardAPI" in s:
                    out.update(self._downward(s["downwardAPI"].get("items") or [], pod, mode, pod_ip=pod_ip, host_ip=host_ip))
                elif "serviceAccountToken" in s:
                    out[s["serviceAccountToken"].get("path", "token")] = FileProjection(
                        await self._token(pod, s["serviceAccountToken"]), mode)
            return out
        except ConfigError as err:
            raise MountError(volume, str(err)) from err

    async def _token(self, pod: Mapping[str, Any], source: Mapping[str, Any]) -> bytes:
        if self.tokens is None:
            return b"k8py-placeholder-token"
        try:
            return (await self.tokens.token(TokenSource.of(pod, source))).encode()
        except (StatusError, OSError) as err:
            raise ConfigError(f"failed to fetch token: {getattr(err, 'message', None) or err}") from err

    @staticmethod
    def mounts(container: Mapping[str, Any], paths: Mapping[str, str]) -> list[Mount]:
        out = []
        for vm in container.get("volumeMounts") or []:
            host = paths.get(vm["name"])
            if host is None:
                raise MountError(vm["name"], f'volume "{vm["name"]}" is not defined in the pod spec')
            sub = vm.get("subPath") or ""
            if sub:
                if sub.startswith("/") or ".." in sub.split("/"):
                    raise MountError(vm["name"], f"invalid subPath {sub!r}")
                host = os.path.join(host, sub)
                if not os.path.exists(host):
                    os.makedirs(host, exist_ok=True)
            out.append(Mount(vm["mountPath"], host, bool(vm.get("readOnly")), vm["name"]))
        return out

    def cleanup(self, uid: str) -> None:
        if self.tokens is not None:
            self.tokens.forget_pod(uid)
        shutil.rmtree(self.pod_dir(uid), ignore_errors=True)
