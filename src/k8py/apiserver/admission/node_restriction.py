"""NodeRestriction: a kubelet writes only its own Node, its own Lease and its own pods (upstream's plugin).

For requests from a node (``system:node:<name>`` in ``system:nodes``); every
other user passes untouched. As upstream's ``noderestriction`` admission:

- pods: a node may create only *mirror* pods (``kubernetes.io/config.mirror``)
  bound to itself, referencing no secrets, configmaps, claims or service
  account; may delete, update the ``status`` of, and evict only pods bound to
  itself; any other pod write is refused;
- nodes: a node may create, update or delete only its own Node object, and
  may not set labels under ``node-restriction.kubernetes.io/``;
- leases (``coordination.k8s.io``): only its own, ``kube-node-lease/<name>``;
- ``serviceaccounts/token``: only for service accounts of pods bound to it
  (the Node authorizer already checks the relation; kept here as upstream).

Refusals are upstream's Forbidden, e.g. ``pods "p" is forbidden: node "a" can
only update pod status for pods with spec.nodeName set to itself``.

Where it runs: the checks that need only the request and the stored object
(delete, status, eviction, other nodes, leases) run as a middleware right after
authorization, reading the target from the watch cache; those that need the
new object's body (a pod or node create) run as an object-store hook, with the
user from the request context. The admission chain, when it comes, takes both
as one plugin.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import orjson
from aiohttp import web

from k8py.api.errors import Forbidden
from k8py.apiserver.authn.user import UNSECURED, USER_KEY
from k8py.apiserver.authz.filter import current_user
from k8py.apiserver.authz.node import node_name, pod_references
from k8py.apiserver.authz.request_attributes import request_attributes
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["NodeRestriction", "MIRROR_ANNOTATION"]

Object = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
RESTRICTED_LABEL_PREFIX = "node-restriction.kubernetes.io/"
_WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def _forbidden(resource: str, group: str, name: str, message: str) -> Forbidden:
    qualified = f"{resource}.{group}" if group else resource
    full = f'{qualified} "{name}" is forbidden: {message}' if name else f"{qualified} is forbidden: {message}"
    return Forbidden(full, name=name, group=group, kind=resource)


class NodeRestriction:
    def __init__(self, registry: Registry, cacher: Cacher) -> None:
        self.registry = registry
        self.cacher = cacher

    def _stored(self, plural: str, namespace: str, name: str) -> Object | None:
        definition = self.registry.get("", "v1", plural)
        if definition is None:
            return None
        cached = self.cacher.cache_for(definition).objects.get(definition.key(namespace, name))
        return None if cached is None else orjson.loads(cached.data)

    # -- the request stage (after authorization) ----------------------------------

    def middleware(self) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
        @web.middleware
        async def node_restriction(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.method not in ("GET", "HEAD"):
                user = request.get(USER_KEY) or UNSECURED
                node = node_name(user)
                if node is not None:
                    self.check_request(node, request_attributes(user, request.method, request.path, request.query))
            return await handler(request)

        return node_restriction

    def check_request(self, node: str, attrs: Any) -> None:
        if not attrs.resource_request or attrs.verb not in _WRITES:
            return
        group, resource, sub, name = attrs.api_group, attrs.resource, attrs.subresource, attrs.name
        if group == "" and resource == "pods":
            if sub == "" and attrs.verb == "create":
                return  # judged on the body (pod_created)
            if sub == "" and attrs.verb == "delete":
                pod = self._stored("pods", attrs.namespace, name)
                if pod is not None and (pod.get("spec") or {}).get("nodeName") != node:
                    raise _forbidden("pods", "", name, f'node "{node}" can only delete pods with spec.nodeName set to itself')
                return
            if sub in ("status", "eviction"):
                pod = self._stored("pods", attrs.namespace, name)
                if pod is not None and (pod.get("spec") or {}).get("nodeName") != node:
                    what = "update pod status" if sub == "status" else "evict pods"
                    raise _forbidden("pods", "", name, f'node "{node}" can only {what} for pods with spec.nodeName set to itself')
                return
            raise _forbidden("pods", "", name, f'unexpected operation "{attrs.verb}" on "{sub or "pods"}", node "{node}" '
                             "can only create and delete mirror pods, and update their status")
        if group == "" and resource == "nodes":
            if attrs.verb == "create":
                return  # judged on the body (node_created)
            if name != node:
                raise _forbidden("nodes", "", name, f'node "{node}" is not allowed to modify node "{name}"')
            return
        if group == "coordination.k8s.io" and resource == "leases":
            if attrs.namespace != "kube-node-lease" or (name and name != node) or attrs.verb == "deletecollection":
                raise _forbidden("leases", group, name, f'node "{node}" is not allowed to modify lease "{name}"'
                                 if name else f'node "{node}" is not allowed to modify leases')
            return
        if group == "" and resource == "serviceaccounts" and sub == "token":
            return  # the Node authorizer already ties the token to a pod on this node

    # -- the store stage (new objects) ------------------------------------------

    async def __call__(self, definition: ResourceDefinition, obj: Object, *, dry_run: bool) -> None:
        user = current_user()
        node = node_name(user) if user is not None else None
        if node is None:
            return None
        meta = obj.get("metadata") or {}
        if definition.group == "coordination.k8s.io" and definition.plural == "leases":
            name = meta.get("name", "")
            if meta.get("namespace") != "kube-node-lease" or name != node:
                raise _forbidden("leases", definition.group, name, f'node "{node}" is not allowed to modify lease "{name}"')
            return None
        if definition.group != "":
            return None
        if definition.plural == "pods":
            self.pod_created(node, obj)
        elif definition.plural == "nodes":
            name = meta.get("name", "")
            if name != node:
                raise _forbidden("nodes", "", name, f'node "{node}" is not allowed to modify node "{name}"')
            restricted = sorted(k for k in meta.get("labels") or {} if k.startswith(RESTRICTED_LABEL_PREFIX))
            if restricted:
                raise _forbidden("nodes", "", name, f'node "{node}" is not allowed to set the following labels: '
                                 + ", ".join(restricted))
        return None

    def pod_created(self, node: str, pod: Object) -> None:
        meta = pod.get("metadata") or {}
        name = meta.get("name", "") or meta.get("generateName", "")
        if MIRROR_ANNOTATION not in (meta.get("annotations") or {}):
            raise _forbidden("pods", "", name, f'pod does not have "{MIRROR_ANNOTATION}" annotation, node "{node}" can only '
                             "create mirror pods")
        if (pod.get("spec") or {}).get("nodeName") != node:
            raise _forbidden("pods", "", name, f'node "{node}" can only create pods with spec.nodeName set to itself')
        refs = pod_references(pod)
        explicit_sa = (pod.get("spec") or {}).get("serviceAccountName")
        for kind, what in (("secrets", "secrets"), ("configmaps", "configmaps"),
                           ("persistentvolumeclaims", "persistentvolumeclaims")):
            if refs[kind]:
                raise _forbidden("pods", "", name, f'node "{node}" can not create pods that reference {what}')
        if explicit_sa:
            raise _forbidden("pods", "", name, f'node "{node}" can not create pods that reference a service account')
