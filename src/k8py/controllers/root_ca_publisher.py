"""``root-ca-cert-publisher``: the ``kube-root-ca.crt`` ConfigMap in every namespace.

So that a pod can verify the API server (the projected ``kube-api-access-*``
volume mounts it as ``ca.crt``), every active namespace holds a ConfigMap
``kube-root-ca.crt`` whose ``ca.crt`` is the cluster's root CA bundle, with
upstream's ``kubernetes.io/description`` annotation. A ConfigMap changed or
deleted by someone is put back. The bundle is ``--root-ca-file``, else the
CA the controller manager's own kubeconfig trusts; with neither (a plain
HTTP cluster) the controller does not start, as upstream.

Queue ``root_ca_cert_publisher`` of namespace names: a namespace added or
updated, or that ConfigMap in it changed or deleted.
"""

from __future__ import annotations

import logging
from typing import Any

from k8py.api.errors import AlreadyExists, Conflict, Forbidden, NotFound
from k8py.client.resources import CONFIGMAPS, NAMESPACES
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController, unwrap_tombstone

__all__ = ["RootCAPublisher", "new_controller", "CONFIGMAP_NAME", "DESCRIPTION"]

logger = logging.getLogger(__name__)

CONFIGMAP_NAME = "kube-root-ca.crt"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the "
    "internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)


class RootCAPublisher(KeyedController):
    def __init__(self, ctx: ControllerContext, root_ca: str) -> None:
        super().__init__(ctx, name="root-ca-cert-publisher", queue_name="root_ca_cert_publisher")
        self.root_ca = root_ca
        self.namespaces = ctx.informers.informer(NAMESPACES)
        self.configmaps = ctx.informers.informer(CONFIGMAPS)
        self.wait_for(self.namespaces, self.configmaps)
        self.namespaces.add_event_handler(on_add=self._namespace, on_update=lambda old, new: self._namespace(new))
        self.configmaps.add_event_handler(on_update=lambda old, new: self._configmap(new), on_delete=self._configmap)

    def _namespace(self, ns: Any) -> None:
        self.queue.add((ns.get("metadata") or {}).get("name"))

    def _configmap(self, obj: Any) -> None:
        cm = unwrap_tombstone(obj)
        meta = (cm or {}).get("metadata") or {}
        if meta.get("name") == CONFIGMAP_NAME:
            self.queue.add(meta.get("namespace"))

    async def sync(self, namespace: str) -> None:
        ns = self.namespaces.lister.try_get(None, namespace)
        if ns is None or (ns.get("metadata") or {}).get("deletionTimestamp"):
            return
        data = {"ca.crt": self.root_ca}
        cm = self.configmaps.lister.try_get(namespace, CONFIGMAP_NAME)
        try:
            if cm is None:
                body = {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": CONFIGMAP_NAME, "namespace": namespace,
                                     "annotations": {"kubernetes.io/description": DESCRIPTION}},
                        "data": data}
                await self.client.create(CONFIGMAPS, body, namespace=namespace)
                return
            meta = cm.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            if cm.get("data") == data and annotations.get("kubernetes.io/description") == DESCRIPTION:
                return
            await self.client.update(CONFIGMAPS, {**cm, "data": data, "metadata": {
                **meta, "annotations": {**annotations, "kubernetes.io/description": DESCRIPTION}}})
        except (AlreadyExists, Conflict, NotFound):
            self.queue.add_after(namespace, 0.1)  # the cache is behind: look again
        except Forbidden as err:
            if "being terminated" not in (err.message or ""):
                raise


def new_controller(ctx: ControllerContext) -> RootCAPublisher | None:
    path = ctx.options.root_ca_file
    bundle = ""
    if path:
        with open(path, encoding="utf-8") as f:
            bundle = f.read()
    else:
        config = getattr(ctx.client, "config", None)
        ca_data = getattr(config, "ca_data", None)
        ca_file = getattr(config, "ca_file", None)
        if ca_data:
            bundle = ca_data.decode() if isinstance(ca_data, bytes) else str(ca_data)
        elif ca_file:
            with open(ca_file, encoding="utf-8") as f:
                bundle = f.read()
    if not bundle:
        logger.warning("root-ca-cert-publisher not started: give --root-ca-file (the cluster serves no CA to publish)")
        return None
    return RootCAPublisher(ctx, bundle)
