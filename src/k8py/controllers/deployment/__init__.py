"""The Deployment controller (``deployment``): ReplicaSets named by
pod-template-hash, RollingUpdate and Recreate rollouts, revisions and history,
pause/resume, the progress deadline, proportional scaling.

Modules: ``replica_sets`` (new/old ReplicaSets, revisions, hashes,
fenceposts), ``scaling`` (pure scaling plans), ``conditions`` (status and
conditions, pure), ``controller`` (handlers, ``sync``, scaling writes),
``rollout`` (RollingUpdate, Recreate, history clean-up) and ``progress``
(status and the progress deadline) — the last two mixins of the controller.
Watches Deployments, ReplicaSets and Pods; writes ReplicaSets and the
Deployment's status (and its ``revision`` annotation through it).
"""

from __future__ import annotations

from k8py.controllers.context import ControllerContext
from k8py.controllers.deployment.controller import DeploymentController

__all__ = ["DeploymentController", "new_controller"]


def new_controller(ctx: ControllerContext) -> DeploymentController:
    return DeploymentController(ctx)
