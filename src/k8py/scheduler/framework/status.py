"""Outcomes of plugin calls: a :class:`Status` with a :class:`Code`, never an exception.

As upstream's ``framework.Status``: ``None`` stands for Success wherever a
plugin returns ``Status | None`` (the hot paths return ``None`` per node, so
no object is made for the common case). The codes:

=============================  =================================================
Success                        the plugin is satisfied; go on
Error                          an internal error; the pod is retried with backoff
Unschedulable                  this node does not fit now; preemption may help
UnschedulableAndUnresolvable   this node cannot fit; preemption will not help
Wait                           (Permit) hold the pod until allowed or rejected
Skip                           (PreFilter/PreScore) this plugin has nothing to do
                               for this pod: its Filter/Score is not called
Pending                        the pod waits for something outside the scheduler
=============================  =================================================

:func:`merge` combines statuses of several plugins (upstream
``PluginToStatus.Merge``): the most severe code wins, reasons are collected.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable

__all__ = ["Code", "Status", "merge", "unschedulable", "unresolvable", "as_error", "is_success", "is_rejected"]


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success", Code.ERROR: "Error", Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable", Code.WAIT: "Wait",
    Code.SKIP: "Skip", Code.PENDING: "Pending",
}
_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})
# merge precedence, most severe first
_SEVERITY = (Code.ERROR, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING, Code.UNSCHEDULABLE)


@dataclass(slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    #: the plugin that returned it (filled in by the framework)
    plugin: str = ""
    error: BaseException | None = field(default=None, compare=False)

    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    def is_rejected(self) -> bool:
        return self.code in _REJECTED

    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    def is_wait(self) -> bool:
        return self.code is Code.WAIT

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        if not self.plugin:
            self.plugin = plugin
        return self

    def __str__(self) -> str:
        return f"{self.code.label}: {self.message()}" if self.reasons else self.code.label


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def as_error(err: BaseException) -> Status:
    return Status(Code.ERROR, (str(err),), error=err)


def is_success(status: Status | None) -> bool:
    return status is None or status.code is Code.SUCCESS


def is_rejected(status: Status | None) -> bool:
    return status is not None and status.code in _REJECTED


def merge(statuses: Iterable[Status | None]) -> Status | None:
    """The statuses of several plugins as one: the most severe code, every reason."""
    found = [s for s in statuses if s is not None and s.code is not Code.SUCCESS and s.code is not Code.SKIP]
    if not found:
        return None
    codes = {s.code for s in found}
    code = next((c for c in _SEVERITY if c in codes), found[0].code)
    reasons: list[str] = []
    for s in found:
        reasons.extend(s.reasons)
    first = next(s for s in found if s.code is code)
    return Status(code, tuple(reasons), plugin=first.plugin, error=first.error)
