"""The ClusterRole aggregation controller (``clusterrole-aggregation``), as upstream's.

A ClusterRole with an ``aggregationRule`` owns no rules of its own: its rules
are the union of the rules of every other ClusterRole its
``clusterRoleSelectors`` match (the bootstrap ``admin``, ``edit`` and ``view``
gather ``system:aggregate-to-*`` and anything an operator labels
``rbac.authorization.k8s.io/aggregate-to-view: "true"``).

Queue ``ClusterRoleAggregator`` of aggregated role names: any ClusterRole
change queues every aggregated role (a label or rule anywhere may change any
aggregate). ``sync`` gathers the matching roles' rules in name order, drops
exact duplicates, and writes the role only when its rules differ (a merge
patch of ``rules``).
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import NotFound
from k8py.api.selectors import label_selector_from_dict
from k8py.client.resources import Resource
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController

__all__ = ["ClusterRoleAggregationController", "new_controller", "CLUSTER_ROLES", "aggregated_rules"]

CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", False, "ClusterRole")
Object = dict[str, Any]


def aggregated_rules(role: Object, roles: list[Object]) -> list[Object]:
    """The rules ``role``'s aggregationRule gathers from ``roles``."""
    name = (role.get("metadata") or {}).get("name")
    selectors = [label_selector_from_dict(s) for s in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []]
    rules: list[Object] = []
    for other in sorted(roles, key=lambda r: (r.get("metadata") or {}).get("name", "")):
        meta = other.get("metadata") or {}
        if meta.get("name") == name:
            continue
        labels = meta.get("labels") or {}
        if not any(s.matches(labels) for s in selectors):
            continue
        for rule in other.get("rules") or []:
            if rule not in rules:
                rules.append(rule)
    return rules


class ClusterRoleAggregationController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="clusterrole-aggregation", queue_name="ClusterRoleAggregator")
        self.roles = ctx.informers.informer(CLUSTER_ROLES)
        self.wait_for(self.roles)
        self.roles.add_event_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new),
                                     on_delete=self._changed)

    def _changed(self, obj: Any) -> None:
        for role in self.roles.lister.list():
            if role.get("aggregationRule"):
                self.queue.add((role.get("metadata") or {}).get("name"))

    async def sync(self, name: str) -> None:
        role = self.roles.lister.try_get(None, name)
        if role is None or not role.get("aggregationRule"):
            return
        rules = aggregated_rules(role, self.roles.lister.list())
        if rules == (role.get("rules") or []):
            return
        try:
            await self.client.patch(CLUSTER_ROLES, None, name, {"rules": rules})
        except NotFound:
            return


def new_controller(ctx: ControllerContext) -> ClusterRoleAggregationController:
    return ClusterRoleAggregationController(ctx)
