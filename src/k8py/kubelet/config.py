"""The kubelet's configuration: flags and a ``KubeletConfiguration`` file.

Precedence as upstream: defaults < the file (``--config``,
``kubelet.config.k8s.io/v1beta1`` ``KubeletConfiguration``) < flags given
explicitly. Only the fields k8py acts on are read from the file; the rest
are ignored (upstream would reject unknown fields only in strict mode).

Every timing that tests want short (backoffs, heartbeats, status
frequencies) is here, so tests shorten them by configuration, never by
sleeping.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any, Mapping

import yaml

__all__ = ["KubeletConfig", "parse_quantity_bytes", "load_kubelet_configuration"]

KUBELET_VERSION = "v1.32.0-k8py"


def parse_quantity_bytes(value: str | int) -> int:
    """``10Mi`` → 10485760 (binary and decimal suffixes)."""
    if isinstance(value, int):
        return value
    s = str(value).strip()
    units = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "K": 1000, "k": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4}
    for suffix in sorted(units, key=len, reverse=True):
        if s.endswith(suffix):
            return int(float(s[: -len(suffix)]) * units[suffix])
    return int(float(s))


@dataclass
class KubeletConfig:
    node_name: str = field(default_factory=lambda: socket.gethostname().lower())
    root_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), ".k8py", "kubelet"))
    #: the address the kubelet serves on and reports as the node's InternalIP
    address: str = "127.0.0.1"
    port: int = 10250
    #: HTTPS for the server (see k8py.kubelet.server_tls): serving pair, and the CA client certificates must come from
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    client_ca_file: str = ""
    #: who may call the HTTPS server (see k8py.kubelet.server_auth); the defaults are
    #: KubeletConfiguration v1beta1's: no anonymous, bearer tokens by TokenReview, Webhook authorization
    anonymous_auth: bool = False
    authentication_token_webhook: bool = True
    authentication_token_webhook_cache_ttl: float = 120.0
    authorization_mode: str = "Webhook"
    authorization_webhook_cache_authorized_ttl: float = 300.0
    authorization_webhook_cache_unauthorized_ttl: float = 30.0
    #: ``rotateCertificates``: renew the client certificate at 70–90 % of its life (k8py.kubelet.certificate_rotation)
    rotate_certificates: bool = False
    #: ``serverTLSBootstrap``: the serving certificate comes from a kubelet-serving CSR (k8py.kubelet.serving_certificate)
    server_tls_bootstrap: bool = False
    #: where rotated (and bootstrapped) client certificates go ("" = <root-dir>/pki)
    cert_dir: str = ""
    #: used when the Node has no spec.podCIDR (node IPAM not running)
    pod_cidr: str = "127.64.0.0/24"
    #: seconds to wait for node IPAM's spec.podCIDR before using ``pod_cidr``
    #: (0: do not wait). Pods started on the fallback range keep its IPs, and
    #: every kubelet shares that fallback, so a cluster that runs node IPAM
    #: (``k8py up``) waits rather than hand out colliding pod IPs.
    pod_cidr_wait: float = 0.0
    max_pods: int = 110
    #: pids.max of every pod's cgroup (``podPidsLimit``; 0 or -1: unlimited)
    pod_pids_limit: int = 0
    node_labels: dict[str, str] = field(default_factory=dict)
    register_with_taints: list[dict[str, str]] = field(default_factory=list)
    #: overrides of the host's capacity (cpu, memory, ephemeral-storage, pods)
    capacity: dict[str, str] = field(default_factory=dict)
    system_reserved: dict[str, str] = field(default_factory=dict)
    node_lease_duration_seconds: int = 40
    #: lease renewal interval (upstream: a quarter of the duration, 10 s)
    node_lease_renew_interval: float = 10.0
    node_status_update_frequency: float = 10.0
    node_status_report_frequency: float = 300.0
    #: CrashLoopBackOff and image pull backoff: base doubling up to max
    backoff_base: float = 10.0
    backoff_max: float = 300.0
    #: a container that ran this long resets its backoff
    backoff_reset: float = 600.0
    #: ``containerRuntimeEndpoint`` / ``imageServiceEndpoint``: a CRI runtime's sockets (empty: k8py's
    #: process runtime; an empty image endpoint is the runtime's, as upstream)
    container_runtime_endpoint: str = ""
    image_service_endpoint: str = ""
    container_log_max_size: int = 10 * 1024 * 1024
    container_log_max_files: int = 5
    static_pod_path: str = ""
    image_catalog: str = ""
    #: pull images with an explicit registry host from that registry (else everything is the catalog's)
    image_pull: bool = True
    #: registries whose images the host catalog stands in for (see k8py.kubelet.images.reference)
    catalog_registries: list[str] = field(default_factory=list)
    #: the node's registry credentials (Docker config.json); "" = <root-dir>/config.json, ~/.docker/config.json
    image_credentials: str = ""
    #: image GC (upstream's defaults): disk usage % that starts it, % it frees down to, min age, period
    image_gc_high_threshold_percent: int = 85
    image_gc_low_threshold_percent: int = 80
    image_minimum_gc_age: float = 120.0
    image_gc_period: float = 300.0
    use_bwrap: bool = True
    simulated: bool = False
    #: status manager: how many writes may be in flight at once
    status_concurrency: int = 16
    #: how often every pod is re-synced even without events (upstream syncFrequency 1 m)
    sync_frequency: float = 60.0
    #: the cluster DNS servers written into ClusterFirst pods' resolv.conf (none: Default policy)
    cluster_dns: list[str] = field(default_factory=list)
    cluster_domain: str = "cluster.local"
    #: the host resolv.conf that Default-policy pods get
    resolv_conf: str = "/etc/resolv.conf"
    #: node-pressure eviction (k8py.kubelet.eviction): signal -> quantity; hard None = upstream's defaults
    eviction_hard: dict[str, str] | None = None
    eviction_soft: dict[str, str] = field(default_factory=dict)
    #: signal -> seconds a soft threshold must hold
    eviction_soft_grace_period: dict[str, float] = field(default_factory=dict)
    #: the longest grace a pod evicted by a soft threshold gets (upstream's default 0: killed at once)
    eviction_max_pod_grace_period: float = 0.0
    #: signal -> quantity that must be free beyond a met threshold before it counts as relieved
    eviction_minimum_reclaim: dict[str, str] = field(default_factory=dict)
    eviction_pressure_transition_period: float = 300.0
    #: how often the eviction manager observes the node (upstream's housekeeping, 10 s)
    housekeeping_interval: float = 10.0

    @property
    def pods_dir(self) -> str:
        return os.path.join(self.root_dir, "pods")

    @property
    def logs_dir(self) -> str:
        return os.path.join(self.root_dir, "logs", "pods")

    @property
    def images_dir(self) -> str:
        return os.path.join(self.root_dir, "images")

    @property
    def runtime_dir(self) -> str:
        return os.path.join(self.root_dir, "runtime")


def _duration(value: Any) -> float:
    """Go durations as KubeletConfiguration writes them: ``10s``, ``1m0s``, ``500ms``."""
    if isinstance(value, (int, float)):
        return float(value)
    s, total, num = str(value), 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    i = 0
    while i < len(s):
        c = s[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        unit = "ms" if s[i : i + 2] == "ms" else c
        total += float(num or 0) * units[unit]
        num = ""
        i += len(unit)
    return total + (float(num) if num else 0.0)


_FILE_FIELDS: Mapping[str, tuple[str, Any]] = {
    "maxPods": ("max_pods", int),
    "podPidsLimit": ("pod_pids_limit", int),
    "podCIDR": ("pod_cidr", str),
    "address": ("address", str),
    "port": ("port", int),
    "staticPodPath": ("static_pod_path", str),
    "containerRuntimeEndpoint": ("container_runtime_endpoint", str),
    "imageServiceEndpoint": ("image_service_endpoint", str),
    "containerLogMaxSize": ("container_log_max_size", parse_quantity_bytes),
    "containerLogMaxFiles": ("container_log_max_files", int),
    "nodeLeaseDurationSeconds": ("node_lease_duration_seconds", int),
    "registerWithTaints": ("register_with_taints", list),
    "systemReserved": ("system_reserved", dict),
    "clusterDNS": ("cluster_dns", list),
    "clusterDomain": ("cluster_domain", str),
    "resolvConf": ("resolv_conf", str),
    "imageGCHighThresholdPercent": ("image_gc_high_threshold_percent", int),
    "imageGCLowThresholdPercent": ("image_gc_low_threshold_percent", int),
    "rotateCertificates": ("rotate_certificates", bool),
    "serverTLSBootstrap": ("server_tls_bootstrap", bool),
    "nodeStatusUpdateFrequency": ("node_status_update_frequency", _duration),
    "nodeStatusReportFrequency": ("node_status_report_frequency", _duration),
    "imageMinimumGCAge": ("image_minimum_gc_age", _duration),
    "syncFrequency": ("sync_frequency", _duration),
}


def load_kubelet_configuration(path: str, config: KubeletConfig) -> KubeletConfig:
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or {}
    if doc.get("kind", "KubeletConfiguration") != "KubeletConfiguration":
        raise ValueError(f"{path}: kind must be KubeletConfiguration, not {doc.get('kind')!r}")
    for key, (attr, conv) in _FILE_FIELDS.items():
        if key in doc:
            setattr(config, attr, conv(doc[key]))
    _load_eviction(doc, config)
    _load_auth(doc, config)
    return config


def _load_auth(doc: Mapping[str, Any], config: KubeletConfig) -> None:
    """``authentication`` (x509, webhook, anonymous) and ``authorization`` (mode, webhook caches)."""
    authn, authz = doc.get("authentication") or {}, doc.get("authorization") or {}
    x509, webhook, anonymous = authn.get("x509") or {}, authn.get("webhook") or {}, authn.get("anonymous") or {}
    if "clientCAFile" in x509:
        config.client_ca_file = str(x509["clientCAFile"])
    if "enabled" in webhook:
        config.authentication_token_webhook = bool(webhook["enabled"])
    if "cacheTTL" in webhook:
        config.authentication_token_webhook_cache_ttl = _duration(webhook["cacheTTL"])
    if "enabled" in anonymous:
        config.anonymous_auth = bool(anonymous["enabled"])
    if "mode" in authz:
        config.authorization_mode = str(authz["mode"])
    caches = authz.get("webhook") or {}
    if "cacheAuthorizedTTL" in caches:
        config.authorization_webhook_cache_authorized_ttl = _duration(caches["cacheAuthorizedTTL"])
    if "cacheUnauthorizedTTL" in caches:
        config.authorization_webhook_cache_unauthorized_ttl = _duration(caches["cacheUnauthorizedTTL"])


def _load_eviction(doc: Mapping[str, Any], config: KubeletConfig) -> None:
    """``evictionHard``/``evictionSoft`` (signal: quantity), ``evictionSoftGracePeriod`` (signal: duration),
    ``evictionMaxPodGracePeriod`` (seconds), ``evictionPressureTransitionPeriod`` (a duration)."""
    if "evictionHard" in doc:
        config.eviction_hard = {str(k): str(v) for k, v in (doc["evictionHard"] or {}).items()}
    if "evictionSoft" in doc:
        config.eviction_soft = {str(k): str(v) for k, v in (doc["evictionSoft"] or {}).items()}
    if "evictionSoftGracePeriod" in doc:
        config.eviction_soft_grace_period = {str(k): _duration(v) for k, v in (doc["evictionSoftGracePeriod"] or {}).items()}
    if "evictionMinimumReclaim" in doc:
        config.eviction_minimum_reclaim = {str(k): str(v) for k, v in (doc["evictionMinimumReclaim"] or {}).items()}
    if "evictionMaxPodGracePeriod" in doc:
        config.eviction_max_pod_grace_period = float(doc["evictionMaxPodGracePeriod"])
    if "evictionPressureTransitionPeriod" in doc:
        config.eviction_pressure_transition_period = _duration(doc["evictionPressureTransitionPeriod"])
