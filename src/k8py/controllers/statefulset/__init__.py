"""The StatefulSet controller (``statefulset``): stable, ordered pod identities.

Watches StatefulSets, pods and ControllerRevisions; writes pods
(``<set>-<ordinal>``), ControllerRevisions and StatefulSet status.
``volumeClaimTemplates`` are accepted and kept, but no claims are made yet.
Modules: :mod:`.ordinals` (names and ranges), :mod:`.controller` (the sync).
"""

from __future__ import annotations

from k8py.controllers.context import ControllerContext
from k8py.controllers.statefulset.controller import StatefulSetController

__all__ = ["StatefulSetController", "new_controller"]


def new_controller(ctx: ControllerContext) -> StatefulSetController:
    return StatefulSetController(ctx)
