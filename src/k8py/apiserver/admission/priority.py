"""Priority admission: a new pod's ``spec.priority`` (and ``preemptionPolicy``)
comes from its ``spec.priorityClassName`` (upstream ``plugin/pkg/admission/priority``).

- no class named: the ``globalDefault`` class (the lowest value if several),
  else priority 0;
- a class that does not exist: 403 Forbidden ``no PriorityClass with name X
  was found``;
- a pod that states a priority other than its class's: 403 Forbidden;
- a second PriorityClass with ``globalDefault: true``: 403 Forbidden.

On update a pod keeps the priority it was given; an update that sets
``globalDefault`` on a second class is refused too. Classes are read from the watch cache, so admission costs no store read.
"""

from __future__ import annotations

from typing import Any

import orjson

from k8py.api.errors import Forbidden
from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["PriorityAdmission"]

Object = dict[str, Any]


class PriorityAdmission:
    """The ``Priority`` plugin (mutating): pods on create and update, PriorityClasses on create and update."""

    name = "Priority"

    def handles(self, operation: Operation) -> bool:
        return operation in (Operation.CREATE, Operation.UPDATE)

    def concerns(self, group: str, resource: str, subresource: str) -> bool:
        """Objects themselves, not their subresources (``admit`` passes those)."""
        return not subresource

    async def admit(self, attributes: AdmissionAttributes) -> None:
        obj = attributes.object
        if obj is None or attributes.subresource or attributes.definition is None:
            return
        if attributes.operation is Operation.UPDATE:
            if attributes.is_core("pods") and attributes.old_object is not None:
                # the priority was set on create; an update that leaves it out keeps it (validation
                # refuses changing it), as upstream
                spec, old_spec = obj.setdefault("spec", {}), attributes.old_object.get("spec") or {}
                for field in ("priority", "preemptionPolicy"):
                    if spec.get(field) is None and old_spec.get(field) is not None:
                        spec[field] = old_spec[field]
            elif attributes.resource.group == "scheduling.k8s.io" and attributes.resource.resource == "priorityclasses":
                self._admit_class(obj)
            return
        self.admit_new(attributes.definition, obj)

    def __init__(self, registry: Registry, cacher: Cacher) -> None:
        self.registry = registry
        self.cacher = cacher
        #: key -> (resourceVersion, decoded class)
        self._decoded: dict[str, tuple[int, Object]] = {}

    def _classes(self) -> list[Object]:
        d = self.registry.get("scheduling.k8s.io", "v1", "priorityclasses")
        if d is None:
            return []
        out = []
        memo = self._decoded
        for key, cached in self.cacher.cache_for(d).objects.items():
            hit = memo.get(key)
            if hit is None or hit[0] != cached.rv:  # decoded once per version: every pod create asks
                hit = memo[key] = (cached.rv, orjson.loads(cached.data))
            out.append(hit[1])
        if len(memo) > len(out):
            live = self.cacher.cache_for(d).objects
            for key in [k for k in memo if k not in live]:
                del memo[key]
        return out

    def _class(self, name: str) -> Object | None:
        d = self.registry.get("scheduling.k8s.io", "v1", "priorityclasses")
        if d is None:
            return None
        cached = self.cacher.cache_for(d).objects.get(d.key("", name))
        return orjson.loads(cached.data) if cached is not None else None

    def admit_new(self, definition: ResourceDefinition, obj: Object) -> None:
        if definition.group == "" and definition.kind == "Pod":
            self._admit_pod(obj)
        elif definition.group == "scheduling.k8s.io" and definition.kind == "PriorityClass":
            self._admit_class(obj)

    def _admit_pod(self, pod: Object) -> None:
        spec = pod.setdefault("spec", {})
        name = (pod.get("metadata") or {}).get("name") or ""
        class_name = spec.get("priorityClassName") or ""
        if class_name:
            pc = self._class(class_name)
            if pc is None:
                raise Forbidden(f'pods "{name}" is forbidden: no PriorityClass with name {class_name} was found',
                                name=name, kind="pods")
            value, policy = int(pc.get("value") or 0), pc.get("preemptionPolicy") or "PreemptLowerPriority"
        else:
            defaults = [c for c in self._classes() if c.get("globalDefault")]
            if defaults:
                pc = min(defaults, key=lambda c: int(c.get("value") or 0))
                value, policy = int(pc.get("value") or 0), pc.get("preemptionPolicy") or "PreemptLowerPriority"
                spec["priorityClassName"] = pc["metadata"]["name"]
            else:
                value, policy = 0, "PreemptLowerPriority"
        if spec.get("priority") is not None and spec["priority"] != value:
            raise Forbidden(f'pods "{name}" is forbidden: the integer value of priority ({spec["priority"]}) must not be '
                            f"provided in pod spec; priority admission controller computed {value} from the given PriorityClass name",
                            name=name, kind="pods")
        if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy:
            raise Forbidden(f'pods "{name}" is forbidden: the string value of PreemptionPolicy ({spec["preemptionPolicy"]}) must not be '
                            f"provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name",
                            name=name, kind="pods")
        spec["priority"] = value
        spec["preemptionPolicy"] = policy

    def _admit_class(self, pc: Object) -> None:
        if not pc.get("globalDefault"):
            return
        name = (pc.get("metadata") or {}).get("name") or ""
        for other in self._classes():
            if other.get("globalDefault") and other["metadata"]["name"] != name:
                raise Forbidden(f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: PriorityClass '
                                f'{other["metadata"]["name"]} is already marked as default. Only one default can exist',
                                name=name, group="scheduling.k8s.io", kind="priorityclasses")
