"""Pod spec and pod template validation (upstream ``ValidatePodSpec``,
``ValidatePodTemplateSpec``, ``ValidatePodUpdate``), shared by core, apps and batch.

Scope: the rules clients hit in practice — required containers, names and
images, unique names, enum values, port ranges, volume and mount
consistency, and which fields of a running pod may change. Quantities,
probes' handlers, security contexts and affinity are not checked here.
Every function takes the path of the spec (``spec`` or
``spec.template.spec``) so messages carry upstream's full field paths.
"""

from __future__ import annotations

import json
from typing import Any

from k8py.api.errors import Cause
from k8py.api.names import is_dns1123_label, is_dns1123_subdomain, validate_annotations, validate_labels
from k8py.api.patch.json_values import deep_copy
from k8py.api.volume_sources import VOLUME_SOURCES

from k8py.apiserver.validation.field import (
    duplicate, forbidden, invalid, is_int, not_found, not_supported, port_name, port_number, required,
)

__all__ = ["validate_pod_spec", "validate_pod_template", "validate_pod_spec_update", "RESTART_POLICIES"]

Object = dict[str, Any]

RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
_MAX_INT32 = 2147483647
_VOLUME_REQUIRED_NAME = {
    "configMap": "name", "secret": "secretName", "hostPath": "path",
    "persistentVolumeClaim": "claimName", "nfs": "server",
}


def _dicts(value: Any) -> list[Object]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _volumes(spec: Object, path: str) -> tuple[list[Cause], set[str]]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, vol in enumerate(_dicts(spec.get("volumes"))):
        p = f"{path}.volumes[{i}]"
        name = vol.get("name") or ""
        if not name:
            causes.append(required(f"{p}.name"))
        else:
            causes.extend(invalid(f"{p}.name", name, m) for m in is_dns1123_label(str(name)))
            if name in names:
                causes.append(duplicate(f"{p}.name", name))
            names.add(name)
        sources = [k for k in VOLUME_SOURCES if vol.get(k) is not None]
        if not sources:
            causes.append(required(p, "must specify a volume type"))
        for extra in sources[1:]:
            causes.append(forbidden(f"{p}.{extra}", "may not specify more than 1 volume type"))
        for source, key in _VOLUME_REQUIRED_NAME.items():
            body = vol.get(source)
            if isinstance(body, dict) and not body.get(key):
                causes.append(required(f"{p}.{source}.{key}"))
    return causes, names


