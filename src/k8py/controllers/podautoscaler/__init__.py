"""The horizontal pod autoscaler controller (``horizontalpodautoscaling``).

``controller``  the sync: scale subresource, metrics, status, events
``proposals``   one replica proposal per metric (Resource, Pods, Object, External)
``replicas``    upstream's replica calculation (tolerance, missing/unready pods)
``behavior``    stabilization windows and scaling policies, or the older rules
``metrics``     the seam to the metrics APIs (resource, custom, external)
``monitor``     the controller's own Prometheus metrics
"""

from __future__ import annotations

from k8py.controllers.context import ControllerContext
from k8py.controllers.podautoscaler.controller import HorizontalController

__all__ = ["HorizontalController", "new_controller"]


def new_controller(ctx: ControllerContext) -> HorizontalController:
    return HorizontalController(ctx)
