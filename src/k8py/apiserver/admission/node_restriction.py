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
- ``serviceaccounts/token``: only tokens bound to a pod on the node (the Node
  authorizer already ties the service account to one).

Refusals are upstream's Forbidden, e.g. ``pods "p" is forbidden: node "a" can
only update pod status for pods with spec.nodeName set to itself``. Off by
default, as upstream; ``k8py up`` enables it with ``Node,RBAC``
(``--enable-admission-plugins=NodeRestriction``).
"""

from __future__ import annotations

from typing import Any

from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.authz.node import node_name, pod_references

__all__ = ["NodeRestriction", "MIRROR_ANNOTATION"]

Object = dict[str, Any]
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
RESTRICTED_LABEL_PREFIX = "node-restriction.kubernetes.io/"


class NodeRestriction:
    name = "NodeRestriction"

    def handles(self, operation: Operation) -> bool:
        return operation in (Operation.CREATE, Operation.UPDATE, Operation.DELETE)

    async def validate(self, a: AdmissionAttributes) -> None:
        node = node_name(a.user)
        if node is None:
            return
        group, resource = a.resource.group, a.resource.resource
        if group == "" and resource == "pods":
            self._pod(node, a)
        elif group == "" and resource == "nodes":
            self._node(node, a)
        elif group == "coordination.k8s.io" and resource == "leases":
            name = a.name or ((a.object or {}).get("metadata") or {}).get("name", "")
            if a.namespace != "kube-node-lease" or name != node:
                raise a.forbidden(f'node "{node}" is not allowed to modify lease "{name}"')
        elif group == "" and resource == "serviceaccounts" and a.subresource == "token":
            bound = ((a.object or {}).get("spec") or {}).get("boundObjectRef") or {}
            if bound.get("kind") != "Pod":
                raise a.forbidden(f'node "{node}" can only create tokens for individual service accounts bound to pods')

    def _pod(self, node: str, a: AdmissionAttributes) -> None:
        sub = a.subresource
        stored = a.old_object or {}
        if sub == "" and a.operation is Operation.CREATE:
            self._mirror_pod(node, a)
        elif sub == "" and a.operation is Operation.DELETE:
            if (stored.get("spec") or {}).get("nodeName") != node:
                raise a.forbidden(f'node "{node}" can only delete pods with spec.nodeName set to itself')
        elif sub == "status" and a.operation is Operation.UPDATE:
            if (stored.get("spec") or {}).get("nodeName") != node:
                raise a.forbidden(f'node "{node}" can only update pod status for pods with spec.nodeName set to itself')
        elif sub == "eviction" and a.operation is Operation.CREATE:
            pass  # the eviction names a pod; the Node authorizer and the pod's binding decide
        else:
            raise a.forbidden(f'unexpected operation {a.operation.value} on pods{"/" + sub if sub else ""}, node "{node}" '
                              "can only create and delete mirror pods, and update their status")

    def _mirror_pod(self, node: str, a: AdmissionAttributes) -> None:
        pod = a.object or {}
        meta = pod.get("metadata") or {}
        if MIRROR_ANNOTATION not in (meta.get("annotations") or {}):
            raise a.forbidden(f'pod does not have "{MIRROR_ANNOTATION}" annotation, node "{node}" can only create mirror pods')
        spec = pod.get("spec") or {}
        if spec.get("nodeName") != node:
            raise a.forbidden(f'node "{node}" can only create pods with spec.nodeName set to itself')
        refs = pod_references(pod)
        for kind in ("secrets", "configmaps", "persistentvolumeclaims"):
            if refs[kind]:
                raise a.forbidden(f'node "{node}" can not create pods that reference {kind}')
        if spec.get("serviceAccountName") not in (None, "", "default") or spec.get("serviceAccount") not in (None, "", "default"):
            raise a.forbidden(f'node "{node}" can not create pods that reference a service account')

    def _node(self, node: str, a: AdmissionAttributes) -> None:
        name = a.name or ((a.object or {}).get("metadata") or {}).get("name", "")
        if name != node:
            raise a.forbidden(f'node "{node}" is not allowed to modify node "{name}"')
        if a.operation is Operation.DELETE:
            return
        labels = ((a.object or {}).get("metadata") or {}).get("labels") or {}
        old = ((a.old_object or {}).get("metadata") or {}).get("labels") or {}
        changed = sorted(k for k in set(labels) | set(old)
                         if k.startswith(RESTRICTED_LABEL_PREFIX) and labels.get(k) != old.get(k))
        if changed:
            raise a.forbidden(f'node "{node}" is not allowed to modify labels: {", ".join(changed)}')
