"""DefaultPreemption (PostFilter): when no node fits, find a node where
evicting lower-priority pods makes room, delete those victims gracefully and
nominate the node (``status.nominatedNodeName``) for the pod, which is then
retried (upstream ``defaultpreemption`` + ``preemption.Evaluator``).

1. Eligibility: not with ``preemptionPolicy: Never``; not while a lower-priority
   pod is still terminating on the node already nominated (the room is coming).
2. Candidates: nodes whose Filter failure was not UnschedulableAndUnresolvable
   (the others say "Preemption is not helpful for scheduling").
3. Per node (:func:`select_victims_on_node`): remove every lower-priority pod;
   if the pod still does not fit, the node is out; otherwise add the victims
   back most important first and keep each one whose return still lets the
   pod fit (the reprieve). No lower-priority pod at all: "No preemption
   victims found for incoming pod".
4. Pick (:func:`pick_one_node`): the fewest PDB violations, then the lowest
   highest-victim priority, the smallest priority sum, the fewest victims,
   and the latest start of the most important victims.
5. Act: delete the victims (Event ``Preempted`` on each), clear the nomination
   of lower-priority pods nominated to that node, return the node. With a
   handle that can ``spawn`` tasks (the scheduler) this runs on its own task
   and the node is returned at once (asynchronous preemption).

PodDisruptionBudgets are not consulted: k8py does not serve ``policy/v1`` yet.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

from k8py.api.errors import NotFound, StatusError
from k8py.client.resources import PODS
from k8py.scheduler.framework.diagnosis import Diagnosis, fit_error_message
from k8py.scheduler.framework.interfaces import CycleState, PostFilterResult
from k8py.scheduler.framework.status import Code, Status, as_error, unresolvable, unschedulable
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import DEFAULT_PREEMPTION

__all__ = ["DefaultPreemption", "Candidate", "select_victims_on_node", "pick_one_node", "eligible_to_preempt",
           "NOT_HELPFUL", "NO_VICTIMS"]

logger = logging.getLogger(__name__)

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100


@dataclass(slots=True)
class Candidate:
    node: str
    victims: list[PodInfo] = field(default_factory=list)
    pdb_violations: int = 0


def _start_time(pod: PodInfo) -> str:
    status = pod.pod.get("status") or {}
    return status.get("startTime") or (pod.pod.get("metadata") or {}).get("creationTimestamp") or ""


def _more_important(a: PodInfo, b: PodInfo) -> bool:
    if a.priority != b.priority:
        return a.priority > b.priority
    return _start_time(a) < _start_time(b)  # started earlier: more important


def eligible_to_preempt(pod: PodInfo, node_of: Any) -> str:
    """'' when the pod may preempt, else why not (upstream ``PodEligibleToPreemptOthers``)."""
    if pod.spec.get("preemptionPolicy") == "Never":
        return "not eligible due to preemptionPolicy=Never."
    nominated = (pod.pod.get("status") or {}).get("nominatedNodeName") or ""
    if nominated:
        node = node_of(nominated)
        if node is not None:
            for p in node.pods.values():
                if (p.pod.get("metadata") or {}).get("deletionTimestamp") and p.priority < pod.priority:
                    return "not eligible due to a terminating pod on the nominated node."
    return ""


def select_victims_on_node(fwk: Any, state: CycleState, pod: PodInfo, node: NodeInfo,
                           filter_fn: Any) -> tuple[list[PodInfo], Status | None]:
    """The fewest lower-priority pods to remove from ``node`` so ``pod`` fits.
    ``filter_fn(state, pod, node)`` runs the filters (with nominated pods)."""
    state = state.clone()
    node = node.clone()
    potential = [p for p in node.pods.values() if p.priority < pod.priority]
    if not potential:
        return [], unresolvable(NO_VICTIMS)
    for p in potential:
        node.remove_pod(p.key)
        fwk.run_pre_filter_extension_remove(state, pod, p, node)
    status = filter_fn(state, pod, node)
    if status is not None:
        return [], status
    potential.sort(key=lambda p: (-p.priority, _start_time(p)))
    victims = []
    for p in potential:
        node.add_pod(p)
        fwk.run_pre_filter_extension_add(state, pod, p, node)
        if filter_fn(state, pod, node) is not None:
            node.remove_pod(p.key)
            fwk.run_pre_filter_extension_remove(state, pod, p, node)
            victims.append(p)
    return victims, None


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate | None:
    if not candidates:
        return None

    def key(c: Candidate) -> tuple[Any, ...]:
        highest = max((v.priority for v in c.victims), default=-(2**31))
        total = sum(v.priority + 2**31 for v in c.victims)  # shift so negative priorities still add up
        top = [v for v in c.victims if v.priority == highest]
        latest = max((_start_time(v) for v in top), default="")
        # earlier is better for every field but the start time, where later is better
        return (c.pdb_violations, highest, total, len(c.victims), _negate(latest))

    return min(candidates, key=key)


def _negate(text: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in text)


class DefaultPreemption:
    name = DEFAULT_PREEMPTION

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        args = args or {}
        self.handle = handle
        self.min_percentage = int(args.get("minCandidateNodesPercentage", MIN_CANDIDATE_NODES_PERCENTAGE))
        self.min_absolute = int(args.get("minCandidateNodesAbsolute", MIN_CANDIDATE_NODES_ABSOLUTE))
        self.rng = random.Random()
        #: uids of pods whose victims are being deleted on their own task
        self.in_flight: set[str] = set()

    async def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        metrics = getattr(self.handle, "metrics", None)
        if metrics is not None:
            metrics.preemption_attempts.inc()
        nodes = list(self.handle.nodes)
        if pod.uid and pod.uid in self.in_flight:
            return None, unschedulable("preemption: the pod's preemption of other pods is still in progress")
        why = eligible_to_preempt(pod, self.handle.node)
        if why:
            return None, unschedulable(f"preemption: {why}")
        fwk = self.handle.framework_for(pod)
        statuses: dict[str, Status] = {}
        potential = []
        for node in nodes:
            status = diagnosis.status_for(node.name)
            if status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                statuses[node.name] = unresolvable(NOT_HELPFUL)
            else:
                potential.append(node)
        candidates: list[Candidate] = []
        if potential:
            want = max(len(potential) * self.min_percentage // 100, self.min_absolute)
            offset = self.rng.randrange(len(potential))
            for i in range(len(potential)):
                node = potential[(offset + i) % len(potential)]
                victims, status = select_victims_on_node(fwk, state, pod, node, self.handle.run_filters_with_nominated_pods)
                if status is None and victims:
                    candidates.append(Candidate(node.name, victims))
                    if len(candidates) >= want:
                        break
                elif status is not None:
                    statuses[node.name] = status
                else:
                    statuses[node.name] = as_error(RuntimeError(f"expected at least one victim pod on node {node.name!r}"))
        best = pick_one_node(candidates)
        if best is None:
            message = fit_error_message(len(nodes), Diagnosis(node_to_status=statuses))
            return PostFilterResult(""), unschedulable(f"preemption: {message}")
        if metrics is not None:
            metrics.preemption_victims.observe(len(best.victims))
        spawn = getattr(self.handle, "spawn", None)
        if spawn is not None:
            # asynchronous preemption (upstream's PreemptionAsync): the victims are
            # deleted on their own task, so the scheduling loop does not wait for
            # the API calls; the pod is nominated at once and retried when the
            # deletions free the room (or preempts again if they failed)
            self.in_flight.add(pod.uid)
            spawn(self._prepare_logged(pod, best), f"preempt-{pod.key}")
            return PostFilterResult(best.node), None
        status = await self._prepare(pod, best)
        if status is not None:
            return None, status
        return PostFilterResult(best.node), None

    async def _prepare_logged(self, pod: PodInfo, candidate: Candidate) -> None:
        try:
            status = await self._prepare(pod, candidate)
        finally:
            self.in_flight.discard(pod.uid)
        if status is not None:
            logger.warning("preemption failed", extra={"pod": pod.key, "node": candidate.node, "error": status.message()})

    async def _prepare(self, pod: PodInfo, candidate: Candidate) -> Status | None:
        recorder = getattr(self.handle, "recorder", None)

        async def evict(victim: PodInfo) -> Status | None:
            waiting = self.handle.get_waiting_pod(victim.uid)
            if waiting is not None:
                waiting.reject(self.name, "preempted")
                return None
            try:
                await self.handle.client.delete(PODS, victim.namespace, victim.name,
                                                preconditions={"uid": victim.uid} if victim.uid else None)
            except NotFound:
                return None
            except StatusError as err:
                return as_error(err)
            if recorder is not None:
                recorder.eventf(victim.pod, pod.pod, "Normal", "Preempted", "Preempting",
                                f"Preempted by pod {pod.uid} on node {candidate.node}", resource=PODS)
            return None

        results = await asyncio.gather(*(evict(v) for v in candidate.victims))
        for status in results:
            if status is not None:
                return status
        clear = getattr(self.handle, "clear_lower_nominations", None)
        if clear is not None:
            await clear(candidate.node, pod)
        return None
