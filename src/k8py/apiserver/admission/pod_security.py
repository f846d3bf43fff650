"""PodSecurity admission: the Pod Security Standards by namespace label
(upstream ``k8s.io/pod-security-admission``, the built-in plugin).

A namespace chooses, per mode, a level (``privileged``, ``baseline``,
``restricted``) and a version (``latest`` or ``v1.N``) with the labels
``pod-security.kubernetes.io/<mode>[-version]``; a mode without a label takes
the configured default (``PodSecurityConfiguration.defaults``; upstream's:
privileged, latest):

- ``enforce``: a pod that fails is refused, 403 ``pods "x" is forbidden:
  violates PodSecurity "baseline:latest": privileged (container "c" must not
  set securityContext.privileged=true)``;
- ``warn``: the client gets ``Warning: would violate PodSecurity
  "restricted:latest": …`` (also for workloads with pod templates:
  Deployments, Jobs, CronJobs, …, which are never refused);
- ``audit``: the audit event gets ``pod-security.kubernetes.io/audit-violations``.

Pods are checked on create and on updates that change more than images,
tolerations and ``activeDeadlineSeconds`` (upstream ignores those); status
and other subresources are not. Exemptions (``exemptions.usernames``,
``namespaces``, ``runtimeClasses``) skip every check and are recorded as the
``pod-security.kubernetes.io/exempt`` audit annotation.

A namespace created or relabelled with an invalid level or version is refused;
one whose enforce level is raised warns about the pods already in it that
would fail (``existing pods in namespace "x" violate the new PodSecurity
enforce level "restricted:latest"`` then ``pod: reason, reason``), as upstream.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Mapping

from k8py.api.errors import Cause, Invalid
from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.admission.pod_security_checks import LEVELS, evaluate
from k8py.apiserver.admission.plugins import AdmissionConfigError
from k8py.apiserver.registry import Registry
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["PodSecurity", "PodSecurityConfig", "LABEL_PREFIX"]

Object = dict[str, Any]
LABEL_PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
_VERSION = re.compile(r"^(latest|v1\.(0|[1-9][0-9]*))$")
#: resources whose pod template is checked (warn and audit only): (group, resource) -> path to the template
TEMPLATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "replicationcontrollers"): ("spec", "template"),
    ("", "podtemplates"): ("template",),
    ("apps", "deployments"): ("spec", "template"),
    ("apps", "replicasets"): ("spec", "template"),
    ("apps", "statefulsets"): ("spec", "template"),
    ("apps", "daemonsets"): ("spec", "template"),
    ("batch", "jobs"): ("spec", "template"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template"),
}


@dataclass(frozen=True)
class PodSecurityConfig:
    """``PodSecurityConfiguration`` (pod-security.admission.config.k8s.io/v1): defaults and exemptions."""

    defaults: Mapping[str, str]
    exempt_usernames: frozenset[str] = frozenset()
    exempt_namespaces: frozenset[str] = frozenset()
    exempt_runtime_classes: frozenset[str] = frozenset()

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> "PodSecurityConfig":
        defaults = {m: "privileged" for m in MODES} | {f"{m}-version": "latest" for m in MODES}
        for key, value in (body.get("defaults") or {}).items():
            if key not in defaults:
                raise AdmissionConfigError(f"PodSecurityConfiguration defaults: unknown field {key!r}")
            ok = value in LEVELS if not key.endswith("-version") else bool(_VERSION.match(str(value)))
            if not ok:
                raise AdmissionConfigError(
                    f"PodSecurityConfiguration defaults.{key}: invalid value {value!r}: must be "
                    + ("one of privileged, baseline, restricted" if not key.endswith("-version") else "latest or v1.N"))
            defaults[key] = str(value)
        ex = body.get("exemptions") or {}
        return cls(defaults, frozenset(ex.get("usernames") or ()), frozenset(ex.get("namespaces") or ()),
                   frozenset(ex.get("runtimeClasses") or ()))


def _policy(labels: Mapping[str, str], defaults: Mapping[str, str], mode: str) -> tuple[str, str]:
    level = labels.get(LABEL_PREFIX + mode) or defaults[mode]
    version = labels.get(f"{LABEL_PREFIX}{mode}-version") or defaults[f"{mode}-version"]
    if level not in LEVELS:
        level = "restricted"  # upstream: an invalid label counts as the strictest level
    if not _VERSION.match(version):
        version = "latest"
    return level, version


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _message(level: str, version: str, failures: list[Any]) -> str:
    return f'PodSecurity "{level}:{version}": ' + ", ".join(f"{f.reason} ({f.detail})" for f in failures)


_IGNORED_ON_UPDATE = ("activeDeadlineSeconds", "tolerations")


def _significant(spec: Any) -> Any:
    """The spec without what upstream lets a pod update change unchecked (images, tolerations, deadline)."""
    spec = copy.deepcopy(spec or {})
    for key in _IGNORED_ON_UPDATE:
        spec.pop(key, None)
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or ():
            if isinstance(c, dict):
                c.pop("image", None)
    return spec


class PodSecurity:
    name = "PodSecurity"

    def __init__(self, registry: Registry, cacher: Cacher, config: PodSecurityConfig | None = None) -> None:
        self.registry = registry
        self.cacher = cacher
        self.config = config or PodSecurityConfig.from_api({})
        self._all_privileged = all(self.config.defaults[m] == "privileged" for m in MODES)

    def handles(self, operation: Operation) -> bool:
        return operation in (Operation.CREATE, Operation.UPDATE)

    def concerns(self, group: str, resource: str, subresource: str) -> bool:
        """Namespaces, pods and the kinds with pod templates, not their subresources (``validate`` passes the rest)."""
        return not subresource and ((group == "" and resource in ("namespaces", "pods")) or (group, resource) in TEMPLATES)

    async def validate(self, a: AdmissionAttributes) -> None:
        if a.subresource:
            return
        group, _, resource = a.resource
        if group == "" and resource == "namespaces":
            self._validate_namespace(a)
        elif group == "" and resource == "pods":
            self._validate_pod(a)
        elif (group, resource) in TEMPLATES:
            self._validate_template(a, TEMPLATES[(group, resource)])

    # -- pods ----------------------------------------------------------------

    def _labels(self, namespace: str) -> Mapping[str, str] | None:
        d = self.registry.get("", "v1", "namespaces")
        cached = None if d is None else self.cacher.cache_for(d).objects.get(d.key("", namespace))
        labels = cached.labels if cached is not None else {}  # the watch cache keeps them decoded
        if self._all_privileged and not any(k.startswith(LABEL_PREFIX) for k in labels):
            return None  # the common case: nothing to check
        return labels

    def _exempt(self, a: AdmissionAttributes, runtime_class: str | None) -> bool:
        reason = ("namespace" if a.namespace in self.config.exempt_namespaces else
                  "user" if a.user.name in self.config.exempt_usernames else
                  "runtimeClass" if runtime_class and runtime_class in self.config.exempt_runtime_classes else "")
        if reason:
            a.add_audit_annotation(LABEL_PREFIX + "exempt", reason)
        return bool(reason)

    def _validate_pod(self, a: AdmissionAttributes) -> None:
        pod = a.object
        if pod is None:
            return
        labels = self._labels(a.namespace)  # first: None (nothing enforced) spares the spec comparison
        if labels is None:
            return
        if a.operation is Operation.UPDATE and a.old_object is not None:
            if _significant(pod.get("spec")) == _significant(a.old_object.get("spec")):
                return
        spec = pod.get("spec") or {}
        if self._exempt(a, spec.get("runtimeClassName")):
            return
        meta = pod.get("metadata") or {}
        level, version = _policy(labels, self.config.defaults, "enforce")
        a.add_audit_annotation(LABEL_PREFIX + "enforce-policy", f"{level}:{version}")
        failures = evaluate(level, meta, spec, version)
        if failures:
            raise a.forbidden("violates " + _message(level, version, failures))
        self._warn_and_audit(a, labels, meta, spec)

    def _warn_and_audit(self, a: AdmissionAttributes, labels: Mapping[str, str], meta: Object, spec: Object) -> None:
        level, version = _policy(labels, self.config.defaults, "warn")
        failures = evaluate(level, meta, spec, version)
        if failures:
            a.add_warning("would violate " + _message(level, version, failures))
        level, version = _policy(labels, self.config.defaults, "audit")
        failures = evaluate(level, meta, spec, version)
        if failures:
            a.add_audit_annotation(LABEL_PREFIX + "audit-violations", "would violate " + _message(level, version, failures))

    def _validate_template(self, a: AdmissionAttributes, path: tuple[str, ...]) -> None:
        obj = a.object
        template = _get(obj, path) if obj is not None else None
        if not isinstance(template, dict):
            return
        if a.operation is Operation.UPDATE and a.old_object is not None:
            old = _get(a.old_object, path)
            if isinstance(old, dict) and _significant(old.get("spec")) == _significant(template.get("spec")) \
                    and (old.get("metadata") or {}) == (template.get("metadata") or {}):
                return
        labels = self._labels(a.namespace)
        if labels is None:
            return
        spec = template.get("spec") or {}
        if self._exempt(a, spec.get("runtimeClassName")):
            return
        self._warn_and_audit(a, labels, template.get("metadata") or {}, spec)

    # -- namespaces ----------------------------------------------------------

    def _validate_namespace(self, a: AdmissionAttributes) -> None:
        ns = a.object
        if ns is None:
            return
        labels = (ns.get("metadata") or {}).get("labels") or {}
        causes = []
        for mode in MODES:
            level = labels.get(LABEL_PREFIX + mode)
            if level is not None and level not in LEVELS:
                causes.append(Cause("FieldValueInvalid", f'Invalid value: "{level}": must be one of privileged, baseline, restricted',
                                    f"metadata.labels[{LABEL_PREFIX}{mode}]"))
            version = labels.get(f"{LABEL_PREFIX}{mode}-version")
            if version is not None and not _VERSION.match(version):
                causes.append(Cause("FieldValueInvalid", f'Invalid value: "{version}": must be "latest" or "v1.x"',
                                    f"metadata.labels[{LABEL_PREFIX}{mode}-version]"))
        if causes:
            raise Invalid.for_object("Namespace", a.name, causes)
        if a.operation is not Operation.UPDATE or a.old_object is None:
            return
        old_labels = (a.old_object.get("metadata") or {}).get("labels") or {}
        new_policy = _policy(labels, self.config.defaults, "enforce")
        if new_policy == _policy(old_labels, self.config.defaults, "enforce") or new_policy[0] == "privileged":
            return
        if a.name in self.config.exempt_namespaces:
            return
        self._warn_existing_pods(a, *new_policy)

    def _warn_existing_pods(self, a: AdmissionAttributes, level: str, version: str) -> None:
        d = self.registry.get("", "v1", "pods")
        if d is None:
            return
        offenders: list[tuple[str, list[str]]] = []
        for cached in self.cacher.cache_for(d).candidates(a.name):
            pod = cached.decode()
            spec = pod.get("spec") or {}
            if spec.get("runtimeClassName") in self.config.exempt_runtime_classes:
                continue
            failures = evaluate(level, pod.get("metadata") or {}, spec, version)
            if failures:
                offenders.append((pod["metadata"]["name"], [f.reason for f in failures]))
        if not offenders:
            return
        a.add_warning(f'existing pods in namespace "{a.name}" violate the new PodSecurity enforce level "{level}:{version}"')
        for name, reasons in sorted(offenders)[:50]:
            a.add_warning(f"{name}: {', '.join(reasons)}")
