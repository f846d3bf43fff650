"""The ReplicationController manager: the ReplicaSet controller on core/v1
ReplicationControllers (a plain label-map selector instead of a
LabelSelector; work queue ``replicationmanager``, Events from
``replication-controller``), as upstream runs the same code for both."""

from __future__ import annotations

from k8py.controllers.context import ControllerContext
from k8py.controllers.replicaset import REPLICATION_CONTROLLER_KIND, ReplicaSetController

__all__ = ["new_controller"]


def new_controller(ctx: ControllerContext) -> ReplicaSetController:
    return ReplicaSetController(ctx, REPLICATION_CONTROLLER_KIND)
