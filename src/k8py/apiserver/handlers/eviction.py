"""``pods/NAME/eviction``: delete a pod unless that breaks its disruption budget
(upstream ``registry/core/pod/storage/eviction.go``).

POST a policy/v1 ``Eviction`` (its ``deleteOptions`` are those of the delete).
In order:

1. a pod already being deleted: success, nothing more to do; a pod that is
   Pending, Succeeded or Failed counts toward no budget: deleted at once;
2. the PodDisruptionBudgets of its namespace whose selector matches it: more
   than one is a 500 ("This pod has more than one PodDisruptionBudget, which
   the eviction subresource does not support."), none means delete;
3. with one budget, inside a guaranteed update of the budget's status (so
   concurrent evictions each see the other's decrement):
   - ``observedGeneration < generation``: 429, the budget "is still being
     processed by the server";
   - an unready pod with ``unhealthyPodEvictionPolicy: AlwaysAllow``, or with
     the default ``IfHealthyBudget`` while ``currentHealthy >= desiredHealthy
     > 0``: allowed without touching the budget (the pod's resourceVersion
     then guards the delete);
   - ``disruptionsAllowed == 0``: 429 "Cannot evict pod as it would violate
     the pod's disruption budget." with a ``DisruptionBudget`` cause saying
     how many healthy pods the budget needs and has;
   - else ``disruptionsAllowed`` is decremented and the pod recorded in
     ``status.disruptedPods`` (the disruption controller stops counting it);
4. the pod gets a ``DisruptionTarget`` condition (``EvictionByEvictionAPI``)
   and is deleted; the reply is a 201 Status Success.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from k8py.api.errors import BadRequest, Cause, InternalError, NotFound, TooManyRequests, success_status
from k8py.api.selectors import label_selector_from_dict
from k8py.apiserver.admission.attributes import Operation
from k8py.apiserver.handlers.codec import decode_body
from k8py.apiserver.handlers.context import RequestContext, SubresourceHost
from k8py.apiserver.handlers.deletion import delete_object, parse_delete_options
from k8py.apiserver.handlers.responses import json_response
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.store.object_meta import rfc3339

__all__ = ["evict"]

Object = dict[str, Any]
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def _ready(pod: Object) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or ())


def _budgets(host: SubresourceHost, namespace: str, pod: Object) -> list[Object]:
    d = host.registry.get("policy", "v1", "poddisruptionbudgets")
    if d is None:
        return []
    labels = (pod.get("metadata") or {}).get("labels") or {}
    out = []
    for cached in host.cacher.cache_for(d).objects.values():
        pdb = orjson.loads(cached.data)
        if (pdb.get("metadata") or {}).get("namespace") != namespace:
            continue
        if label_selector_from_dict((pdb.get("spec") or {}).get("selector")).matches(labels):
            out.append(pdb)
    return out


def _too_many(message: str, cause: str, retry_after: int) -> TooManyRequests:
    return TooManyRequests(message, causes=[Cause("DisruptionBudget", cause, "")], retry_after_seconds=retry_after)


async def evict(host: SubresourceHost, ctx: RequestContext, d: ResourceDefinition, verb: str) -> web.StreamResponse:
    if verb != "create":
        raise BadRequest(f"{ctx.request.method} is not supported on pods/eviction: POST an Eviction")
    body = decode_body(await ctx.request.read(), ctx.request.headers.get("Content-Type"))
    if not isinstance(body, dict):
        raise BadRequest("the body of the request must be an Eviction object")
    name = ctx.path.name
    if (body.get("metadata") or {}).get("name") not in (None, "", name):
        raise BadRequest(f"name in URL does not match name in Eviction object")
    opts = parse_delete_options(body.get("deleteOptions"), ctx.params)
    opts.dry_run = opts.dry_run or ctx.dry_run
    admission = host.admission_for(ctx, Operation.CREATE, dry_run=opts.dry_run)
    if admission is not None:
        await admission.admit_object(body)
    pod = await host.store.get(d, ctx.namespace, name)
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return json_response(orjson.dumps(success_status()), status=201)
    phase = (pod.get("status") or {}).get("phase")
    if phase not in ("Pending", "Succeeded", "Failed"):
        budgets = _budgets(host, ctx.namespace, pod)
        if len(budgets) > 1:
            raise InternalError("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
        if budgets and await _check_and_decrement(host, ctx, budgets[0], pod, dry_run=opts.dry_run):
            opts.precondition_rv = opts.precondition_rv or meta.get("resourceVersion")
    if not opts.dry_run:
        marked = await _mark_disruption_target(host, d, ctx.namespace, name, opts.precondition_rv or "")
        if opts.precondition_rv and marked is not None:
            opts.precondition_rv = marked["metadata"]["resourceVersion"]  # our own write, checked against the pin
    try:
        await delete_object(host.store, d, ctx.namespace, name, opts)
    except NotFound:
        pass
    return json_response(orjson.dumps(success_status()), status=201)


async def _check_and_decrement(host: SubresourceHost, ctx: RequestContext, pdb: Object, pod: Object, *, dry_run: bool) -> bool:
    """Raise a 429 if the budget forbids it; True when allowed without a decrement (pin the pod's version)."""
    pdb_def = host.registry.get("policy", "v1", "poddisruptionbudgets")
    assert pdb_def is not None
    pdb_name = pdb["metadata"]["name"]
    pod_name = pod["metadata"]["name"]
    skipped = False

    def mutate(current: Object) -> Object:
        nonlocal skipped
        status = current.setdefault("status", {})
        if int(status.get("observedGeneration") or 0) < int(current["metadata"].get("generation") or 0):
            raise _too_many(VIOLATION, f"The disruption budget {pdb_name} is still being processed by the server.", 10)
        desired, healthy = int(status.get("desiredHealthy") or 0), int(status.get("currentHealthy") or 0)
        policy = (current.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if not _ready(pod) and (policy == "AlwaysAllow" or (healthy >= desired > 0)):
            skipped = True
            raise _Skip()
        allowed = int(status.get("disruptionsAllowed") or 0)
        if allowed == 0:
            raise _too_many(VIOLATION, f"The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently", 0)
        status["disruptionsAllowed"] = allowed - 1
        if allowed - 1 == 0:
            conds = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionAllowed"]
            conds.append({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
                          "observedGeneration": status.get("observedGeneration"), "lastTransitionTime": rfc3339()})
            status["conditions"] = conds
        status.setdefault("disruptedPods", {})[pod_name] = rfc3339()
        return current

    try:
        await host.store.guaranteed_update(pdb_def, ctx.namespace, pdb_name, mutate, subresource="status", dry_run=dry_run)
    except _Skip:
        pass
    return skipped


class _Skip(Exception):
    """The budget need not change (an unhealthy pod the policy lets go)."""


async def _mark_disruption_target(host: SubresourceHost, d: ResourceDefinition, namespace: str, name: str,
                                  precondition_rv: str) -> Object | None:
    def mutate(pod: Object) -> Object:
        status = pod.setdefault("status", {})
        conds = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionTarget"]
        conds.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                      "message": "Eviction API: evicting", "lastTransitionTime": rfc3339()})
        status["conditions"] = conds
        return pod

    try:
        return await host.store.guaranteed_update(d, namespace, name, mutate, subresource="status", precondition_rv=precondition_rv)
    except NotFound:
        return None
