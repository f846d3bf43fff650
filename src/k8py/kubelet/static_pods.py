"""Static pods from ``--pod-manifest-path`` and their mirror pods.

Every ``*.yaml``/``*.yml``/``*.json`` file in the directory holds one Pod.
The kubelet runs it from the file — the API server is not its source —
under the name ``<name>-<node>`` in the manifest's namespace (default
``default``), with a UID derived from the file's content hash, so an edited
manifest is a new pod (the old one is terminated). It creates a *mirror
pod* in the API server (annotation ``kubernetes.io/config.mirror`` = the
hash, owned by the Node) so the pod can be seen; its status is written to
the mirror pod. Deleting the mirror pod does not stop the static pod: the
kubelet creates it again. Removing the file stops the pod and deletes the
mirror. The directory is read every ``interval`` seconds (upstream's
fileCheckFrequency, 20 s).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
import os
import uuid
from typing import Any, Callable

import yaml

from k8py.api.errors import AlreadyExists, NotFound
from k8py.client.resources import PODS
from k8py.client.rest import RestClient
from k8py.kubelet.config import KubeletConfig

__all__ = ["StaticPods", "MIRROR_ANNOTATION", "is_mirror_pod"]

logger = logging.getLogger(__name__)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def is_mirror_pod(pod: dict[str, Any]) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


class StaticPods:
    def __init__(self, client: RestClient, config: KubeletConfig, *, on_pod: Callable[[dict[str, Any]], None],
                 on_remove: Callable[[dict[str, Any]], None], interval: float = 20.0) -> None:
        self.client = client
        self.config = config
        self.on_pod = on_pod
        self.on_remove = on_remove
        self.interval = interval
        self.pods: dict[str, dict[str, Any]] = {}  # file -> pod

    def _load(self, path: str) -> dict[str, Any] | None:
        try:
            with open(path, encoding="utf-8") as f:
                raw = f.read()
            doc = json.loads(raw) if path.endswith(".json") else yaml.safe_load(raw)
        except (OSError, ValueError, yaml.YAMLError) as err:
            logger.warning("cannot read static pod manifest", extra={"file": path, "error": str(err)})
            return None
        if not isinstance(doc, dict) or doc.get("kind") != "Pod":
            logger.warning("static pod manifest is not a Pod", extra={"file": path})
            return None
        digest = hashlib.sha256(raw.encode()).hexdigest()[:32]
        pod = copy.deepcopy(doc)
        meta = pod.setdefault("metadata", {})
        meta["name"] = f"{meta.get('name', 'static')}-{self.config.node_name}"
        meta.setdefault("namespace", "default")
        meta["uid"] = str(uuid.UUID(digest))
        ann = meta.setdefault("annotations", {})
        ann.update({"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": digest, MIRROR_ANNOTATION: digest,
                    "kubernetes.io/config.seen": "true"})
        spec = pod.setdefault("spec", {})
        spec["nodeName"] = self.config.node_name
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        for c in spec.get("containers") or []:
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
        pod.setdefault("status", {})
        return pod

    async def _mirror(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            current = await self.client.get(PODS, meta["namespace"], meta["name"])
            if (current["metadata"].get("annotations") or {}).get(MIRROR_ANNOTATION) == meta["annotations"][MIRROR_ANNOTATION]:
                return
            await self.client.request_json("DELETE", PODS.path(meta["namespace"], meta["name"]), body={"gracePeriodSeconds": 0})
        except NotFound:
            pass
        mirror = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": dict(meta.get("labels") or {}),
                               "annotations": dict(meta["annotations"]),
                               "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": self.config.node_name,
                                                    "uid": await self._node_uid(), "controller": True}]},
                  "spec": copy.deepcopy(pod["spec"])}
        try:
            await self.client.create(PODS, mirror)
        except AlreadyExists:
            pass

    async def _node_uid(self) -> str:
        from k8py.client.resources import NODES
        try:
            return str((await self.client.get(NODES, None, self.config.node_name))["metadata"]["uid"])
        except NotFound:
            return ""

    async def scan(self) -> None:
        try:
            files = sorted(f for f in os.listdir(self.config.static_pod_path) if f.endswith((".yaml", ".yml", ".json")))
        except FileNotFoundError:
            files = []
        seen = set()
        for f in files:
            path = os.path.join(self.config.static_pod_path, f)
            pod = self._load(path)
            if pod is None:
                continue
            seen.add(path)
            old = self.pods.get(path)
            if old is not None and old["metadata"]["uid"] != pod["metadata"]["uid"]:
                self.on_remove(old)
            self.pods[path] = pod
            self.on_pod(pod)
            try:
                await self._mirror(pod)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                logger.warning("cannot create mirror pod", extra={"pod": pod["metadata"]["name"], "error": str(err)})
        for path in [p for p in self.pods if p not in seen]:
            pod = self.pods.pop(path)
            self.on_remove(pod)
            meta = pod["metadata"]
            try:
                await self.client.request_json("DELETE", PODS.path(meta["namespace"], meta["name"]), body={"gracePeriodSeconds": 0})
            except NotFound:
                pass

    async def run(self) -> None:
        while True:
            await self.scan()
            await asyncio.sleep(self.interval)
