"""The Job controller (``job``): runs a Job's pods until enough succeed or it fails.

Watches Jobs and pods; writes pods (create, delete, the job-tracking
finalizer) and Job status. It is the source of truth for a Job's counts and
conditions. Modules: :mod:`.controller` (the sync), :mod:`.tracking` (counting finished
pods once), :mod:`.verdicts` (finished or not), :mod:`.conditions`,
:mod:`.indexes` (Indexed mode), :mod:`.pod_failure_policy`, :mod:`.backoff`.
"""

from __future__ import annotations

from k8py.controllers.context import ControllerContext
from k8py.controllers.job.controller import JobController

__all__ = ["JobController", "new_controller"]


def new_controller(ctx: ControllerContext) -> JobController:
    return JobController(ctx)
