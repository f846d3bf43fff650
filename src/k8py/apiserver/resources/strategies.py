"""Strategies shared by the built-in kinds.

:class:`StandardStrategy` wires the generic hooks of
:class:`k8py.apiserver.registry.Strategy` to the upstream defaults and the
semantic validation of each kind (``k8py.apiserver.defaults`` and
``k8py.apiserver.validation``), and to object-meta validation
(``k8py.api.names``). Kind-specific strategies subclass it only to add what the
kind does differently (a Pod's initial status, a Namespace's phase).
"""

from __future__ import annotations

from typing import Any, Callable

from k8py.api.errors import Cause, Conflict
from k8py.apiserver.defaults import apply_defaults
from k8py.apiserver.registry import Strategy
from k8py.apiserver.validation import validate
from k8py.apiserver.validation.ephemeral import validate_ephemeral_containers_update

Object = dict[str, Any]


def path_getter(*path: str) -> Callable[[Object], str | None]:
    """A fieldSelector getter reading a string at ``path`` ('' when absent)."""

    def get(obj: Object) -> str | None:
        cur: Any = obj
        for part in path:
            if not isinstance(cur, dict):
                return ""
            cur = cur.get(part)
            if cur is None:
                return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    get.path = path  # type: ignore[attr-defined]  # read by the watch cache's field plan (watch.cached_object)
    return get


class StandardStrategy(Strategy):
    """Upstream defaults + semantic validation for a built-in (group, kind)."""

    def __init__(
        self,
        group: str,
        version: str,
        kind: str,
        *,
        has_status: bool = False,
        tracks_generation: bool = False,
        return_deleted_object: bool = False,
        allow_create_on_update: bool = False,
    ) -> None:
        self.group = group
        self.version = version
        self.kind = kind
        self.has_status = has_status
        self.tracks_generation = tracks_generation
        self.return_deleted_object = return_deleted_object
        self.allow_create_on_update = allow_create_on_update

    def default(self, obj: Object) -> None:
        apply_defaults(self.group, self.version, self.kind, obj)

    def validate(self, obj: Object) -> list[Cause]:
        return self._semantic(obj, None)

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return self._semantic(obj, old)

    def _semantic(self, obj: Object, old: Object | None) -> list[Cause]:
        return validate(self.group, self.kind, obj, old)


class PodStrategy(StandardStrategy):
    """Pods start Pending; a bound pod is deleted gracefully (its kubelet
    stops the containers, then deletes it with grace 0)."""

    def initial_status(self, obj: Object) -> Object | None:
        return {"phase": "Pending", "qosClass": _qos_class(obj)}

    def grace_period(self, obj: Object, requested: int | None) -> int:
        # upstream pod strategy's CheckGracefulDelete
        spec = obj.get("spec") or {}
        grace = requested
        if grace is None:
            grace = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
        if grace < 0:
            grace = 1
        if not spec.get("nodeName"):
            return 0  # never scheduled: no kubelet to stop it
        if (obj.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
            return 0
        return grace

    def prepare_for_subresource_update(self, subresource: str, obj: Object, old: Object) -> None:
        if subresource != "ephemeralcontainers":
            return
        # only spec.ephemeralContainers comes from the request (upstream's
        # podEphemeralContainersStrategy): everything else is the stored pod
        ephemeral = (obj.get("spec") or {}).get("ephemeralContainers")
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        obj.clear()
        obj.update(old)
        obj["metadata"] = dict(old.get("metadata") or {})
        if rv:
            obj["metadata"]["resourceVersion"] = rv
        obj["spec"] = dict(old.get("spec") or {})
        if ephemeral:
            obj["spec"]["ephemeralContainers"] = ephemeral
        else:
            obj["spec"].pop("ephemeralContainers", None)
        self.default(obj)

    def validate_subresource_update(self, subresource: str, obj: Object, old: Object) -> list[Cause]:
        if subresource == "ephemeralcontainers":
            return validate_ephemeral_containers_update(obj, old)
        return []


def _qos_class(pod: Object) -> str:
    """Upstream's QoS classification from requests and limits."""
    containers = list((pod.get("spec") or {}).get("containers") or []) + list(
        (pod.get("spec") or {}).get("initContainers") or []
    )
    requests_seen = limits_seen = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req = res.get("requests") or {}
        lim = res.get("limits") or {}
        if req or lim:
            requests_seen = requests_seen or bool(req)
            limits_seen = limits_seen or bool(lim)
        for name in ("cpu", "memory"):
            if name not in lim or (name in req and req[name] != lim[name]):
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    if guaranteed and containers:
        return "Guaranteed"
    return "Burstable"


class BindingStrategy(StandardStrategy):
    """core/v1 ``bindings``: a POST binds the pod the Binding names, exactly
    as ``pods/<name>/binding`` does (upstream serves both with one REST)."""

    create_through = ("pods", "binding")


class JobStrategy(StandardStrategy):
    """A Job's selector is generated from its uid unless ``manualSelector: true``
    (upstream ``generateSelector``): the pod template gets the
    ``batch.kubernetes.io/controller-uid`` and ``batch.kubernetes.io/job-name``
    labels (and their legacy unprefixed twins) and the selector matches the uid,
    so a Job's pods can never be confused with another Job's of the same name."""

    def prepare_for_create(self, obj: Object) -> None:
        super().prepare_for_create(obj)
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("manualSelector") is True:
            return
        meta = obj.get("metadata") or {}
        uid, name = meta.get("uid", ""), meta.get("name", "")
        template = spec.get("template")
        if isinstance(template, dict):
            template_meta = template.setdefault("metadata", {})
            labels = template_meta.get("labels") or {}
            labels.update({
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": name,
                "controller-uid": uid,
                "job-name": name,
            })
            template_meta["labels"] = labels
        if spec.get("selector") is None:
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}


