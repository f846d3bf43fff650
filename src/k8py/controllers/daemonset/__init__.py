"""The DaemonSet controller (``daemonset``): a pod on every eligible node.

Watches DaemonSets, pods, nodes and ControllerRevisions; writes pods (pinned
to their node by node affinity; the scheduler binds them), ControllerRevisions
and DaemonSet status. Modules: :mod:`.eligibility` (which nodes),
:mod:`.rolling_update` (the update plan), :mod:`.controller` (the sync).
"""

from __future__ import annotations

from k8py.controllers.context import ControllerContext
from k8py.controllers.daemonset.controller import DaemonSetController

__all__ = ["DaemonSetController", "new_controller"]


def new_controller(ctx: ControllerContext) -> DaemonSetController:
    return DaemonSetController(ctx)
