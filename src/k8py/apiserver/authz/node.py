"""The Node authorizer (``--authorization-mode=Node``): a kubelet reads only what its pods need.

A request from a node (user ``system:node:<name>`` in group ``system:nodes``)
for a Secret, ConfigMap, PersistentVolumeClaim or PersistentVolume, or for a
service account's token, is allowed only along the graph upstream's
authorizer keeps::

    node <- pod (spec.nodeName) -> secret | configmap | serviceaccount
                                -> persistentvolumeclaim -> persistentvolume -> secret

(references: volumes, projected sources, imagePullSecrets, env and envFrom of
every container, init and ephemeral container, ephemeral volumes' claims).
The graph is evaluated lazily from the watch cache: the pods bound to the node
come from the pods cache's ``spec.nodeName`` index, and each pod's references
are derived once per pod revision. Secrets and configmaps may be read one at a
time (get, or list/watch pinned to a name); claims and volumes only with get;
tokens only created. Anything else a node asks is decided against upstream's
static node rules (the ``system:node`` role's rules); everything not granted
is NO_OPINION with upstream's reasons (``no relationship found between node
'n' and this object``), so RBAC may still allow it. Requests of other users
get NO_OPINION at once.

Not done: upstream 1.32's AuthorizeNodeWithSelectors (pods list/watch only
with ``spec.nodeName``, nodes only their own) — pod and node reads follow the
static rules, as before 1.32; ResourceClaims and VolumeAttachments.
"""

from __future__ import annotations

from typing import Any, Iterable

import orjson

from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.authz.attributes import Attributes, Decision
from k8py.apiserver.authz.bootstrap_policy import node_rules
from k8py.apiserver.authz.rules import rules_allow
from k8py.apiserver.registry import Registry
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["NodeAuthorizer", "node_name", "pod_references"]

NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
Object = dict[str, Any]
_MEMO_LIMIT = 50_000


def node_name(user: UserInfo) -> str | None:
    """The node a user is (``system:node:<name>`` in ``system:nodes``), "" if the name is empty, None if not a node."""
    if not user.name.startswith(NODE_PREFIX) or NODES_GROUP not in user.groups:
        return None
    return user.name[len(NODE_PREFIX):]


def _containers(spec: Object) -> Iterable[Object]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or []:
            if isinstance(c, dict):
                yield c


