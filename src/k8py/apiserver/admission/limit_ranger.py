"""LimitRanger admission: LimitRange defaults and bounds for new pods
(upstream ``plugin/pkg/admission/limitranger``).

For each LimitRange of the pod's namespace (its items already defaulted when
it was stored, by ``resources.quota``: ``default`` from ``max``, ``defaultRequest`` from ``default``
or ``min``, as upstream's LimitRange defaulting):

- ``type: Container`` items first fill what each container (and init
  container) leaves unset: ``resources.limits`` from ``default``,
  ``resources.requests`` from ``defaultRequest``;
- then bound each container: a request under ``min`` ("minimum cpu usage per
  Container is 100m, but request is 50m"), a limit over ``max`` ("maximum cpu
  usage per Container is 1, but limit is 2"; "… No limit is specified" when
  there is a max and no limit), a limit/request over ``maxLimitRequestRatio``;
- ``type: Pod`` items bound the sums over the pod's containers the same way.

Any violation is a 403 ``pods "NAME" is forbidden: …`` (several joined in
``[…]``, as Go's error aggregate prints them).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import orjson

from k8py.api.errors import Forbidden
from k8py.api.quantity import parse_quantity
from k8py.api.quota import format_amount
from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["LimitRanger"]

Object = dict[str, Any]


def _q(value: Any) -> Fraction:
    return parse_quantity(value)


def _bounds(item: Object, kind: str, requests: dict[str, Fraction], limits: dict[str, Fraction]) -> list[str]:
    errs = []
    for name, low in (item.get("min") or {}).items():
        if name in requests and requests[name] < _q(low):
            errs.append(f"minimum {name} usage per {kind} is {low}, but request is {format_amount(name, requests[name])}")
        elif name not in requests:
            errs.append(f"minimum {name} usage per {kind} is {low}.  No request is specified")
    for name, high in (item.get("max") or {}).items():
        if name in limits and limits[name] > _q(high):
            errs.append(f"maximum {name} usage per {kind} is {high}, but limit is {format_amount(name, limits[name])}")
        elif name not in limits:
            errs.append(f"maximum {name} usage per {kind} is {high}.  No limit is specified")
    for name, ratio in (item.get("maxLimitRequestRatio") or {}).items():
        if name in limits and requests.get(name):
            actual = limits[name] / requests[name]
            if actual > _q(ratio):
                errs.append(f"{name} max limit to request ratio per {kind} is {ratio}, but provided ratio is {float(actual):f}")
    return errs


class LimitRanger:
    """The ``LimitRanger`` plugin (mutating, pod creates: containers cannot change on update, so
    upstream skips pod updates too)."""

    name = "LimitRanger"

    def handles(self, operation: Operation) -> bool:
        return operation is Operation.CREATE

    def concerns(self, group: str, resource: str, subresource: str) -> bool:
        """Pods themselves only (what ``is_core("pods")`` lets through)."""
        return group == "" and resource == "pods" and not subresource

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if attributes.object is not None and attributes.definition is not None and attributes.is_core("pods"):
            self.admit_new(attributes.definition, attributes.object)

    def __init__(self, registry: Registry, cacher: Cacher) -> None:
        self.registry = registry
        self.cacher = cacher

    def _ranges(self, namespace: str) -> list[Object]:
        d = self.registry.get("", "v1", "limitranges")
        if d is None or not namespace:
            return []
        # the namespace's own (a create pays nothing for other namespaces' objects)
        objs = (orjson.loads(c.data) for c in self.cacher.cache_for(d).candidates(namespace))
        return [r for r in objs if (r.get("metadata") or {}).get("namespace") == namespace]

    def admit_new(self, definition: ResourceDefinition, obj: Object) -> None:
        if definition.group != "" or definition.kind != "Pod":
            return
        ranges = self._ranges((obj.get("metadata") or {}).get("namespace") or "")
        if not ranges:
            return
        spec = obj.setdefault("spec", {})
        containers = [c for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()) if isinstance(c, dict)]
        items = [i for r in ranges for i in (r.get("spec") or {}).get("limits") or () if isinstance(i, dict)]
        for item in items:
            if item.get("type") != "Container":
                continue
            for c in containers:
                res = c.setdefault("resources", {})
                for part, source in (("limits", "default"), ("requests", "defaultRequest")):
                    for name, value in (item.get(source) or {}).items():
                        if name not in (res.get(part) or {}):
                            res.setdefault(part, {})[name] = value
        errs: list[str] = []
        for item in items:
            if item.get("type") == "Container":
                for c in containers:
                    res = c.get("resources") or {}
                    errs += _bounds(item, "Container", {k: _q(v) for k, v in (res.get("requests") or {}).items()},
                                    {k: _q(v) for k, v in (res.get("limits") or {}).items()})
            elif item.get("type") == "Pod":
                req: dict[str, Fraction] = {}
                lim: dict[str, Fraction] = {}
                for c in spec.get("containers") or ():
                    res = c.get("resources") or {}
                    for k, v in (res.get("requests") or {}).items():
                        req[k] = req.get(k, Fraction(0)) + _q(v)
                    for k, v in (res.get("limits") or {}).items():
                        lim[k] = lim.get(k, Fraction(0)) + _q(v)
                errs += _bounds(item, "Pod", req, lim)
        if errs:
            name = (obj.get("metadata") or {}).get("name") or ""
            text = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
            raise Forbidden(f'pods "{name}" is forbidden: {text}', name=name, kind="pods")
