"""The Pod Security Standards checks (upstream ``k8s.io/pod-security-admission/policy``).

Pure functions over a pod's metadata and spec. Each check has upstream's ID,
its "forbidden reason" (the short title) and builds upstream's "forbidden
detail"; :func:`evaluate` runs the checks of a level in upstream's order
(the baseline checks a restricted check does not replace, by ID, then the
restricted ones, by ID) and returns the failures as (reason, detail).

Levels: ``privileged`` (nothing checked), ``baseline``, ``restricted``
(baseline plus the restricted checks). Versions (``v1.N``, ``latest``) select
upstream's checks as of that release: ``allowPrivilegeEscalation`` from v1.8,
``seccompProfile_restricted`` from v1.19 (before it the baseline seccomp
check applies), ``capabilities_restricted`` from v1.22 (before it
``capabilities_baseline``), ``runAsUser`` from v1.23; the allowed sysctls grow
at v1.27, v1.29 and v1.32, and SELinux type ``container_engine_t`` is allowed
from v1.31. ``latest`` and versions past this server's (v1.32) are v1.32.
Not versioned (checked as v1.32 at every version): the annotation-era
seccomp and AppArmor forms before v1.19, and the Windows-pod exemptions of v1.25.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, NamedTuple

__all__ = ["Failure", "evaluate", "LEVELS"]

Object = dict[str, Any]
LEVELS = ("privileged", "baseline", "restricted")


class Failure(NamedTuple):
    reason: str
    detail: str


def _containers(spec: Object) -> Iterator[Object]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or ():
            if isinstance(c, dict):
                yield c


def _sc(obj: Object) -> Object:
    sc = obj.get("securityContext")
    return sc if isinstance(sc, dict) else {}


def _plural(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


def _quote(items: Iterable[Any]) -> str:
    return ", ".join(f'"{i}"' for i in items)


def _names_detail(names: list[str], rest: str, singular: str = "container", plural: str = "containers") -> str:
    return f"{_plural(singular, plural, len(names))} {_quote(names)} {rest}"


# -- baseline ------------------------------------------------------------------

_BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
#: the newest release whose checks this server knows ("latest")
LATEST_MINOR = 32
_SYSCTLS_1_0 = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                          "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range"})
_SYSCTLS_1_27 = _SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
_SYSCTLS_1_29 = _SYSCTLS_1_27 | {"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                                 "net.ipv4.tcp_keepalive_probes"}
_SYSCTLS_1_32 = _SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
_SELINUX_TYPES_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
_SELINUX_TYPES_1_31 = _SELINUX_TYPES_1_0 | {"container_engine_t"}
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _app_armor(meta: Object, spec: Object) -> Failure | None:
    bad: list[str] = []
    for key, value in sorted((meta.get("annotations") or {}).items()):
        if key.startswith(_APPARMOR_ANNOTATION) and value != "runtime/default" and not str(value).startswith("localhost/"):
            bad.append(f'{key}="{value}"')
    if (_sc(spec).get("appArmorProfile") or {}).get("type") == "Unconfined":
        bad.append('pod must not set securityContext.appArmorProfile.type to "Unconfined"')
    for c in _containers(spec):
        if (_sc(c).get("appArmorProfile") or {}).get("type") == "Unconfined":
            bad.append(f'container "{c.get("name")}" must not set securityContext.appArmorProfile.type to "Unconfined"')
    if not bad:
        return None
    return Failure(_plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad)), ", ".join(bad))


def _capabilities_baseline(meta: Object, spec: Object) -> Failure | None:
    names, caps = [], set()
    for c in _containers(spec):
        added = [a for a in ((_sc(c).get("capabilities") or {}).get("add") or ()) if a not in _BASELINE_CAPABILITIES]
        if added:
            names.append(c.get("name"))
            caps.update(added)
    if not names:
        return None
    return Failure("non-default capabilities",
                   _names_detail(names, f"must not include {_quote(sorted(caps))} in securityContext.capabilities.add"))


def _host_namespaces(meta: Object, spec: Object) -> Failure | None:
    bad = [f"{f}=true" for f in ("hostNetwork", "hostPID", "hostIPC") if spec.get(f) is True]
    return Failure("host namespaces", ", ".join(bad)) if bad else None


def _host_path_volumes(meta: Object, spec: Object) -> Failure | None:
    names = [v.get("name") for v in spec.get("volumes") or () if isinstance(v, dict) and v.get("hostPath") is not None]
    return Failure("hostPath volumes", f'{_plural("volume", "volumes", len(names))} {_quote(names)}') if names else None


def _host_ports(meta: Object, spec: Object) -> Failure | None:
    names, ports = [], []
    for c in _containers(spec):
        used = [str(p.get("hostPort")) for p in c.get("ports") or () if isinstance(p, dict) and p.get("hostPort")]
        if used:
            names.append(c.get("name"))
            ports.extend(p for p in used if p not in ports)
    if not names:
        return None
    return Failure("hostPort", f'{_names_detail(names, _plural("uses", "use", len(names)))} '
                               f'{_plural("hostPort", "hostPorts", len(ports))} {", ".join(ports)}')


def _privileged(meta: Object, spec: Object) -> Failure | None:
    names = [c.get("name") for c in _containers(spec) if _sc(c).get("privileged") is True]
    return Failure("privileged", _names_detail(names, "must not set securityContext.privileged=true")) if names else None


def _proc_mount(meta: Object, spec: Object) -> Failure | None:
    names, mounts = [], []
    for c in _containers(spec):
        pm = _sc(c).get("procMount")
        if pm not in (None, "", "Default"):
            names.append(c.get("name"))
            if pm not in mounts:
                mounts.append(pm)
    if not names:
        return None
    return Failure("procMount", _names_detail(names, f"must not set securityContext.procMount to {_quote(mounts)}"))


def _seccomp_baseline(meta: Object, spec: Object) -> Failure | None:
    bad = []
    if (_sc(spec).get("seccompProfile") or {}).get("type") == "Unconfined":
        bad.append('pod must not set securityContext.seccompProfile.type to "Unconfined"')
    names = [c.get("name") for c in _containers(spec) if (_sc(c).get("seccompProfile") or {}).get("type") == "Unconfined"]
    if names:
        bad.append(_names_detail(names, 'must not set securityContext.seccompProfile.type to "Unconfined"'))
    return Failure("seccompProfile", "; ".join(bad)) if bad else None


def _selinux(meta: Object, spec: Object, minor: int = LATEST_MINOR) -> Failure | None:
    allowed_types = _SELINUX_TYPES_1_31 if minor >= 31 else _SELINUX_TYPES_1_0
    problems: list[str] = []
    who: list[str] = []

    def check(opts: Any, label: str) -> None:
        if not isinstance(opts, dict):
            return
        found = False
        if opts.get("type", "") not in allowed_types:
            problems.append(f'type "{opts["type"]}"') if f'type "{opts["type"]}"' not in problems else None
            found = True
        for field in ("user", "role"):
            if opts.get(field):
                if field not in problems:
                    problems.append(field)
                found = True
        if found:
            who.append(label)

    check(_sc(spec).get("seLinuxOptions"), "")
    for c in _containers(spec):
        check(_sc(c).get("seLinuxOptions"), c.get("name") or "")
    if not who:
        return None
    pod = "" in who
    names = [w for w in who if w]
    subject = "pod" if pod and not names else (
        f'pod and {_names_detail(names, "").strip()}' if pod else _names_detail(names, "").strip())
    verb = "sets" if subject in ("pod",) or (not pod and len(names) == 1) else "set"
    return Failure("seLinuxOptions", f"{subject} {verb} forbidden securityContext.seLinuxOptions: {', '.join(problems)}")


def _sysctls(meta: Object, spec: Object, minor: int = LATEST_MINOR) -> Failure | None:
    safe = _SYSCTLS_1_32 if minor >= 32 else _SYSCTLS_1_29 if minor >= 29 else _SYSCTLS_1_27 if minor >= 27 else _SYSCTLS_1_0
    bad = [s.get("name") for s in _sc(spec).get("sysctls") or () if isinstance(s, dict) and s.get("name") not in safe]
    return Failure("forbidden sysctls", ", ".join(bad)) if bad else None


def _host_process(meta: Object, spec: Object) -> Failure | None:
    pod = (_sc(spec).get("windowsOptions") or {}).get("hostProcess") is True
    names = [c.get("name") for c in _containers(spec) if (_sc(c).get("windowsOptions") or {}).get("hostProcess") is True]
    if not pod and not names:
        return None
    subject = "pod" if pod and not names else (f"pod and {_names_detail(names, '').strip()}" if pod else _names_detail(names, "").strip())
    return Failure("hostProcess", f"{subject} must not set securityContext.windowsOptions.hostProcess=true")


# -- restricted ----------------------------------------------------------------

_ALLOWED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret")


def _allow_privilege_escalation(meta: Object, spec: Object) -> Failure | None:
    names = [c.get("name") for c in _containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not names:
        return None
    return Failure("allowPrivilegeEscalation != false", _names_detail(names, "must set securityContext.allowPrivilegeEscalation=false"))


def _capabilities_restricted(meta: Object, spec: Object) -> Failure | None:
    no_drop, adding, caps = [], [], []
    for c in _containers(spec):
        capabilities = _sc(c).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or ()):
            no_drop.append(c.get("name"))
        added = [a for a in capabilities.get("add") or () if a != "NET_BIND_SERVICE"]
        if added:
            adding.append(c.get("name"))
            caps.extend(a for a in added if a not in caps)
    details = []
    if no_drop:
        details.append(_names_detail(no_drop, 'must set securityContext.capabilities.drop=["ALL"]'))
    if adding:
        details.append(_names_detail(adding, f"must not include {_quote(sorted(caps))} in securityContext.capabilities.add"))
    return Failure("unrestricted capabilities", "; ".join(details)) if details else None


def _restricted_volumes(meta: Object, spec: Object) -> Failure | None:
    names, kinds = [], []
    for v in spec.get("volumes") or ():
        if not isinstance(v, dict):
            continue
        kind = next((k for k in v if k != "name"), None)
        if kind is not None and kind not in _ALLOWED_VOLUMES:
            names.append(v.get("name"))
            if kind not in kinds:
                kinds.append(kind)
    if not names:
        return None
    return Failure("restricted volume types",
                   f'{_plural("volume", "volumes", len(names))} {_quote(names)} {_plural("uses", "use", len(names))} '
                   f'{_plural("restricted volume type", "restricted volume types", len(kinds))} {_quote(kinds)}')


def _run_as_non_root(meta: Object, spec: Object) -> Failure | None:
    pod_value = _sc(spec).get("runAsNonRoot")
    details, explicit_false, unset = [], [], []
    if pod_value is False:
        details.append("pod must not set securityContext.runAsNonRoot=false")
    for c in _containers(spec):
        value = _sc(c).get("runAsNonRoot")
        if value is False:
            explicit_false.append(c.get("name"))
        elif value is None and pod_value is not True:
            unset.append(c.get("name"))
    if explicit_false:
        details.append(_names_detail(explicit_false, "must not set securityContext.runAsNonRoot=false"))
    if unset and pod_value is None:
        details.append(_names_detail(unset, "must set securityContext.runAsNonRoot=true", "pod or container", "pod or containers"))
    return Failure("runAsNonRoot != true", "; ".join(details)) if details else None


def _run_as_user(meta: Object, spec: Object) -> Failure | None:
    details = []
    if _sc(spec).get("runAsUser") == 0:
        details.append("pod must not set runAsUser=0")
    names = [c.get("name") for c in _containers(spec) if _sc(c).get("runAsUser") == 0]
    if names:
        details.append(_names_detail(names, "must not set runAsUser=0"))
    return Failure("runAsUser=0", "; ".join(details)) if details else None


def _seccomp_restricted(meta: Object, spec: Object) -> Failure | None:
    ok = ("RuntimeDefault", "Localhost")
    pod_type = (_sc(spec).get("seccompProfile") or {}).get("type")
    details, bad, unset = [], [], []
    if pod_type is not None and pod_type not in ok:
        details.append(f'pod must not set securityContext.seccompProfile.type to "{pod_type}"')
    bad_types: list[str] = []
    for c in _containers(spec):
        t = (_sc(c).get("seccompProfile") or {}).get("type")
        if t is not None and t not in ok:
            bad.append(c.get("name"))
            if t not in bad_types:
                bad_types.append(t)
        elif t is None and pod_type is None:
            unset.append(c.get("name"))
    if bad:
        details.append(_names_detail(bad, f"must not set securityContext.seccompProfile.type to {_quote(bad_types)}"))
    if unset:
        details.append(_names_detail(unset, 'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
                                     "pod or container", "pod or containers"))
    return Failure("seccompProfile", "; ".join(details)) if details else None


Check = Callable[[Object, Object], Failure | None]

#: (ID, check), sorted by ID
BASELINE: tuple[tuple[str, Check], ...] = (
    ("appArmorProfile", _app_armor),
    ("capabilities_baseline", _capabilities_baseline),
    ("hostNamespaces", _host_namespaces),
    ("hostPathVolumes", _host_path_volumes),
    ("hostPorts", _host_ports),
    ("privileged", _privileged),
    ("procMount", _proc_mount),
    ("seLinuxOptions", _selinux),
    ("seccompProfile_baseline", _seccomp_baseline),
    ("sysctls", _sysctls),
    ("windowsHostProcess", _host_process),
)
#: (ID, check, the baseline check it replaces, the first release that has it)
RESTRICTED: tuple[tuple[str, Check, str, int], ...] = (
    ("allowPrivilegeEscalation", _allow_privilege_escalation, "", 8),
    ("capabilities_restricted", _capabilities_restricted, "capabilities_baseline", 22),
    ("restrictedVolumes", _restricted_volumes, "hostPathVolumes", 0),
    ("runAsNonRoot", _run_as_non_root, "", 0),
    ("runAsUser", _run_as_user, "", 23),
    ("seccompProfile_restricted", _seccomp_restricted, "seccompProfile_baseline", 19),
)
#: the checks whose rules changed between releases, given the release's minor version
_VERSIONED: dict[str, Callable[[Object, Object, int], Failure | None]] = {"sysctls": _sysctls, "seLinuxOptions": _selinux}


def minor_version(version: str) -> int:
    """``v1.N`` -> N (at most :data:`LATEST_MINOR`); ``latest`` -> :data:`LATEST_MINOR`."""
    if version.startswith("v1."):
        try:
            return min(int(version[3:]), LATEST_MINOR)
        except ValueError:
            pass
    return LATEST_MINOR


def evaluate(level: str, meta: Object, spec: Object, version: str = "latest") -> list[Failure]:
    """The failures of a pod (its metadata and spec) against ``level`` as of ``version``."""
    if level == "privileged":
        return []
    minor = minor_version(version)
    restricted = [(cid, fn, overrides) for cid, fn, overrides, since in RESTRICTED if minor >= since] if level == "restricted" else []
    overridden = {o for _, _, o in restricted if o}
    out = []
    for cid, fn in BASELINE:
        if cid in overridden:
            continue
        versioned = _VERSIONED.get(cid)
        failure = versioned(meta, spec, minor) if versioned is not None else fn(meta, spec)
        if failure is not None:
            out.append(failure)
    for _, fn, _ in restricted:
        failure = fn(meta, spec)
        if failure is not None:
            out.append(failure)
    return out
