"""The extension points: one small protocol each, saying when it is called and
what its result means (kube-scheduler's ``framework/interface.go``).

Scheduling cycle (one pod at a time, synchronous, on the event loop)::

    QueueSort ─ PreEnqueue ─▶ PreFilter ─▶ Filter (per node) ─▶ [PostFilter if none fit]
        ─▶ PreScore ─▶ Score (per node) ─▶ NormalizeScore ─▶ Reserve ─▶ Permit

Binding cycle (its own task, concurrent with the next scheduling cycles)::

    WaitOnPermit ─▶ PreBind ─▶ Bind ─▶ PostBind     (Unreserve on any failure)

Results are :class:`~k8py.scheduler.framework.status.Status` values or ``None``
for Success. A plugin that implements several points is registered once and
called at each. Plugins that want the per-node loop cheap also implement the
*batch* forms (``filter_nodes``, ``score_nodes``), which the framework prefers:
one call per cycle instead of one per node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Protocol, Sequence, runtime_checkable

from k8py.scheduler.framework.status import Status
from k8py.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo

if TYPE_CHECKING:
    from k8py.scheduler.framework.diagnosis import Diagnosis

__all__ = [
    "CycleState", "PreFilterResult", "PostFilterResult", "Handle", "Plugin", "QueueSortPlugin",
    "PreEnqueuePlugin", "PreFilterPlugin", "FilterPlugin", "BatchFilterPlugin", "PostFilterPlugin",
    "PreScorePlugin", "ScorePlugin", "BatchScorePlugin", "NormalizeScorePlugin", "ReservePlugin",
    "PermitPlugin", "PreBindPlugin", "BindPlugin", "PostBindPlugin", "EnqueueExtensions",
    "MAX_NODE_SCORE", "ClusterEventHint",
]

MAX_NODE_SCORE = 100


class CycleState:
    """Per-cycle scratch space shared by the plugins of one pod's cycle (upstream
    ``CycleState``): what PreFilter computes, Filter reads. ``skip_filter`` and
    ``skip_score`` hold the plugins that answered Skip at PreFilter / PreScore."""

    __slots__ = ("data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def read(self, key: str) -> Any:
        return self.data.get(key)

    def write(self, key: str, value: Any) -> None:
        self.data[key] = value

    def clone(self) -> CycleState:
        """A copy for preemption's what-if runs: plugin data that is mutated per
        node must implement ``clone()``; everything else is shared."""
        c = CycleState()
        c.data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self.data.items()}
        c.skip_filter = set(self.skip_filter)
        c.skip_score = set(self.skip_score)
        return c


@dataclass(slots=True)
class PreFilterResult:
    """A PreFilter may narrow the nodes to evaluate (``None``: all nodes)."""

    node_names: set[str] | None = None


@dataclass(slots=True)
class PostFilterResult:
    nominated_node_name: str = ""


class Handle(Protocol):
    """What the framework gives plugins: the node views of this cycle, the
    nominated pods, the waiting pods, and the cluster client (DefaultBinder,
    DefaultPreemption)."""

    @property
    def nodes(self) -> Sequence[NodeInfo]: ...

    def node(self, name: str) -> NodeInfo | None: ...

    @property
    def client(self) -> Any: ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def run_filters_with_nominated_pods(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None: ...

    def run_pre_filter_extension_add(self, state: CycleState, pod: PodInfo, add: PodInfo, node: NodeInfo) -> None: ...

    def run_pre_filter_extension_remove(self, state: CycleState, pod: PodInfo, remove: PodInfo, node: NodeInfo) -> None: ...

    def get_waiting_pod(self, uid: str) -> Any: ...


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    """Orders the active queue: ``less(a, b)`` is True when ``a`` goes first. Exactly one per profile."""

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    """Before a pod enters the active queue. Non-success keeps it gated (SchedulingGated)
    until an update of the pod lets every PreEnqueue pass."""

    def pre_enqueue(self, pod: PodInfo) -> Status | None: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    """Once per cycle before Filter. Unschedulable* fails the pod on every node;
    Skip means this plugin's Filter is not called this cycle; a result may
    narrow the candidate nodes. ``add_pod``/``remove_pod`` (the PreFilter
    extensions) keep its state right when preemption removes or adds pods."""

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Per node: ``None`` if the pod may run there, else why not (Unschedulable:
    preemption may help; UnschedulableAndUnresolvable: it cannot)."""

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None: ...


@runtime_checkable
class BatchFilterPlugin(FilterPlugin, Protocol):
    """The batch form: the nodes that pass, in order; each failing node's status
    goes into ``failed[node.name]``. Must agree with :meth:`filter`."""

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], failed: dict[str, Status]) -> list[NodeInfo]: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    """Only when no node passed Filter (preemption). A result with a nominated
    node means the pod may fit there once victims are gone; the pod is still
    requeued and retried."""

    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: "Diagnosis") -> Awaitable[tuple[PostFilterResult | None, Status | None]]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    """Once per cycle with the feasible nodes, before Score. Skip: its Score is not called."""

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Per feasible node: an integer; after normalization in [0, MAX_NODE_SCORE],
    then multiplied by the plugin's weight."""

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int: ...


@runtime_checkable
class BatchScorePlugin(ScorePlugin, Protocol):
    """The batch form of :meth:`score`, one int per node in order."""

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]: ...


@runtime_checkable
class NormalizeScorePlugin(ScorePlugin, Protocol):
    """Rescales the raw scores of all feasible nodes in place (ScoreExtensions)."""

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """After a node is chosen and the pod assumed. Failure aborts the cycle;
    ``unreserve`` is then called on every Reserve plugin (in reverse order), as
    it is when anything later fails. ``unreserve`` must be idempotent."""

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """Last step of the scheduling cycle. Success: bind; Wait: hold the pod (up to
    the returned timeout in seconds) until a plugin allows or rejects it
    through the waiting pod; Unschedulable*: abort and requeue."""

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    """In the binding cycle, before Bind (e.g. provision volumes). Failure: Unreserve and requeue."""

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """Writes the binding. Skip: let the next Bind plugin do it. The first non-Skip result ends Bind."""

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    """After a successful bind; informational (cleanup), cannot fail."""

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ClusterEventHint:
    """A cluster event a plugin cares about, and an optional queueing hint:
    ``hint(pod, old, new) -> bool`` says whether this event may make ``pod``
    (rejected by the plugin) schedulable. No hint means always requeue."""

    resource: str  # "Node" | "Pod" | "AssignedPod" | ...
    actions: frozenset[str]  # "Add", "Delete", "UpdateNodeLabel", ...
    hint: Any = field(default=None, compare=False)


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    """A plugin that can reject pods says which cluster events may undo that."""

    def events_to_register(self) -> list[ClusterEventHint]: ...
