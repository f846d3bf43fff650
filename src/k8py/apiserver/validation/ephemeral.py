"""Validation of a write through ``pods/NAME/ephemeralcontainers``.

Upstream's ``ValidatePodEphemeralContainersUpdate``: the new pod spec is valid
as a whole (names unique across init, regular and ephemeral containers), and
then, for the ephemeral containers:

- only additions: an existing ephemeral container may be neither changed nor
  removed (containers never come back once started, so their spec is history);
- only the fields upstream allows an ephemeral container (no ports, probes,
  lifecycle, resources, resizePolicy, restartPolicy; no ``subPath`` mounts);
- ``targetContainerName``, when set, names a container or init container of
  the pod;
- a static (mirror) pod takes none.

Invariant: this is the only way ``spec.ephemeralContainers`` changes; the main
resource's update rule (:func:`~.podspec.validate_pod_spec_update`) forbids it.
"""

from __future__ import annotations

import json
from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver.validation.field import forbidden, not_found
from k8py.apiserver.validation.podspec import validate_pod_spec

__all__ = ["validate_ephemeral_containers_update", "EPHEMERAL_ALLOWED_FIELDS"]

Object = dict[str, Any]

#: upstream's EphemeralContainerCommon fields an ephemeral container may set
EPHEMERAL_ALLOWED_FIELDS = frozenset({
    "name", "image", "command", "args", "workingDir", "env", "envFrom", "volumeMounts", "volumeDevices",
    "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy", "securityContext",
    "stdin", "stdinOnce", "tty", "targetContainerName",
})
_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def _list(value: Any) -> list[Object]:
    return [c for c in value or [] if isinstance(c, dict)] if isinstance(value, list) else []


def _show(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def validate_ephemeral_containers_update(new: Object, old: Object) -> list[Cause]:
    """The causes refusing ``new`` (the pod after the write) given ``old``."""
    if _MIRROR_ANNOTATION in ((old.get("metadata") or {}).get("annotations") or {}):
        return [forbidden("", "static pods do not support ephemeral containers")]
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    causes = validate_pod_spec(spec, "spec")
    targets = {c.get("name") for key in ("containers", "initContainers") for c in _list(spec.get(key))}
    ephemeral = _list(spec.get("ephemeralContainers"))
    for i, ec in enumerate(ephemeral):
        p = f"spec.ephemeralContainers[{i}]"
        for key in sorted(ec):
            if key not in EPHEMERAL_ALLOWED_FIELDS and ec[key] not in (None, [], {}, ""):
                causes.append(forbidden(f"{p}.{key}", "cannot be set for an Ephemeral Container"))
        for j, mount in enumerate(_list(ec.get("volumeMounts"))):
            if mount.get("subPath"):
                causes.append(forbidden(f"{p}.volumeMounts[{j}].subPath", "cannot be set for an Ephemeral Container"))
        target = ec.get("targetContainerName")
        if target and target not in targets:
            causes.append(not_found(f"{p}.targetContainerName", target))
    by_name = {c.get("name"): c for c in ephemeral}
    for oc in _list(old_spec.get("ephemeralContainers")):
        name = oc.get("name")
        nc = by_name.get(name)
        if nc is None:
            causes.append(forbidden("spec.ephemeralContainers", f"existing ephemeral containers \"{name}\" may not be removed\n"))
        elif nc != oc:
            causes.append(forbidden(
                "spec.ephemeralContainers",
                f"existing ephemeral containers \"{name}\" may not be changed\n- {_show(oc)}\n+ {_show(nc)}",
            ))
    return causes
