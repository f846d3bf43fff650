"""ServiceAccount admission: every pod runs as a service account and gets its API credentials
(upstream ``plugin/pkg/admission/serviceaccount``).

On pod create (mutating), unless the pod is a mirror pod:

- ``spec.serviceAccountName`` defaults to ``default``;
- the service account must exist: a missing one is 403 ``error looking up
  service account NS/NAME: serviceaccount "NAME" not found`` (read from the
  watch cache, then from the store: the cache may lag a just-made account);
- unless ``automountServiceAccountToken`` is false (the pod's wins over the
  account's), a projected volume ``kube-api-access-<5 random>`` is added with
  a ``serviceAccountToken`` (path ``token``, ``expirationSeconds: 3607``),
  the ``kube-root-ca.crt`` ConfigMap's ``ca.crt`` and the downward-API
  ``namespace``, ``defaultMode: 420``; every container and init container
  without a mount at ``/var/run/secrets/kubernetes.io/serviceaccount`` mounts
  it there read-only (an existing ``kube-api-access-*`` volume is reused);
- a pod without ``imagePullSecrets`` takes the account's.

A mirror pod (annotation ``kubernetes.io/config.mirror``) naming a service
account, or mounting a token, is refused (validating phase).

Two k8py departures, both for clusters that lack what upstream always has,
and neither changing a cluster that has it:

- a missing ``default`` account (a bare API server with no controller
  manager to create it) does not refuse the pod; it is admitted with the name
  set and no token volume. A missing account named by the pod is refused;
- when the namespace has no ``kube-root-ca.crt`` ConfigMap (yet: the root-CA
  publisher runs only on a cluster with a CA), that projection is marked
  ``optional`` so the pod still starts; the kubelet re-projects the volume
  and ``ca.crt`` appears once the ConfigMap does.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import orjson

from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.registry import Registry
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["ServiceAccountAdmission", "token_volume_source", "TOKEN_MOUNT_PATH", "VOLUME_PREFIX"]

Object = dict[str, Any]

TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
VOLUME_PREFIX = "kube-api-access-"
DEFAULT_ACCOUNT = "default"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
#: upstream's names.SimpleNameGenerator alphabet (no vowels, no look-alikes)
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def token_volume_source(*, ca_optional: bool = False) -> Object:
    """The projected volume upstream's ``TokenVolumeSource`` builds."""
    config_map: Object = {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    if ca_optional:
        config_map["optional"] = True
    return {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": config_map},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
        "defaultMode": 420,
    }


class ServiceAccountAdmission:
    name = "ServiceAccount"

    def __init__(self, registry: Registry, cacher: Cacher, store: ObjectStore, *,
                 random_suffix: Callable[[], str] | None = None) -> None:
        self.registry = registry
        self.cacher = cacher
        self.store = store
        self._suffix = random_suffix or (lambda: "".join(random.choices(_ALPHABET, k=5)))

    def handles(self, operation: Operation) -> bool:
        return operation is Operation.CREATE

    def concerns(self, group: str, resource: str, subresource: str) -> bool:
        """Pods themselves only (what ``is_core("pods")`` lets through)."""
        return group == "" and resource == "pods" and not subresource

    async def _get(self, plural: str, namespace: str, name: str, *, live: bool) -> Object | None:
        d = self.registry.get("", "v1", plural)
        if d is None:
            return None
        key = d.key(namespace, name)
        cached = self.cacher.cache_for(d).objects.get(key)
        if cached is not None:
            return orjson.loads(cached.data)
        if not live:
            return None
        kv = await self.store.storage.get(key)
        return None if kv is None else orjson.loads(kv.value)

    async def admit(self, a: AdmissionAttributes) -> None:
        pod = a.object
        if pod is None or not a.is_core("pods"):
            return
        meta = pod.get("metadata") or {}
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            return
        spec = pod.setdefault("spec", {})
        name = spec.get("serviceAccountName") or DEFAULT_ACCOUNT
        named = bool(spec.get("serviceAccountName"))
        spec["serviceAccountName"] = name
        # a named account missing from the cache is looked up in the store (the cache may lag its
        # create); "default" is not: a bare server has none, and it would cost every pod a read
        account = await self._get("serviceaccounts", a.namespace, name, live=named and name != DEFAULT_ACCOUNT)
        if account is None:
            if named and name != DEFAULT_ACCOUNT:
                raise a.forbidden(f'error looking up service account {a.namespace}/{name}: serviceaccount "{name}" not found')
            return  # no controller made the default account: admitted as before accounts existed
        if _automount(pod, account):
            ca = await self._get("configmaps", a.namespace, ROOT_CA_CONFIGMAP, live=False)
            self._mount_token(spec, ca_optional=ca is None)
        if not spec.get("imagePullSecrets") and account.get("imagePullSecrets"):
            spec["imagePullSecrets"] = [{"name": s.get("name", "")} for s in account["imagePullSecrets"] if isinstance(s, dict)]

    def _mount_token(self, spec: Object, *, ca_optional: bool) -> None:
        volumes = spec.get("volumes") if isinstance(spec.get("volumes"), list) else []
        existing = next((v.get("name") for v in volumes if isinstance(v, dict) and str(v.get("name", "")).startswith(VOLUME_PREFIX)), None)
        volume_name = existing or VOLUME_PREFIX + self._suffix()
        mount = {"name": volume_name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}
        needed = False
        for field in ("initContainers", "containers"):
            for c in spec.get(field) or ():
                if not isinstance(c, dict):
                    continue
                mounts = c.get("volumeMounts") if isinstance(c.get("volumeMounts"), list) else []
                if any(isinstance(m, dict) and m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts):
                    continue
                c["volumeMounts"] = [*mounts, dict(mount)]
                needed = True
        if needed and existing is None:
            spec["volumes"] = [*volumes, {"name": volume_name, "projected": token_volume_source(ca_optional=ca_optional)}]

    async def validate(self, a: AdmissionAttributes) -> None:
        pod = a.object
        if pod is None or not a.is_core("pods"):
            return
        if MIRROR_ANNOTATION not in ((pod.get("metadata") or {}).get("annotations") or {}):
            return
        spec = pod.get("spec") or {}
        if spec.get("serviceAccountName"):
            raise a.forbidden("a mirror pod may not reference service accounts")
        for v in spec.get("volumes") or ():
            sources = ((v or {}).get("projected") or {}).get("sources") or ()
            if v.get("secret") or any("serviceAccountToken" in (s or {}) or "secret" in (s or {}) for s in sources):
                raise a.forbidden("a mirror pod may not reference secrets")


def _automount(pod: Object, account: Object) -> bool:
    """The pod's ``automountServiceAccountToken`` if set, else the account's, else true."""
    value = (pod.get("spec") or {}).get("automountServiceAccountToken")
    if value is None:
        value = account.get("automountServiceAccountToken")
    return value is not False