def _container(c: Object, p: str, volumes: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    name = c.get("name") or ""
    if not name:
        causes.append(required(f"{p}.name"))
    else:
        causes.extend(invalid(f"{p}.name", name, m) for m in is_dns1123_label(str(name)))
    image = c.get("image")
    if not image:
        causes.append(required(f"{p}.image"))
    policy = c.get("imagePullPolicy")
    if policy is not None and policy not in _PULL_POLICIES:
        causes.append(not_supported(f"{p}.imagePullPolicy", policy, _PULL_POLICIES))
    message_policy = c.get("terminationMessagePolicy")
    if message_policy is not None and message_policy not in _MESSAGE_POLICIES:
        causes.append(not_supported(f"{p}.terminationMessagePolicy", message_policy, _MESSAGE_POLICIES))
    port_names: set[str] = set()
    for j, port in enumerate(_dicts(c.get("ports"))):
        pp = f"{p}.ports[{j}]"
        pname = port.get("name")
        if pname:
            causes.extend(invalid(f"{pp}.name", pname, m) for m in port_name(str(pname)))
            if pname in port_names:
                causes.append(duplicate(f"{pp}.name", pname))
            port_names.add(pname)
        if port.get("containerPort") in (None, 0):
            causes.append(required(f"{pp}.containerPort"))
        else:
            causes.extend(port_number(port["containerPort"], f"{pp}.containerPort"))
        host_port = port.get("hostPort")
        if host_port not in (None, 0):
            causes.extend(port_number(host_port, f"{pp}.hostPort"))
        protocol = port.get("protocol")
        if protocol is not None and protocol not in _PROTOCOLS:
            causes.append(not_supported(f"{pp}.protocol", protocol, _PROTOCOLS))
    for j, env in enumerate(_dicts(c.get("env"))):
        if not env.get("name"):
            causes.append(required(f"{p}.env[{j}].name"))
    mount_paths: set[str] = set()
    for j, mount in enumerate(_dicts(c.get("volumeMounts"))):
        mp = f"{p}.volumeMounts[{j}]"
        mname = mount.get("name") or ""
        if not mname:
            causes.append(required(f"{mp}.name"))
        elif mname not in volumes:
            causes.append(not_found(f"{mp}.name", mname))
        path = mount.get("mountPath") or ""
        if not path:
            causes.append(required(f"{mp}.mountPath"))
        elif path in mount_paths:
            causes.append(invalid(f"{mp}.mountPath", path, "must be unique"))
        mount_paths.add(path)
    return causes


def validate_pod_spec(spec: Any, path: str) -> list[Cause]:
    """``ValidatePodSpec`` for ``spec`` found at ``path``."""
    if not isinstance(spec, dict):
        return [required(path)]
    causes, volumes = _volumes(spec, path)
    containers = _dicts(spec.get("containers"))
    if not containers:
        causes.append(required(f"{path}.containers"))
    seen: set[str] = set()
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for i, c in enumerate(_dicts(spec.get(key))):
            p = f"{path}.{key}[{i}]"
            causes.extend(_container(c, p, volumes))
            name = c.get("name")
            if name:
                if name in seen:
                    causes.append(duplicate(f"{p}.name", name))
                seen.add(name)
    restart = spec.get("restartPolicy")
    if restart in (None, ""):
        causes.append(required(f"{path}.restartPolicy"))
    elif restart not in RESTART_POLICIES:
        causes.append(not_supported(f"{path}.restartPolicy", restart, RESTART_POLICIES))
    dns = spec.get("dnsPolicy")
    if dns is not None and dns not in _DNS_POLICIES:
        causes.append(not_supported(f"{path}.dnsPolicy", dns, _DNS_POLICIES))
    if dns == "None" and not spec.get("dnsConfig"):
        causes.append(required(f"{path}.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not is_int(deadline) or not 1 <= deadline <= _MAX_INT32):
        causes.append(invalid(f"{path}.activeDeadlineSeconds", deadline, f"must be between 1 and {_MAX_INT32}, inclusive"))
    causes.extend(validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector"))
    for key in ("serviceAccountName", "nodeName"):
        value = spec.get(key)
        if value:
            causes.extend(invalid(f"{path}.{key}", value, m) for m in is_dns1123_subdomain(str(value)))
    for key in ("hostname", "subdomain"):
        value = spec.get(key)
        if value:
            causes.extend(invalid(f"{path}.{key}", value, m) for m in is_dns1123_label(str(value)))
    return causes


def validate_pod_template(template: Any, path: str) -> list[Cause]:
    """``ValidatePodTemplateSpec``: template labels/annotations and its spec."""
    if not isinstance(template, dict):
        return [required(path)]
    meta = template.get("metadata") or {}
    causes = validate_labels(meta.get("labels"), f"{path}.metadata.labels")
    causes.extend(validate_annotations(meta.get("annotations"), f"{path}.metadata.annotations"))
    spec = template.get("spec")
    causes.extend(validate_pod_spec(spec, f"{path}.spec"))
    if isinstance(spec, dict) and spec.get("ephemeralContainers"):
        causes.append(forbidden(f"{path}.spec.ephemeralContainers", "ephemeral containers not allowed in pod template"))
    return causes


_UPDATABLE = ",".join((
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
))


def _tolerations_only_added(new: list[Any], old: list[Any]) -> bool:
    for existing in old:
        if not isinstance(existing, dict):
            continue
        probe = {k: v for k, v in existing.items() if k != "tolerationSeconds"}
        if not any(
            isinstance(t, dict) and {k: v for k, v in t.items() if k != "tolerationSeconds"} == probe
            for t in new
        ):
            return False
    return True


def _diff(old: Any, new: Any, path: str, out: list[str], limit: int = 20) -> None:
    if len(out) >= limit or old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            _diff(old.get(key), new.get(key), f"{path}.{key}", out, limit)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            _diff(a, b, f"{path}[{i}]", out, limit)
    else:
        def show(v: Any) -> str:
            return "<unset>" if v is None else json.dumps(v, separators=(",", ":"), sort_keys=True)

        out.append(f"- {path}: {show(old)}\n+ {path}: {show(new)}")


def validate_pod_spec_update(new: Any, old: Any, path: str = "spec") -> list[Cause]:
    """``ValidatePodUpdate``'s spec rule: only images, a lowered
    activeDeadlineSeconds, added tolerations and a negative grace period
    raised to 1 may change."""
    if not isinstance(new, dict) or not isinstance(old, dict):
        return []
    causes: list[Cause] = []
    munged = deep_copy(new)
    for key in ("containers", "initContainers"):
        old_list, new_list = old.get(key), munged.get(key)
        if isinstance(old_list, list) and isinstance(new_list, list):
            for c_old, c_new in zip(old_list, new_list):
                if isinstance(c_old, dict) and isinstance(c_new, dict):
                    if "image" in c_old:
                        c_new["image"] = c_old["image"]
                    else:
                        c_new.pop("image", None)
    new_deadline, old_deadline = new.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds")
    if new_deadline is not None:
        if not is_int(new_deadline) or not 0 <= new_deadline <= _MAX_INT32:
            return [invalid(f"{path}.activeDeadlineSeconds", new_deadline, f"must be between 0 and {_MAX_INT32}, inclusive")]
        if is_int(old_deadline) and old_deadline < new_deadline:
            return [invalid(f"{path}.activeDeadlineSeconds", new_deadline, "must be less than or equal to previous value")]
    elif old_deadline is not None:
        causes.append(invalid(f"{path}.activeDeadlineSeconds", None, "must not update from a positive integer to nil value"))
    _restore(munged, old, "activeDeadlineSeconds")
    new_tolerations = new.get("tolerations") or []
    if not _tolerations_only_added(new_tolerations, old.get("tolerations") or []):
        causes.append(forbidden(f"{path}.tolerations", "existing toleration can not be modified except its tolerationSeconds"))
    _restore(munged, old, "tolerations")
    # scheduling gates may only be removed; while gated, nodeSelector may gain entries
    old_gates = [g.get("name") for g in old.get("schedulingGates") or () if isinstance(g, dict)]
    for g in new.get("schedulingGates") or ():
        name = g.get("name") if isinstance(g, dict) else g
        if name not in old_gates:
            causes.append(forbidden(f"{path}.schedulingGates", f"only deletion is allowed, but found new scheduling gate '{name}'"))
    _restore(munged, old, "schedulingGates")
    if old_gates:
        old_sel, new_sel = old.get("nodeSelector") or {}, new.get("nodeSelector") or {}
        if isinstance(new_sel, dict) and all(new_sel.get(k) == v for k, v in old_sel.items()):
            _restore(munged, old, "nodeSelector")
    old_grace = old.get("terminationGracePeriodSeconds")
    if is_int(old_grace) and old_grace < 0 and new.get("terminationGracePeriodSeconds") == 1:
        _restore(munged, old, "terminationGracePeriodSeconds")
    if munged != old:
        lines: list[str] = []
        _diff(old, munged, path, lines)
        detail = f"pod updates may not change fields other than {_UPDATABLE}\n" + "\n".join(lines)
        causes.append(forbidden(path, detail))
    return causes


def _restore(munged: Object, old: Object, key: str) -> None:
    if key in old:
        munged[key] = old[key]
    else:
        munged.pop(key, None)
