"""Build one :class:`~k8py.scheduler.framework.runtime.Framework` per profile:
the default multi-point plugins, then the profile's ``multiPoint`` changes,
then each extension point's own enabled/disabled lists (``"*"`` disables all
that came before), with score weights (a weight of 0 means the default, 1).

One plugin instance per name serves every extension point it is enabled at.
All profiles must share the QueueSort plugin (there is one queue).
"""

from __future__ import annotations

from typing import Any

from k8py.scheduler.framework.runtime import EXTENSION_POINTS, Framework
from k8py.scheduler.framework.waiting_pods import WaitingPods
from k8py.scheduler.plugins import DEFAULT_MULTI_POINT, REGISTRY
from k8py.scheduler.profile.config import ProfileConfig, SchedulerConfig

__all__ = ["build_framework", "build_frameworks"]


def _apply(current: list[tuple[str, int]], change: dict[str, list[Any]] | None) -> list[tuple[str, int]]:
    if not change:
        return current
    disabled = set(change.get("disabled") or ())
    kept = [] if "*" in disabled else [(n, w) for n, w in current if n not in disabled]
    for name, weight in change.get("enabled") or ():
        existing = [i for i, (n, _) in enumerate(kept) if n == name]
        if existing:
            kept[existing[0]] = (name, weight or kept[existing[0]][1])
        else:
            kept.append((name, weight))
    return kept


def build_framework(profile: ProfileConfig, handle: Any, *, waiting_pods: WaitingPods | None = None,
                    default_percentage: int = 0) -> Framework:
    multi = _apply([(n, w) for n, w in DEFAULT_MULTI_POINT if n in REGISTRY], profile.plugins.get("multiPoint"))
    instances: dict[str, Any] = {}

    def instance(name: str) -> Any:
        if name not in instances:
            factory = REGISTRY.get(name)
            if factory is None:
                raise ValueError(f"profile {profile.scheduler_name!r}: plugin {name!r} does not exist "
                                 f"(known plugins: {', '.join(sorted(REGISTRY))})")
            instances[name] = factory(profile.plugin_args.get(name), handle)
        return instances[name]

    points: dict[str, list[Any]] = {}
    weights: dict[str, int] = {}
    for point, method in EXTENSION_POINTS.items():
        candidates = [(n, w) for n, w in multi if hasattr(instance(n), method)]
        chosen = _apply(candidates, profile.plugins.get(point))
        points[point] = []
        for name, weight in chosen:
            plugin = instance(name)
            if not hasattr(plugin, method):
                raise ValueError(f"profile {profile.scheduler_name!r}: plugin {name!r} does not extend {point}")
            points[point].append(plugin)
            if point == "score":
                weights[name] = weight or 1
    if len(points["queueSort"]) != 1:
        raise ValueError(f"profile {profile.scheduler_name!r}: exactly one queueSort plugin must be enabled")
    if not points["bind"]:
        raise ValueError(f"profile {profile.scheduler_name!r}: at least one bind plugin must be enabled")
    percentage = profile.percentage_of_nodes_to_score
    return Framework(profile.scheduler_name, points, weights=weights, waiting_pods=waiting_pods,
                     percentage_of_nodes_to_score=percentage if percentage is not None else default_percentage)


def build_frameworks(config: SchedulerConfig, handle: Any, *, waiting_pods: WaitingPods | None = None) -> dict[str, Framework]:
    frameworks = {p.scheduler_name: build_framework(p, handle, waiting_pods=waiting_pods,
                                                    default_percentage=config.percentage_of_nodes_to_score)
                  for p in config.profiles}
    sorts = {type(f.queue_sort).__name__ for f in frameworks.values()}
    if len(sorts) > 1:
        raise ValueError("all profiles must use the same queueSort plugin")
    return frameworks
