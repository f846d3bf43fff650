"""The DaemonSet controller: one pod on every eligible node, updated in place.

Upstream: ``pkg/controller/daemon`` (``daemon_controller.go``, ``update.go``).
``sync(key)``:

1. finds (or creates, or renumbers) the ControllerRevision of the current
   template (:mod:`k8py.controllers.revision_control`); its hash labels new
   pods ``controller-revision-hash``, which is how old pods are told apart;
2. for every node decides should-run / should-continue-running
   (:mod:`.eligibility`) and plans: create a pod where one should run and none
   does, delete pods where none may continue, delete failed pods (to be
   recreated; per node no sooner than a backoff of 1 s doubling to 15 min,
   ``FailedDaemonPod``) and all but the oldest of duplicates; pods for nodes that no
   longer exist are deleted too. Pods are placed by the scheduler: each is
   pinned to its node through required node affinity, never ``nodeName``;
3. with ``RollingUpdate`` replaces old pods: with ``maxSurge`` 0 it deletes
   old pods while no more than ``maxUnavailable`` nodes lack an available pod
   (old unavailable pods go first, they cost nothing); with ``maxSurge`` > 0 it
   starts a new pod beside an old one on at most ``maxSurge`` nodes and deletes
   the old pod once the new one is available. ``OnDelete`` replaces only what
   the user deletes;
4. writes the status counts and trims revision history.

Expectations (per DaemonSet key) hold back a second round of creates or
deletes until the watch has shown the first.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from k8py.api.errors import NotFound
from k8py.api.selectors import label_selector_from_dict
from k8py.client.keys import split_key
from k8py.client.resources import DAEMONSETS, NODES, PODS
from k8py.controllers.context import ControllerContext
from k8py.controllers.daemonset.rolling_update import plan_rolling_update, scaled_value
from k8py.controllers.daemonset.eligibility import add_daemon_tolerations, node_should_run_daemon_pod, pin_to_node
from k8py.controllers.controller_ref_manager import ControllerRefManager, recheck_owner
from k8py.controllers.expectations import ControllerExpectations
from k8py.controllers.history import REVISION_HASH_LABEL, revision_of_pod
from k8py.controllers.keyed_controller import KeyedController, unwrap_tombstone
from k8py.controllers.owner_refs import controller_ref, new_controller_ref
from k8py.controllers.pod_control import PodControl
from k8py.controllers.pod_status import is_pod_available, is_pod_ready
from k8py.controllers.revision_control import CONTROLLER_REVISIONS, HashCollision, RevisionControl

__all__ = ["DaemonSetController", "target_node"]

logger = logging.getLogger(__name__)

TEMPLATE_GENERATION_LABEL = "pod-template-generation"
FAILED_POD_BACKOFF = 1.0
MAX_FAILED_POD_BACKOFF = 900.0


def target_node(pod: dict[str, Any]) -> str | None:
    """``spec.nodeName``, or the node a daemon pod is pinned to (upstream ``GetTargetNodeName``)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    for term in terms:
        for req in term.get("matchFields") or ():
            if req.get("key") == "metadata.name" and req.get("operator") == "In" and len(req.get("values") or ()) == 1:
                return str(req["values"][0])
    return None


