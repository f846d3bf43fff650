"""``--admission-control-config-file``: an ``AdmissionConfiguration`` naming each plugin's configuration.

Upstream's ``apiserver.config.k8s.io/v1`` (or ``v1alpha1``) AdmissionConfiguration::

    apiVersion: apiserver.config.k8s.io/v1
    kind: AdmissionConfiguration
    plugins:
    - name: PodSecurity
      configuration:            # inline ...
        apiVersion: pod-security.admission.config.k8s.io/v1
        kind: PodSecurityConfiguration
        defaults: {enforce: baseline}
    - name: EventRateLimit
      path: eventconfig.yaml    # ... or a file, relative to this one

:func:`load_admission_config` returns plugin name -> configuration object;
any problem is an :class:`~k8py.apiserver.admission.plugins.AdmissionConfigError`
saying what to fix, and the server refuses to start.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from k8py.apiserver.admission.plugins import ORDER, AdmissionConfigError

__all__ = ["load_admission_config"]

_API_VERSIONS = ("apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1", "apiserver.k8s.io/v1alpha1")


def _read_yaml(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except OSError as err:
        raise AdmissionConfigError(f"cannot read admission configuration {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise AdmissionConfigError(f"admission configuration {path} is not valid YAML: {err}") from None


def load_admission_config(path: str) -> dict[str, dict[str, Any]]:
    doc = _read_yaml(path)
    if not isinstance(doc, dict) or doc.get("kind") != "AdmissionConfiguration":
        raise AdmissionConfigError(
            f"{path}: expected kind AdmissionConfiguration (apiVersion apiserver.config.k8s.io/v1)")
    if doc.get("apiVersion") not in _API_VERSIONS:
        raise AdmissionConfigError(
            f"{path}: unsupported apiVersion {doc.get('apiVersion')!r}: use apiserver.config.k8s.io/v1")
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(doc.get("plugins") or ()):
        name = (entry or {}).get("name") if isinstance(entry, dict) else None
        if not name or name not in ORDER:
            raise AdmissionConfigError(f"{path}: plugins[{i}].name {name!r} is not an admission plugin name")
        if entry.get("configuration") is not None:
            config = entry["configuration"]
        elif entry.get("path"):
            config = _read_yaml(os.path.join(os.path.dirname(os.path.abspath(path)), entry["path"]))
        else:
            raise AdmissionConfigError(f"{path}: plugins[{i}] ({name}) needs a configuration or a path")
        if not isinstance(config, dict):
            raise AdmissionConfigError(f"{path}: the configuration of {name} must be an object")
        out[name] = config
    return out
