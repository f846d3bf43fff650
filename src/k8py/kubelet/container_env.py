"""A container's environment and argv, as upstream's ``makeEnvironmentVariables``.

Order and precedence (later wins): the Service variables of the pod's
namespace (``enableServiceLinks``, default true; ``KUBERNETES_SERVICE_*``
always, from the ``kubernetes`` Service in ``default``), then ``envFrom``
sources in order (ConfigMaps and Secrets, with ``prefix``), then ``env``
entries in order. ``env`` values expand ``$(VAR)`` from what is defined
before them (``$$`` escapes); ``valueFrom`` reads ``fieldRef`` (the downward
API), ``resourceFieldRef``, ``configMapKeyRef`` and ``secretKeyRef``.
``command`` and ``args`` expand ``$(VAR)`` from the final environment.

A missing required ConfigMap, Secret or key raises :class:`ConfigError`,
which the worker shows as ``CreateContainerConfigError`` with upstream's
message (``configmap "x" not found``); an ``optional`` one is skipped.
"""

from __future__ import annotations

import base64
import math
import re
from typing import Any, Awaitable, Callable, Mapping, Sequence

__all__ = ["ConfigError", "expand", "build_env", "service_env", "field_value", "resource_value"]

Getter = Callable[[str, str, str], Awaitable[dict[str, Any] | None]]

_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class ConfigError(Exception):
    pass


def expand(value: str, env: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)
    return _VAR.sub(sub, value)


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def service_env(services: Sequence[Mapping[str, Any]], namespace: str, *, links: bool) -> dict[str, str]:
    env: dict[str, str] = {}
    for svc in services:
        meta, spec = svc.get("metadata") or {}, svc.get("spec") or {}
        ip = spec.get("clusterIP")
        if not ip or ip == "None":
            continue
        is_master = meta.get("namespace") == "default" and meta.get("name") == "kubernetes"
        if meta.get("namespace") != namespace and not is_master:
            continue
        if not links and not is_master:
            continue
        prefix = _env_name(meta["name"])
        ports = spec.get("ports") or []
        env[f"{prefix}_SERVICE_HOST"] = ip
        if ports:
            env[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
        for p in ports:
            if p.get("name"):
                env[f"{prefix}_SERVICE_PORT_{_env_name(p['name'])}"] = str(p["port"])
        if ports:
            first = ports[0]
            proto = (first.get("protocol") or "TCP")
            env[f"{prefix}_PORT"] = f"{proto.lower()}://{ip}:{first['port']}"
        for p in ports:
            proto = (p.get("protocol") or "TCP")
            base = f"{prefix}_PORT_{p['port']}_{proto.upper()}"
            env[base] = f"{proto.lower()}://{ip}:{p['port']}"
            env[f"{base}_PROTO"] = proto.lower()
            env[f"{base}_PORT"] = str(p["port"])
            env[f"{base}_ADDR"] = ip
    return env


def field_value(pod: Mapping[str, Any], path: str, *, pod_ip: str, host_ip: str) -> str:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", ""), "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""), "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": host_ip, "status.hostIPs": host_ip, "status.podIP": pod_ip, "status.podIPs": pod_ip,
    }
    if path in simple:
        return str(simple[path])
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    raise ConfigError(f'unsupported fieldRef fieldPath "{path}"')


def _quantity(q: str) -> float:
    units = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    for suffix in sorted(units, key=len, reverse=True):
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * units[suffix]
    return float(q)


def resource_value(container: Mapping[str, Any], resource: str, divisor: str | None, *, node_alloc: Mapping[str, str]) -> str:
    kind, _, name = resource.partition(".")
    res = (container.get("resources") or {})
    value = (res.get(kind) or {}).get(name)
    if value is None and kind == "limits":
        value = node_alloc.get(name, "0")
    if value is None:
        value = "0"
    div = _quantity(divisor or ("1" if name != "cpu" else "1"))
    return str(int(math.ceil(_quantity(str(value)) / div)))


async def build_env(pod: Mapping[str, Any], container: Mapping[str, Any], *, get: Getter, services: Sequence[Mapping[str, Any]],
                    pod_ip: str, host_ip: str, node_alloc: Mapping[str, str]) -> dict[str, str]:
    """The container's final environment (see the module docstring)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    ns = meta.get("namespace", "default")
    env = service_env(services, ns, links=spec.get("enableServiceLinks", True) is not False)
    for src in container.get("envFrom") or []:
        prefix = src.get("prefix") or ""
        for kind, key in (("configmap", "configMapRef"), ("secret", "secretRef")):
            ref = src.get(key)
            if not ref:
                continue
            source = await _source_data(get, kind, ns, ref)
            if source is None:
                continue
            for k, v in source.items():
                env[prefix + k] = v
    for item in container.get("env") or []:
        name = item["name"]
        if "valueFrom" not in item:
            env[name] = expand(str(item.get("value", "")), env)
            continue
        vf = item["valueFrom"]
        if "fieldRef" in vf:
            env[name] = field_value(pod, vf["fieldRef"]["fieldPath"], pod_ip=pod_ip, host_ip=host_ip)
        elif "resourceFieldRef" in vf:
            ref = vf["resourceFieldRef"]
            target = container
            if ref.get("containerName"):
                target = next((c for c in spec.get("containers") or [] if c["name"] == ref["containerName"]), container)
            env[name] = resource_value(target, ref["resource"], ref.get("divisor"), node_alloc=node_alloc)
        else:
            for kind, key in (("configmap", "configMapKeyRef"), ("secret", "secretKeyRef")):
                ref = vf.get(key)
                if not ref:
                    continue
                data = await _source_data(get, kind, ns, ref)
                if data is None:
                    break
                if ref["key"] not in data:
                    if ref.get("optional"):
                        break
                    raise ConfigError(f'couldn\'t find key {ref["key"]} in {"ConfigMap" if kind == "configmap" else "Secret"} {ns}/{ref.get("name")}')
                env[name] = data[ref["key"]]
    return env


async def _source_data(get: Getter, kind: str, ns: str, ref: Mapping[str, Any]) -> dict[str, str] | None:
    """The decoded data of the ConfigMap or Secret ``ref`` names; None if it is missing and ``optional``."""
    obj = await get(kind, ns, ref.get("name", ""))
    if obj is None:
        if ref.get("optional"):
            return None
        raise ConfigError(f'{kind} "{ref.get("name", "")}" not found')
    return _data(kind, obj)


def _data(kind: str, obj: Mapping[str, Any]) -> dict[str, str]:
    if kind == "secret":
        out = {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in (obj.get("data") or {}).items()}
        out.update(obj.get("stringData") or {})
        return out
    out = dict(obj.get("data") or {})
    for k, v in (obj.get("binaryData") or {}).items():
        out[k] = base64.b64decode(v).decode("utf-8", "replace")
    return out
