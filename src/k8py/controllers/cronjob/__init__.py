"""The CronJob controller (``cronjob``): Jobs on a cron schedule.

Watches CronJobs and Jobs; writes Jobs (create, delete for ``Replace`` and
history limits) and CronJob status (``active``, ``lastScheduleTime``,
``lastSuccessfulTime``). Modules: :mod:`.schedule` (the cron parser),
:mod:`.scheduling` (which slot is due), :mod:`.controller` (the sync).
"""

from __future__ import annotations

from k8py.controllers.context import ControllerContext
from k8py.controllers.cronjob.controller import CronJobController

__all__ = ["CronJobController", "new_controller"]


def new_controller(ctx: ControllerContext) -> CronJobController:
    return CronJobController(ctx)