def _eligibility_fields(node: dict[str, Any]) -> tuple[Any, ...]:
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    ready = [c.get("status") for c in (node.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"]
    return meta.get("labels"), spec.get("taints"), spec.get("unschedulable"), ready


def _deleting(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


class DaemonSetController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="daemonset", queue_name="daemonset")
        self.sets = ctx.informers.informer(DAEMONSETS)
        self.pods = ctx.informers.informer(PODS)
        self.nodes = ctx.informers.informer(NODES)
        self.revisions = ctx.informers.informer(CONTROLLER_REVISIONS)
        self.set_lister = ctx.informers.lister(DAEMONSETS)
        self.pod_lister = ctx.informers.lister(PODS)
        self.node_lister = ctx.informers.lister(NODES)
        self.wait_for(self.sets, self.pods, self.nodes, self.revisions)
        self.recorder = ctx.recorder("daemonset-controller")
        self.pod_control = PodControl(ctx.client, self.recorder)
        self.revision_control = RevisionControl(ctx.client, ctx.informers.lister(CONTROLLER_REVISIONS), "DaemonSet")
        self.expectations = ControllerExpectations(clock=ctx.clock)
        self._failed_backoff: dict[tuple[str, str], tuple[float, float]] = {}
        self.sets.add_event_handler(on_add=self.enqueue, on_update=lambda old, new: self.enqueue(new),
                                    on_delete=self._set_deleted)
        self.pods.add_event_handler(on_add=self._pod_added, on_update=self._pod_updated,
                                    on_delete=self._pod_deleted)
        self.nodes.add_event_handler(on_add=self._node_changed, on_update=self._node_updated,
                                     on_delete=self._node_changed)

    # -- event handlers -------------------------------------------------------------

    def _set_key(self, pod: Any) -> str | None:
        ref = controller_ref(pod) if isinstance(pod, dict) else None
        if ref is None or ref.get("kind") != "DaemonSet":
            return None
        return f"{pod['metadata'].get('namespace')}/{ref.get('name')}"

    def _pod_added(self, pod: dict[str, Any]) -> None:
        key = self._set_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)

    def _pod_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        key = self._set_key(new)
        if key is None:
            return
        if new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(key)  # graceful: as good as gone (upstream)
        self.queue.add(key)

    def _pod_deleted(self, obj: Any) -> None:
        pod = unwrap_tombstone(obj)
        key = self._set_key(pod)
        if key is not None:
            if not pod["metadata"].get("deletionTimestamp"):  # else observed when it was set
                self.expectations.deletion_observed(key)
            self.queue.add(key)

    def _node_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Kubelet heartbeats rewrite node status all the time; only what decides
        eligibility matters (upstream ``shouldIgnoreNodeUpdate``)."""
        if _eligibility_fields(old) != _eligibility_fields(new):
            self._node_changed(new)

    def _node_changed(self, obj: Any) -> None:
        for ds in self.set_lister.list():
            self.enqueue(ds)

    def _set_deleted(self, obj: Any) -> None:
        ds = unwrap_tombstone(obj)
        if isinstance(ds, dict):
            key = f"{ds['metadata'].get('namespace')}/{ds['metadata'].get('name')}"
            self.expectations.delete(key)
            self._failed_backoff = {k: v for k, v in self._failed_backoff.items() if k[0] != key}

    # -- sync -------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        cached = self.set_lister.try_get(namespace, name)
        if cached is None:
            self.expectations.delete(key)
            return None
        ds = copy.deepcopy(cached)
        revisions = await self.revision_control.claim(ds, DAEMONSETS)
        try:
            current, revisions = await self.revision_control.current(ds, revisions)
        except HashCollision:
            status = ds.setdefault("status", {})
            status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
            await self.client.update_status(DAEMONSETS, ds)
            return None
        hash_ = current["metadata"]["labels"][REVISION_HASH_LABEL]
        selector = label_selector_from_dict((ds.get("spec") or {}).get("selector"))
        manager = ControllerRefManager(self.client, ds, DAEMONSETS, PODS, selector,
                                       recheck_owner(self.client, DAEMONSETS, ds))
        pods = await manager.claim(self.pod_lister.list(namespace=namespace))
        nodes = self.node_lister.list()
        if not ds["metadata"].get("deletionTimestamp") and self.expectations.satisfied(key):
            await self._manage(key, ds, pods, nodes, hash_)
        await self._update_status(ds, pods, nodes, hash_)
        live = {h for p in pods if (h := revision_of_pod(p))}
        await self.revision_control.trim(ds, revisions, live_hashes=live | {hash_},
                                         live_names={current["metadata"]["name"]})
        return None

    def _by_node(self, pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            node = target_node(pod)
            if node is not None:
                out.setdefault(node, []).append(pod)
        return out

    async def _manage(self, key: str, ds: dict[str, Any], pods: list[dict[str, Any]],
                      nodes: list[dict[str, Any]], hash_: str) -> None:
        spec = ds.get("spec") or {}
        template_spec = (spec.get("template") or {}).get("spec") or {}
        by_node = self._by_node(pods)
        node_names = {n["metadata"]["name"] for n in nodes}
        create_on: list[str] = []
        delete: list[dict[str, Any]] = []
        for node in nodes:
            node_name = node["metadata"]["name"]
            eligibility = node_should_run_daemon_pod(template_spec, node)
            here = [p for p in by_node.get(node_name, []) if not _deleting(p)]
            if eligibility.should_run and not here:
                create_on.append(node_name)
            elif eligibility.should_continue_running and here:
                failed = [p for p in here if (p.get("status") or {}).get("phase") == "Failed"]
                for pod in failed:
                    wait = self._failed_pod_backoff(key, node_name)
                    if wait > 0:
                        self.queue.add_after(key, wait)  # the kubelet keeps rejecting it: no hot loop
                        continue
                    self.recorder.eventf(ds, "Warning", "FailedDaemonPod",
                                         "Found failed daemon pod %s/%s on node %s, will try to kill it",
                                         pod["metadata"]["namespace"], pod["metadata"]["name"], node_name,
                                         resource=DAEMONSETS)
                    delete.append(pod)
                running = sorted((p for p in here if p not in failed),
                                 key=lambda p: p["metadata"].get("creationTimestamp", ""))
                surge = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate" and \
                    scaled_value(((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("maxSurge"),
                                 len(nodes), round_up=True) > 0
                if len(running) > 1 and not (surge and len(running) == 2 and
                                             len({revision_of_pod(p) for p in running}) == 2):
                    delete.extend(running[1:])
            elif not eligibility.should_continue_running and here:
                delete.extend(here)
        for node_name, node_pods in by_node.items():
            if node_name not in node_names:
                delete.extend(p for p in node_pods if not _deleting(p))
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            surge_creates, old_deletes = self._rolling_update(ds, by_node, nodes, hash_, delete)
            create_on.extend(n for n in surge_creates if n not in create_on)
            delete.extend(p for p in old_deletes if p not in delete)
        if create_on or delete:
            self.expectations.set(key, len(create_on), len(delete))
        errors: list[Exception] = []
        for node_name in create_on:  # upstream creates in slow-start batches; per node here
            try:
                await self._create_pod(ds, node_name, hash_)
            except Exception as err:  # noqa: BLE001 - raised below, after the rest were tried
                self.expectations.creation_observed(key)  # never coming: do not wait for it
                errors.append(err)
        for pod in delete:
            try:
                await self.pod_control.delete_pod(pod["metadata"]["namespace"], pod["metadata"]["name"], ds, DAEMONSETS)
            except NotFound:
                self.expectations.deletion_observed(key)
            except Exception as err:  # noqa: BLE001
                self.expectations.deletion_observed(key)
                errors.append(err)
        if errors:
            raise errors[0]

    def _failed_pod_backoff(self, key: str, node_name: str) -> float:
        """Seconds to wait before deleting another failed pod on this node (upstream's
        ``failedPodsBackoff``: 1 s doubling to 15 min); 0 records a deletion now."""
        now = self.clock.monotonic()
        delay, last = self._failed_backoff.get((key, node_name), (0.0, -1e18))
        if now - last < delay:
            return delay - (now - last)
        delay = FAILED_POD_BACKOFF if delay == 0 else min(delay * 2, MAX_FAILED_POD_BACKOFF)
        self._failed_backoff[(key, node_name)] = (delay, now)
        return 0.0

    def _rolling_update(self, ds: dict[str, Any], by_node: dict[str, list[dict[str, Any]]],
                        nodes: list[dict[str, Any]], hash_: str,
                        already_deleting: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
        spec = ds.get("spec") or {}
        template_spec = (spec.get("template") or {}).get("spec") or {}
        now = self.clock.now()
        min_ready = int(spec.get("minReadySeconds") or 0)
        desired = [n["metadata"]["name"] for n in nodes if node_should_run_daemon_pod(template_spec, n).should_run]
        live = {node: [p for p in pods if not _deleting(p) and p not in already_deleting]
                for node, pods in by_node.items()}
        plan = plan_rolling_update(desired, live, hash_,
                                   rolling=(spec.get("updateStrategy") or {}).get("rollingUpdate") or {},
                                   available=lambda p: is_pod_available(p, min_ready, now))
        return plan.create_on, plan.delete

    async def _create_pod(self, ds: dict[str, Any], node_name: str, hash_: str) -> None:
        template = (ds.get("spec") or {}).get("template") or {}

        def mutate(pod: dict[str, Any]) -> None:
            labels = pod["metadata"].setdefault("labels", {})
            labels[REVISION_HASH_LABEL] = hash_
            labels[TEMPLATE_GENERATION_LABEL] = str(ds["metadata"].get("generation", 1))
            add_daemon_tolerations(pod["spec"])
            pin_to_node(pod["spec"], node_name)

        await self.pod_control.create_pod(ds["metadata"]["namespace"], template, ds, DAEMONSETS,
                                          new_controller_ref(ds, DAEMONSETS), mutate=mutate)

    async def _update_status(self, ds: dict[str, Any], pods: list[dict[str, Any]], nodes: list[dict[str, Any]],
                             hash_: str) -> None:
        spec = ds.get("spec") or {}
        template_spec = (spec.get("template") or {}).get("spec") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.clock.now()
        by_node = self._by_node([p for p in pods if not _deleting(p)])
        desired = current = misscheduled = ready = updated = available = 0
        for node in nodes:
            node_pods = by_node.get(node["metadata"]["name"], [])
            should_run = node_should_run_daemon_pod(template_spec, node).should_run
            if should_run:
                desired += 1
                if node_pods:
                    current += 1
                    # during a surge two pods share a node: it counts once, as ready
                    # or available if either is
                    if any(is_pod_ready(p) for p in node_pods):
                        ready += 1
                    if any(is_pod_available(p, min_ready, now) for p in node_pods):
                        available += 1
                    if any(revision_of_pod(p) == hash_ for p in node_pods):
                        updated += 1
            elif node_pods:
                misscheduled += 1
        status = {
            **(ds.get("status") or {}),
            "currentNumberScheduled": current, "numberMisscheduled": misscheduled,
            "desiredNumberScheduled": desired, "numberReady": ready,
            "observedGeneration": ds["metadata"].get("generation", 1),
            "updatedNumberScheduled": updated, "numberAvailable": available,
            "numberUnavailable": desired - available,
        }
        for omitempty in ("numberUnavailable", "numberAvailable", "updatedNumberScheduled"):
            if status.get(omitempty) == 0:
                status.pop(omitempty)
        if status != (ds.get("status") or {}):
            ds["status"] = status
            await self.client.update_status(DAEMONSETS, ds)