class DeploymentStrategy(StandardStrategy):
    """A Deployment's ``/status`` may also set annotations (upstream's
    deploymentStatusStrategy resets only spec and labels): the controller
    writes the ``deployment.kubernetes.io/revision`` annotation through it."""

    def prepare_for_status_update(self, obj: Object, old: Object) -> None:
        annotations = (obj.get("metadata") or {}).get("annotations")
        super().prepare_for_status_update(obj, old)
        if annotations is not None:
            obj["metadata"]["annotations"] = annotations
        else:
            obj["metadata"].pop("annotations", None)


class NodeStrategy(StandardStrategy):
    """Nodes are the one built-in kind whose create keeps ``status`` (upstream's
    node strategy: a kubelet registers its node with capacity and conditions
    in one request); updates of the main resource still ignore status."""

    def prepare_for_create(self, obj: Object) -> None:
        status = obj.get("status")
        super().prepare_for_create(obj)
        if status is not None:
            obj["status"] = status


class NamespaceStrategy(StandardStrategy):
    """A namespace starts Active with the ``kubernetes`` finalizer in
    ``spec.finalizers``; only ``/finalize`` changes that list (see
    ``namespace_lifecycle`` for what deletion does)."""

    def initial_status(self, obj: Object) -> Object | None:
        return {"phase": "Active"}

    def begin_termination(self, obj: Object) -> bool:
        # a namespace goes Terminating; its content is removed and its
        # spec.finalizers cleared before it is deleted for good
        if not (obj.get("spec") or {}).get("finalizers"):
            return False
        name = (obj.get("metadata") or {}).get("name", "")
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            raise Conflict.for_object(
                "namespaces",
                name,
                "The system is ensuring all content is removed from this namespace.  Upon completion, "
                "this namespace will automatically be purged by the system.",
            )
        obj.setdefault("status", {})["phase"] = "Terminating"
        return True

    def prepare_for_create(self, obj: Object) -> None:
        super().prepare_for_create(obj)
        obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]

    def prepare_for_update(self, obj: Object, old: Object) -> None:
        super().prepare_for_update(obj, old)
        finalizers = (old.get("spec") or {}).get("finalizers")
        spec = obj.setdefault("spec", {})
        if finalizers is None:
            spec.pop("finalizers", None)
        else:
            spec["finalizers"] = finalizers
        if not spec:
            obj.pop("spec")
