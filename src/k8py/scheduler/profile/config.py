"""``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``) from a
YAML file, with upstream's defaults.

Read: ``profiles`` (schedulerName, ``plugins`` per extension point and
``multiPoint`` with enabled/disabled and weights, ``pluginConfig`` args, a
per-profile ``percentageOfNodesToScore``), ``percentageOfNodesToScore``,
``podInitialBackoffSeconds``, ``podMaxBackoffSeconds``, ``leaderElection``,
``clientConnection.qps``/``burst`` (upstream's 50 and 100; k8py applies them to
the Events client only, as upstream's separate event clientset has its own
limiter: the scheduling requests are not rate-limited client-side).
Anything else is ignored with a warning. Errors are ``ValueError`` naming the
field, so the command can print what to fix.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["SchedulerConfig", "ProfileConfig", "LeaderElectionConfig", "load_config", "parse_config", "parse_duration"]

logger = logging.getLogger(__name__)

API_VERSION = "kubescheduler.config.k8s.io/v1"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_KNOWN = {"apiVersion", "kind", "profiles", "percentageOfNodesToScore", "podInitialBackoffSeconds",
          "podMaxBackoffSeconds", "leaderElection", "clientConnection", "parallelism"}


def parse_duration(value: Any, field_name: str) -> float:
    """A Go duration (``15s``, ``1m30s``) or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"{field_name}: invalid duration {value!r} (write it like 15s or 1m30s)")
    return total


@dataclass
class LeaderElectionConfig:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_namespace: str = "kube-system"
    resource_name: str = "kube-scheduler"


@dataclass
class ProfileConfig:
    scheduler_name: str = "default-scheduler"
    #: extension point (or "multiPoint") -> {"enabled": [(name, weight)], "disabled": [name]}
    plugins: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    plugin_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None


@dataclass
class SchedulerConfig:
    profiles: list[ProfileConfig] = field(default_factory=lambda: [ProfileConfig()])
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff: float = 1.0
    pod_max_backoff: float = 10.0
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)
    #: clientConnection: the Events' writes per second and burst
    client_qps: float = 50.0
    client_burst: int = 100


def _plugin_set(raw: Any, where: str) -> dict[str, list[Any]]:
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be an object with enabled/disabled lists")
    enabled = []
    for i, p in enumerate(raw.get("enabled") or ()):
        if not isinstance(p, dict) or not p.get("name"):
            raise ValueError(f"{where}.enabled[{i}].name: Required value")
        enabled.append((p["name"], int(p.get("weight") or 0)))
    disabled = []
    for i, p in enumerate(raw.get("disabled") or ()):
        if not isinstance(p, dict) or not p.get("name"):
            raise ValueError(f"{where}.disabled[{i}].name: Required value")
        disabled.append(p["name"])
    return {"enabled": enabled, "disabled": disabled}


def _percentage(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100:
        raise ValueError(f"{where}: Invalid value: {value!r}: not in valid range [0-100]")
    return value


def parse_config(doc: dict[str, Any]) -> SchedulerConfig:
    if not isinstance(doc, dict):
        raise ValueError("the scheduler configuration must be a KubeSchedulerConfiguration object")
    if doc.get("kind", "KubeSchedulerConfiguration") != "KubeSchedulerConfiguration":
        raise ValueError(f"kind: expected KubeSchedulerConfiguration, got {doc.get('kind')!r}")
    if doc.get("apiVersion", API_VERSION) != API_VERSION:
        raise ValueError(f"apiVersion: expected {API_VERSION}, got {doc.get('apiVersion')!r}")
    for key in set(doc) - _KNOWN:
        logger.warning("ignoring unsupported configuration field", extra={"field": key})
    config = SchedulerConfig()
    config.percentage_of_nodes_to_score = _percentage(doc.get("percentageOfNodesToScore"), "percentageOfNodesToScore") or 0
    if "podInitialBackoffSeconds" in doc:
        config.pod_initial_backoff = float(doc["podInitialBackoffSeconds"])
    if "podMaxBackoffSeconds" in doc:
        config.pod_max_backoff = float(doc["podMaxBackoffSeconds"])
    if config.pod_initial_backoff <= 0 or config.pod_max_backoff < config.pod_initial_backoff:
        raise ValueError("podInitialBackoffSeconds must be > 0 and podMaxBackoffSeconds at least as large")
    conn = doc.get("clientConnection") or {}
    if "qps" in conn:
        config.client_qps = float(conn["qps"])
    if "burst" in conn:
        config.client_burst = int(conn["burst"])
    if config.client_qps <= 0 or config.client_burst < 1:
        raise ValueError("clientConnection: qps must be > 0 and burst at least 1")
    le = doc.get("leaderElection") or {}
    config.leader_election = LeaderElectionConfig(
        leader_elect=bool(le.get("leaderElect", True)),
        lease_duration=parse_duration(le.get("leaseDuration", "15s"), "leaderElection.leaseDuration"),
        renew_deadline=parse_duration(le.get("renewDeadline", "10s"), "leaderElection.renewDeadline"),
        retry_period=parse_duration(le.get("retryPeriod", "2s"), "leaderElection.retryPeriod"),
        resource_namespace=le.get("resourceNamespace") or "kube-system",
        resource_name=le.get("resourceName") or "kube-scheduler",
    )
    raw_profiles = doc.get("profiles")
    if raw_profiles:
        profiles = []
        seen: set[str] = set()
        for i, raw in enumerate(raw_profiles):
            where = f"profiles[{i}]"
            name = (raw or {}).get("schedulerName") or "default-scheduler"
            if name in seen:
                raise ValueError(f"{where}.schedulerName: Duplicate value: {name!r}")
            seen.add(name)
            plugins = {point: _plugin_set(value, f"{where}.plugins.{point}") for point, value in ((raw.get("plugins") or {}).items())}
            args = {}
            for j, pc in enumerate(raw.get("pluginConfig") or ()):
                if not isinstance(pc, dict) or not pc.get("name"):
                    raise ValueError(f"{where}.pluginConfig[{j}].name: Required value")
                args[pc["name"]] = pc.get("args") or {}
            profiles.append(ProfileConfig(name, plugins, args, _percentage(raw.get("percentageOfNodesToScore"), f"{where}.percentageOfNodesToScore")))
        config.profiles = profiles
    return config


def load_config(path: str) -> SchedulerConfig:
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as err:
        raise ValueError(f"cannot read the scheduler configuration {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{path} is not valid YAML: {err}") from None
    return parse_config(doc or {})
