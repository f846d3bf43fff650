"""Why a pod fits nowhere: :class:`Diagnosis` and :class:`FitError`, with
upstream's message format (``0/3 nodes are available: 1 Insufficient cpu, 2
node(s) had untolerated taint {dedicated: gpu}. preemption: ...``).

The message counts each reason across nodes and sorts the ``"<count>
<reason>"`` strings as text, exactly as ``FitError.Error`` does; when PreFilter
rejected the pod, only its message is shown (every node carries the same
status). The PostFilter (preemption) message follows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from k8py.scheduler.framework.status import Code, Status

__all__ = ["Diagnosis", "FitError", "NO_NODE_AVAILABLE", "fit_error_message"]

NO_NODE_AVAILABLE = "0/{} nodes are available"


@dataclass(slots=True)
class Diagnosis:
    #: node name -> why it failed Filter (nodes not evaluated are absent)
    node_to_status: dict[str, Status] = field(default_factory=dict)
    #: plugins that returned Unschedulable*/Pending (their events can requeue the pod)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    #: the status every node not in node_to_status would have (PreFilter rejection)
    absent_status: Status | None = None

    def status_for(self, node_name: str) -> Status | None:
        return self.node_to_status.get(node_name, self.absent_status)

    def record(self, node_name: str, status: Status) -> None:
        self.node_to_status[node_name] = status
        if status.code is Code.PENDING:
            self.pending_plugins.add(status.plugin)
        elif status.plugin:
            self.unschedulable_plugins.add(status.plugin)


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    msg = NO_NODE_AVAILABLE.format(num_all_nodes) + ":"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        counts: Counter[str] = Counter()
        for status in diagnosis.node_to_status.values():
            counts.update(status.reasons)
        reasons = sorted(f"{n} {reason}" for reason, n in counts.items())
        if reasons:
            msg += f" {', '.join(reasons)}."
    if diagnosis.post_filter_msg:
        # the PostFilter message is a sentence of its own (preemption's ends in its
        # own FitError message): one final period, as the example shows
        msg += f" {diagnosis.post_filter_msg.rstrip('.')}."
    return msg


class FitError(Exception):
    """The pod fits on no node; ``str()`` is the FailedScheduling message."""

    def __init__(self, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__(pod_key)
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        return fit_error_message(self.num_all_nodes, self.diagnosis)
