"""Subresources: ``status``, ``scale``, ``binding``, a namespace's ``finalize``
and a pod's ``ephemeralcontainers``.

- ``/status`` reads like the main resource; writes change only ``status``
  (``Strategy.prepare_for_status_update``).
- ``/scale`` shows an ``autoscaling/v1`` Scale built from the kind's
  :class:`ScaleSpec`; writes (PUT, or a patch applied to the Scale) change only
  the replica count, guarded by the Scale's resourceVersion if it has one.
- ``pods/binding`` (POST a ``Binding``) sets ``spec.nodeName`` once and marks
  the pod ``PodScheduled``; a pod already bound is a 409. As upstream's: the
  target's kind is empty or ``Node``, the Binding's ``metadata.uid`` is a
  precondition and its annotations are copied onto the pod.
- ``pods/ephemeralcontainers`` reads the Pod; writes (PUT, PATCH) change
  only ``spec.ephemeralContainers``, additions only
  (:mod:`k8py.apiserver.validation.ephemeral`).
- ``namespaces/finalize`` (PUT) replaces ``spec.finalizers``; a terminating
  namespace left with no finalizer is deleted by that update.
- ``serviceaccounts/token`` (POST a TokenRequest) signs a bound token
  (:mod:`.token_request`); ``certificatesigningrequests/approval`` changes
  only the Approved/Denied conditions (:mod:`.csr_approval`).
- ``pods/log|exec|attach|portforward`` and ``nodes/proxy[/path]`` are the
  kubelet's: :mod:`k8py.apiserver.streaming` checks and relays them.

Each is a handler in :data:`SUBRESOURCES`, keyed by name, over the narrow
:class:`~k8py.apiserver.handlers.context.SubresourceHost` (the generic
handlers as a subresource sees them): this module never imports ``verbs``.
A kind serves the subresources its definition lists; a collection whose
strategy sets ``create_through`` (core/v1 ``bindings``) has its POST served
by the named subresource of another resource.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable

import orjson
from aiohttp import web

from k8py.api.errors import BadRequest, Cause, Conflict, Invalid, MethodNotAllowed, NotFound, success_status
from k8py.api.patch import apply_patch
from k8py.api.selectors import label_selector_from_dict
from k8py.apiserver import streaming
from k8py.apiserver.admission.attributes import Operation
from k8py.apiserver.admission.request import RequestAdmission
from k8py.apiserver.handlers.codec import PATCH_TYPES, decode_body, media_type_of
from k8py.apiserver.handlers.deletion import DeleteOptions, delete_object
from k8py.apiserver.handlers.csr_approval import approve
from k8py.apiserver.handlers.eviction import evict
from k8py.apiserver.handlers.token_request import request_token
from k8py.apiserver.handlers.context import RequestContext, SubresourceHost
from k8py.apiserver.handlers.responses import json_response, object_response
from k8py.apiserver.registry import ResourceDefinition, ScaleSpec
from k8py.apiserver.store.object_meta import rfc3339

__all__ = ["SUBRESOURCES", "SubresourceHandler", "handle", "serve"]

Object = dict[str, Any]

#: (host, request, the resource it is a subresource of, verb) -> response
SubresourceHandler = Callable[[SubresourceHost, RequestContext, ResourceDefinition, str], Awaitable[web.StreamResponse]]


async def handle(host: SubresourceHost, ctx: RequestContext, verb: str) -> web.StreamResponse:
    """``<resource>/<name>/<subresource>``: served if the kind lists it."""
    d = ctx.definition
    sub = ctx.path.subresource
    head = sub.split("/", 1)[0]  # nodes/NAME/proxy/<path>
    if head not in d.subresources or not ctx.path.name:
        raise NotFound("the server could not find the requested resource")
    return await serve(host, ctx, d, head, verb)


async def serve(
    host: SubresourceHost, ctx: RequestContext, definition: ResourceDefinition, subresource: str, verb: str
) -> web.StreamResponse:
    """Run the handler registered for ``subresource`` of ``definition``."""
    handler = SUBRESOURCES.get(subresource)
    if handler is None:
        raise _not_allowed(ctx, definition, subresource)
    return await handler(host, ctx, definition, verb)


def _not_allowed(ctx: RequestContext, d: ResourceDefinition, sub: str) -> MethodNotAllowed:
    return MethodNotAllowed(f"{ctx.request.method} is not supported on {d.plural}/{sub}")


async def _ephemeral_containers(host: SubresourceHost, ctx: RequestContext, d: ResourceDefinition,
                                verb: str) -> web.StreamResponse:
    """``pods/NAME/ephemeralcontainers``: a Pod whose writes change only
    ``spec.ephemeralContainers`` (the strategy narrows and validates them)."""
    if verb == "get":
        return object_response(d, await host.store.get(d, ctx.namespace, ctx.path.name), ctx.fmt)
    if verb == "update":
        return await host.update(ctx, subresource="ephemeralcontainers")
    if verb == "patch":
        return await host.patch(ctx, subresource="ephemeralcontainers")
    raise _not_allowed(ctx, d, "ephemeralcontainers")


async def _status(host: SubresourceHost, ctx: RequestContext, d: ResourceDefinition, verb: str) -> web.StreamResponse:
    if verb == "get":
        obj = await host.store.get(d, ctx.namespace, ctx.path.name)
        return object_response(d, obj, ctx.fmt)
    if verb == "update":
        return await host.update(ctx, subresource="status")
    if verb == "patch":
        return await host.patch(ctx, subresource="status")
    raise _not_allowed(ctx, d, "status")


def _get_path(obj: Object, path: tuple[str, ...]) -> Any:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _set_path(obj: Object, path: tuple[str, ...], value: Any) -> None:
    cur = obj
    for part in path[:-1]:
        cur = cur.setdefault(part, {})
    cur[path[-1]] = value


def scale_of(obj: Object, spec: ScaleSpec) -> Object:
    meta = obj.get("metadata") or {}
    selector = _get_path(obj, spec.selector_path)
    status: Object = {"replicas": int(_get_path(obj, spec.status_replicas_path) or 0)}
    if isinstance(selector, dict) and spec.selector_is_map:
        status["selector"] = label_selector_from_dict({"matchLabels": selector}).to_string()
    elif isinstance(selector, dict):
        status["selector"] = label_selector_from_dict(selector).to_string()
    elif isinstance(selector, str):  # a CRD's labelSelectorPath names a serialized selector, as upstream
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
        },
        "spec": {"replicas": int(_get_path(obj, spec.replicas_path) or 0)},
        "status": status,
    }


async def _scale(host: SubresourceHost, ctx: RequestContext, d: ResourceDefinition, verb: str) -> web.StreamResponse:
    spec = d.scale
    if spec is None:
        raise _not_allowed(ctx, d, "scale")
    store = host.store
    if verb == "get":
        obj = await store.get(d, ctx.namespace, ctx.path.name)
        return json_response(orjson.dumps(scale_of(obj, spec)))
    if verb not in ("update", "patch"):
        raise MethodNotAllowed(f"{ctx.request.method} is not supported on {d.plural}/scale")
    raw = await ctx.request.read()
    content_type = media_type_of(ctx.request.headers.get("Content-Type"))
    if verb == "patch" and content_type not in PATCH_TYPES[:3]:
        raise BadRequest(f"unsupported patch type for the scale subresource: {content_type}")
    body = None if verb == "patch" else decode_body(raw, ctx.request.headers.get("Content-Type"))
    if body is not None and not isinstance(body, dict):
        raise BadRequest("the body of the request must be a Scale object")

    if body is not None:
        pinned = bool((body.get("metadata") or {}).get("resourceVersion"))
    else:
        pinned = b'"resourceVersion"' in raw or b"resourceVersion:" in raw

    def mutate(current: Object) -> Object:
        scale = scale_of(current, spec)
        new_scale = body if body is not None else apply_patch(content_type, scale, raw, schema_name="io.k8s.api.autoscaling.v1.Scale")
        replicas = (new_scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise Invalid.for_object(
                "Scale",
                ctx.path.name,
                [Cause("FieldValueInvalid", f"Invalid value: {replicas}: must be greater than or equal to 0", "spec.replicas")],
                "autoscaling",
            )
        rv = (new_scale.get("metadata") or {}).get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise Conflict.modified(d.plural, ctx.path.name, d.group)
        _set_path(current, spec.replicas_path, replicas)
        if not pinned:
            # the client did not pin a resourceVersion: a concurrent write (a
            # controller's status update) is retried, not returned as a 409
            current["metadata"].pop("resourceVersion", None)
        return current

    manager = dataclasses.replace(ctx.manager, subresource="scale")
    admission = host.admission_for(ctx, Operation.UPDATE)
    hook = None if admission is None else _ScaleAdmission(admission, spec)
    obj = await store.guaranteed_update(d, ctx.namespace, ctx.path.name, mutate, dry_run=ctx.dry_run, manager=manager,
                                        admission=hook)
    return json_response(orjson.dumps(scale_of(obj, spec)))


class _ScaleAdmission:
    """Admission of a ``/scale`` write: the plugins see Scales (as upstream's scale
    REST admits them); a mutated ``spec.replicas`` is carried back to the object."""

    def __init__(self, inner: RequestAdmission, spec: ScaleSpec) -> None:
        self.inner = inner
        self.spec = spec

    async def mutate(self, obj: Object, old: Object | None) -> Object:
        scale = await self.inner.mutate(scale_of(obj, self.spec), None if old is None else scale_of(old, self.spec))
        replicas = (scale.get("spec") or {}).get("replicas")
        if isinstance(replicas, int) and not isinstance(replicas, bool):
            _set_path(obj, self.spec.replicas_path, replicas)
        return obj

    async def validate(self, obj: Object, old: Object | None) -> None:
        await self.inner.validate(scale_of(obj, self.spec), None if old is None else scale_of(old, self.spec))

    async def delete(self, old: Object) -> None:
        raise AssertionError("a scale is not deleted")

    async def abort(self) -> None:
        await self.inner.abort()

    def for_create(self) -> "_ScaleAdmission":
        raise AssertionError("a scale is not created")


async def _bind(host: SubresourceHost, ctx: RequestContext, d: ResourceDefinition, verb: str) -> web.StreamResponse:
    """``pods/NAME/binding``, or POST ``bindings`` (the pod is named by the Binding)."""
    if verb != "create":
        raise _not_allowed(ctx, d, "binding")
    raw = await ctx.request.read()
    binding = decode_body(raw, ctx.request.headers.get("Content-Type"))
    if not isinstance(binding, dict):
        raise BadRequest("the body of the request must be a Binding object")
    name = ctx.path.name or (binding.get("metadata") or {}).get("name") or ""
    target = binding.get("target") or {}
    node = target.get("name")
    if not name:
        raise Invalid.for_object("Binding", "", [Cause("FieldValueRequired", "Required value: name or generateName is required", "metadata.name")])
    if not node:
        raise Invalid.for_object("Binding", name, [Cause("FieldValueRequired", "Required value", "target.name")])
    if target.get("kind") not in (None, "", "Node"):
        raise Invalid.for_object("Binding", name, [Cause(
            "FieldValueNotSupported", f'Unsupported value: "{target["kind"]}": supported values: "Node", "<empty>"', "target.kind")])
    binding_meta = binding.get("metadata") or {}
    uid = binding_meta.get("uid")

    if ctx.definition is d:  # pods/NAME/binding
        admission = host.admission_for(ctx, Operation.CREATE, name=name)
    else:  # POST bindings: the bindings resource, as upstream's attributes name it
        admission = host.admission_for(ctx, Operation.CREATE, name=name, subresource="")
    if admission is not None:
        admitted = await admission.admit_object(binding)
        node = ((admitted or binding).get("target") or {}).get("name") or node

    def mutate(pod: Object) -> Object:
        spec = pod.setdefault("spec", {})
        if pod["metadata"].get("deletionTimestamp"):
            raise Conflict.for_object(d.plural, name, "pod is being deleted, cannot be assigned to a host")
        if uid and uid != pod["metadata"].get("uid"):
            raise Conflict.for_object(d.plural, name, f"Precondition failed: UID in precondition: {uid}, "
                                                      f"UID in object meta: {pod['metadata'].get('uid', '')}")
        if spec.get("nodeName"):
            raise Conflict.for_object(d.plural, name, f"pod {name} is already assigned to node \"{spec['nodeName']}\"")
        spec["nodeName"] = node
        if binding_meta.get("annotations"):  # the Binding's annotations land on the pod, as upstream's
            pod["metadata"]["annotations"] = {**(pod["metadata"].get("annotations") or {}), **binding_meta["annotations"]}
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": rfc3339()})
        status["conditions"] = conditions
        return pod

    # binding writes spec and status together: the "binding" mode of
    # guaranteed_update applies no status/spec separation
    await host.store.guaranteed_update(d, ctx.namespace, name, mutate, subresource="binding", dry_run=ctx.dry_run)
    return json_response(orjson.dumps(success_status()), status=201)


async def _finalize(host: SubresourceHost, ctx: RequestContext, d: ResourceDefinition, verb: str) -> web.StreamResponse:
    if verb != "update":
        raise _not_allowed(ctx, d, "finalize")
    raw = await ctx.request.read()
    body = decode_body(raw, ctx.request.headers.get("Content-Type"))
    if not isinstance(body, dict):
        raise BadRequest("the body of the request must be a Namespace object")
    finalizers = list((body.get("spec") or {}).get("finalizers") or [])

    def mutate(ns: Object) -> Object:
        ns.setdefault("spec", {})["finalizers"] = finalizers
        return ns

    obj = await host.store.guaranteed_update(
        d, "", ctx.path.name, mutate, subresource="finalize", dry_run=ctx.dry_run,
        admission=host.admission_for(ctx, Operation.UPDATE),
    )
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp") and not finalizers and not meta.get("finalizers") and not ctx.dry_run:
        # the last finalizer of a terminating namespace is gone: it is deleted
        # by this update (upstream ShouldDeleteNamespaceDuringUpdate)
        try:
            await delete_object(host.store, d, "", ctx.path.name, DeleteOptions())
        except NotFound:
            pass
    return object_response(d, obj, ctx.fmt)


#: the CONNECT subresources and the query parameters their options object carries
_CONNECT_OPTIONS = {
    "exec": ("stdin", "stdout", "stderr", "tty", "container", "command"),
    "attach": ("stdin", "stdout", "stderr", "tty", "container"),
    "portforward": ("ports",),
    "proxy": ("path",),
}
_BOOL_OPTIONS = frozenset({"stdin", "stdout", "stderr", "tty"})


def connect_options(kind: str, subresource: str, request: web.Request) -> Object:
    """The ``*Options`` object a CONNECT is admitted with, from the query (as upstream decodes it)."""
    out: Object = {"kind": kind, "apiVersion": "v1"}
    head, _, rest = subresource.partition("/")
    for key in _CONNECT_OPTIONS.get(head, ()):
        values = request.query.getall(key, [])
        if key == "path" and rest:
            out["path"] = "/" + rest
        elif not values:
            continue
        elif key in _BOOL_OPTIONS:
            out[key] = values[-1] in ("1", "true", "True")
        elif key in ("command", "ports"):
            out[key] = [int(v) if key == "ports" and v.isdigit() else v for v in values]
        else:
            out[key] = values[-1]
    return out


async def _kubelet_stream(host: SubresourceHost, ctx: RequestContext, d: ResourceDefinition, verb: str) -> web.StreamResponse:
    head = ctx.path.subresource.split("/", 1)[0]
    if head in _CONNECT_OPTIONS:
        admission = host.admission_for(ctx, Operation.CONNECT)
        if admission is not None:
            await admission.admit_object(connect_options(admission.attributes.kind.kind, ctx.path.subresource, ctx.request))
    return await streaming.serve_subresource(
        ctx.request,
        ctx.request.app[streaming.KUBELETS],
        plural=d.plural,
        namespace=ctx.namespace,
        name=ctx.path.name,
        subresource=ctx.path.subresource,
        params=ctx.params,
    )


#: subresource name -> its handler (a kind serves those its definition lists)
SUBRESOURCES: dict[str, SubresourceHandler] = {
    "status": _status,
    "ephemeralcontainers": _ephemeral_containers,
    "scale": _scale,
    "binding": _bind,
    "eviction": evict,
    "finalize": _finalize,
    "token": request_token,
    "approval": approve,
    **{name: _kubelet_stream for name in ("log", "exec", "attach", "portforward", "proxy")},
}
