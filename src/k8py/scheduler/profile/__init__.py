"""Scheduler configuration (``KubeSchedulerConfiguration``) and the profiles built from it."""

from k8py.scheduler.profile.config import SchedulerConfig, load_config, parse_config
from k8py.scheduler.profile.profiles import build_framework, build_frameworks

__all__ = ["SchedulerConfig", "load_config", "parse_config", "build_framework", "build_frameworks"]