def pod_references(pod: Object) -> dict[str, frozenset[str]]:
    """What a pod's kubelet must read: kind (secrets, configmaps, persistentvolumeclaims, serviceaccounts) -> names."""
    spec = pod.get("spec") or {}
    refs: dict[str, set[str]] = {"secrets": set(), "configmaps": set(), "persistentvolumeclaims": set(), "serviceaccounts": set()}
    refs["serviceaccounts"].add(spec.get("serviceAccountName") or "default")
    for s in spec.get("imagePullSecrets") or []:
        if isinstance(s, dict) and s.get("name"):
            refs["secrets"].add(s["name"])
    for c in _containers(spec):
        for env in c.get("env") or []:
            source = (env or {}).get("valueFrom") or {}
            if (source.get("secretKeyRef") or {}).get("name"):
                refs["secrets"].add(source["secretKeyRef"]["name"])
            if (source.get("configMapKeyRef") or {}).get("name"):
                refs["configmaps"].add(source["configMapKeyRef"]["name"])
        for env_from in c.get("envFrom") or []:
            if ((env_from or {}).get("secretRef") or {}).get("name"):
                refs["secrets"].add(env_from["secretRef"]["name"])
            if ((env_from or {}).get("configMapRef") or {}).get("name"):
                refs["configmaps"].add(env_from["configMapRef"]["name"])
    pod_name = (pod.get("metadata") or {}).get("name", "")
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        if (volume.get("secret") or {}).get("secretName"):
            refs["secrets"].add(volume["secret"]["secretName"])
        if (volume.get("configMap") or {}).get("name"):
            refs["configmaps"].add(volume["configMap"]["name"])
        if (volume.get("persistentVolumeClaim") or {}).get("claimName"):
            refs["persistentvolumeclaims"].add(volume["persistentVolumeClaim"]["claimName"])
        if volume.get("ephemeral") is not None:
            refs["persistentvolumeclaims"].add(f"{pod_name}-{volume.get('name', '')}")
        for source in (volume.get("projected") or {}).get("sources") or []:
            if ((source or {}).get("secret") or {}).get("name"):
                refs["secrets"].add(source["secret"]["name"])
            if ((source or {}).get("configMap") or {}).get("name"):
                refs["configmaps"].add(source["configMap"]["name"])
        for field in ("azureFile", "cephfs", "cinder", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos", "csi"):
            ref = (volume.get(field) or {})
            name = ref.get("secretName") or (ref.get("secretRef") or {}).get("name") \
                or (ref.get("nodePublishSecretRef") or {}).get("name")
            if name:
                refs["secrets"].add(name)
    return {k: frozenset(v) for k, v in refs.items()}


class NodeAuthorizer:
    def __init__(self, cacher: Cacher, registry: Registry) -> None:
        self._cacher = cacher
        self._registry = registry
        self._rules = node_rules()
        #: (pod key, rv) -> its references
        self._refs: dict[tuple[str, int], dict[str, frozenset[str]]] = {}

    def _cache(self, plural: str) -> Any:
        definition = self._registry.get("", "v1", plural)
        return None if definition is None else self._cacher.cache_for(definition)

    def _pods_on(self, node: str) -> Iterable[tuple[str, dict[str, frozenset[str]]]]:
        """(namespace, references) of every pod bound to ``node``."""
        cache = self._cache("pods")
        if cache is None:
            return
        if len(self._refs) > _MEMO_LIMIT:
            self._refs = {}
        for cached in list(cache.candidates(index_value=node)):
            key = (cached.key, cached.rv)
            refs = self._refs.get(key)
            if refs is None:
                refs = self._refs[key] = pod_references(orjson.loads(cached.data))
            yield cached.namespace, refs

    def _related(self, node: str, kind: str, namespace: str, name: str) -> bool:
        if kind == "persistentvolumes":
            claims = self._cache("persistentvolumeclaims")
            for pod_ns, refs in self._pods_on(node):
                for claim in refs["persistentvolumeclaims"]:
                    cached = claims.objects.get(f"/registry/persistentvolumeclaims/{pod_ns}/{claim}") if claims else None
                    if cached is not None and (orjson.loads(cached.data).get("spec") or {}).get("volumeName") == name:
                        return True
            return False
        return any(pod_ns == namespace and name in refs[kind] for pod_ns, refs in self._pods_on(node))

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return self.authorize_now(attributes)

    def authorize_now(self, attributes: Attributes) -> tuple[Decision, str]:
        node = node_name(attributes.user)
        if node is None:
            return Decision.NO_OPINION, ""
        if not node:
            return Decision.NO_OPINION, f'unknown node for user "{attributes.user.name}"'
        if attributes.resource_request and attributes.api_group == "":
            resource, sub = attributes.resource, attributes.subresource
            if resource in ("secrets", "configmaps"):
                if attributes.verb not in ("get", "list", "watch"):
                    return Decision.NO_OPINION, "can only read resources of this type"
                if sub:
                    return Decision.NO_OPINION, "cannot read subresource"
                if not attributes.namespace:
                    return Decision.NO_OPINION, "can only read namespaced object of this type"
                return self._graph(node, resource, attributes)
            if resource in ("persistentvolumeclaims", "persistentvolumes") and sub != "status":
                if attributes.verb != "get":
                    return Decision.NO_OPINION, "can only get individual resources of this type"
                if sub:
                    return Decision.NO_OPINION, "cannot get subresource"
                return self._graph(node, resource, attributes)
            if resource == "serviceaccounts" and sub == "token":
                if attributes.verb != "create":
                    return Decision.NO_OPINION, "can only create tokens for individual service accounts"
                return self._graph(node, "serviceaccounts", attributes)
        if rules_allow(attributes, self._rules):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    def _graph(self, node: str, kind: str, attributes: Attributes) -> tuple[Decision, str]:
        if not attributes.name:
            return Decision.NO_OPINION, "No Object name found"
        if self._related(node, kind, attributes.namespace, attributes.name):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, f"no relationship found between node '{node}' and this object"

    def rules_review(self, user: UserInfo, namespace: str) -> tuple[list[Object], list[Object], bool, list[str]]:
        if node_name(user) is not None:
            return [], [], True, ["node authorizer does not support user rule resolution"]
        return [], [], False, []
