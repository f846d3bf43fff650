"""The eviction manager: node pressure in, conditions and evictions out.

Every ``interval`` (upstream's housekeeping, 10 s) :meth:`EvictionManager.synchronize`:

0. evicts at once (grace 0) every pod over its own local-storage limits (``local_storage``:
   :mod:`.local_storage`, emptyDir ``sizeLimit`` and ``limits.ephemeral-storage``), and ends
   the pass if there was one, as upstream's ``localStorageEviction``;
1. observes the signals (:mod:`.signals`) and finds the thresholds met (available < amount);
2. remembers when each was first met; a soft one counts only once it has held for its grace
   period, a hard one at once;
3. derives the node conditions (``MemoryPressure``, ``DiskPressure``, ``PIDPressure``) from
   every threshold met — grace or not — and keeps each for ``pressure_transition_period``
   after it was last seen (upstream's default 5 m, so the condition does not flap);
4. when a threshold has passed its grace period — and, for disk, the node-level reclaim
   (``reclaim_disk``: dead containers, then unused images, :mod:`.node_reclaim`) did not
   relieve it — ranks the active pods for its resource
   (:mod:`.ranking`, memory first when several are met, as upstream) and evicts **one**: its
   containers are killed (a hard threshold: grace 0; a soft one:
   ``min(terminationGracePeriodSeconds, eviction_max_pod_grace_period)``), the pod becomes
   ``Failed`` with reason ``Evicted``, upstream's message and a ``DisruptionTarget``
   condition, and an ``Evicted`` Event. The manager waits for that pod to be terminated
   (at most ``cleanup_timeout``) before its next observation, so one pressure episode never
   evicts more pods than it must.

Admission (:meth:`admit`): under MemoryPressure only, pods other than BestEffort are
admitted (and BestEffort ones that tolerate the memory-pressure taint); under any other
pressure no pod is — refused pods fail with reason ``Evicted`` and ``The node had
condition: [...]``, as upstream's eviction admit handler.

Everything the manager needs is given to it (the observations, the pods, their usage, how
to evict, a clock), so its decisions are tested with numbers and a fake clock, and its
behaviour end to end with the real host's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Mapping, Sequence

from k8py.kubelet.eviction.ranking import PodUsage, eviction_message, is_critical, rank
from k8py.kubelet.eviction.signals import Observation
from k8py.kubelet.eviction.thresholds import Threshold
from k8py.kubelet.pod_status import qos_class

__all__ = ["EvictionManager"]

logger = logging.getLogger(__name__)

#: which resource is reclaimed first when several thresholds are met (upstream: memory first)
_ORDER = ("memory", "pids", "ephemeral-storage", "inodes")
_TAINTS = {"MemoryPressure": "node.kubernetes.io/memory-pressure", "DiskPressure": "node.kubernetes.io/disk-pressure",
           "PIDPressure": "node.kubernetes.io/pid-pressure"}

#: evict(pod, message, grace); ``disruption=False`` for a local-storage eviction (no DisruptionTarget condition)
Evict = Callable[..., Awaitable[None]]


class EvictionManager:
    def __init__(self, thresholds: Sequence[Threshold], *, observe: Callable[[], Mapping[str, Observation]],
                 pods: Callable[[], Sequence[Mapping[str, Any]]],
                 usage: Callable[[Sequence[Mapping[str, Any]]], Awaitable[Mapping[str, PodUsage]]], evict: Evict,
                 node_event: Callable[[str, str, str], None] = lambda kind, reason, message: None,
                 interval: float = 10.0, pressure_transition_period: float = 300.0, max_pod_grace_period: float = 0.0,
                 cleanup_timeout: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 reclaim_disk: Callable[[], Awaitable[int]] | None = None,
                 local_storage: Callable[[], Awaitable[Sequence[tuple[Mapping[str, Any], str]]]] | None = None) -> None:
        self.thresholds = list(thresholds)
        #: the pods over their own local-storage limits, each with its message (:mod:`.local_storage`)
        self._local_storage = local_storage
        #: node-level reclaim tried before a pod is evicted for disk (:mod:`.node_reclaim`)
        self._reclaim_disk = reclaim_disk
        self._observe = observe
        self._pods = pods
        self._usage = usage
        self._evict = evict
        self._node_event = node_event
        self.interval = interval
        self.pressure_transition_period = pressure_transition_period
        self.max_pod_grace_period = max_pod_grace_period
        self.cleanup_timeout = cleanup_timeout
        self._clock = clock
        self._first_met: dict[Threshold, float] = {}
        self._condition_seen: dict[str, float] = {}
        self.observations: Mapping[str, Observation] = {}

    # -- what others read ------------------------------------------------------------------

    def conditions(self) -> set[str]:
        """The pressure conditions the node reports True now."""
        now = self._clock()
        return {c for c, seen in self._condition_seen.items() if now - seen < self.pressure_transition_period}

    def admit(self, pod: Mapping[str, Any]) -> str | None:
        """None to admit ``pod``; else the message it fails with (reason ``Evicted``)."""
        pressure = self.conditions()
        if not pressure:
            return None
        if pressure == {"MemoryPressure"}:
            tolerates = any(t.get("key") == _TAINTS["MemoryPressure"] or (t.get("operator") == "Exists" and not t.get("key"))
                            for t in (pod.get("spec") or {}).get("tolerations") or [])
            if qos_class(pod) != "BestEffort" or tolerates:
                return None
        # Go's %v of the condition list: space-separated in brackets
        return f"The node had condition: [{' '.join(c for c in ('MemoryPressure', 'DiskPressure', 'PIDPressure') if c in pressure)}]. "

    # -- the loop ----------------------------------------------------------------------------

    def _met(self, observations: Mapping[str, Observation]) -> list[tuple[Threshold, int, int]]:
        out = []
        for t in self.thresholds:
            obs = observations.get(t.signal)
            if obs is None:
                continue
            amount = t.amount(obs.capacity)
            # a threshold met last time holds until its minimum reclaim is free too (upstream's enforceMinReclaim)
            if obs.available < amount + (t.reclaim(obs.capacity) if t in self._first_met else 0):
                out.append((t, amount, obs.available))
        return out

    async def synchronize(self) -> Mapping[str, Any] | None:
        """One pass (see the module docstring); returns the pod evicted, if any."""
        now = self._clock()
        self.observations = self._observe()
        met = self._met(self.observations)
        met_now = {t for t, _, _ in met}
        self._first_met = {t: self._first_met.get(t, now) for t in met_now}
        for t, _, _ in met:
            if t.condition not in self.conditions():
                self._node_event("Warning", "EvictionThresholdMet", f"Attempting to reclaim {t.resource}")
            self._condition_seen[t.condition] = now
        if self._local_storage is not None:
            over = [(pod, message) for pod, message in await self._local_storage() if not is_critical(pod)]
            for pod, message in over:
                logger.info("evicting pod over its local storage limit", extra={"pod": f"{pod['metadata'].get('namespace')}/"
                                                                                       f"{pod['metadata']['name']}"})
                try:
                    await asyncio.wait_for(self._evict(pod, message, 0.0, disruption=False), self.cleanup_timeout)
                except asyncio.TimeoutError:
                    logger.warning("evicted pod not cleaned up in time", extra={"pod": pod["metadata"]["name"]})
            if over:
                return over[0][0]
        due = [(t, amount, avail) for t, amount, avail in met if now - self._first_met[t] >= t.grace_period]
        if not due:
            return None
        due.sort(key=lambda m: (_ORDER.index(m[0].resource), not m[0].hard))
        threshold, amount, available = due[0]
        if threshold.resource in ("ephemeral-storage", "inodes") and self._reclaim_disk is not None:
            if await self._reclaim_disk():
                after = self._met(self._observe())
                if not any(t.signal == threshold.signal for t, _, _ in after):
                    logger.info("node-level reclaim relieved the pressure: no pod evicted", extra={"signal": threshold.signal})
                    return None
        candidates = [p for p in self._pods()]
        if not candidates:
            logger.warning("eviction threshold met but no pod to evict", extra={"signal": threshold.signal})
            return None
        usage = await self._usage(candidates)
        ranked = rank(candidates, usage, threshold.resource)
        if not ranked:
            logger.warning("eviction threshold met; only critical pods run here", extra={"signal": threshold.signal})
            return None
        pod = ranked[0]
        message = eviction_message(threshold.resource, pod, usage.get(pod["metadata"]["uid"]), quantity=amount, available=available)
        grace = 0.0
        if not threshold.hard:
            spec_grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            grace = min(float(30 if spec_grace is None else spec_grace), self.max_pod_grace_period)
        logger.info("evicting pod", extra={"pod": f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}",
                                           "signal": threshold.signal, "grace": grace})
        try:
            await asyncio.wait_for(self._evict(pod, message, grace), self.cleanup_timeout)
        except asyncio.TimeoutError:
            logger.warning("evicted pod not cleaned up in time", extra={"pod": pod["metadata"]["name"]})
        return pod

    async def run(self) -> None:
        while True:
            try:
                await self.synchronize()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next pass observes again; a bad pass must not stop eviction for good
                logger.exception("eviction pass failed")
            await asyncio.sleep(self.interval)
