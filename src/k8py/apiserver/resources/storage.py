"""storage.k8s.io/v1: StorageClasses, CSIDrivers, CSINodes, CSIStorageCapacities, VolumeAttachments.

k8py provisions no volumes itself, but these kinds are part of every conformant
server's discovery: clients resolve them by kind or short name (kr8s's
``lookup_kind("CSIStorageCapacity")``, ``kubectl get sc``) and CSI drivers and
provisioners read and write them. Names, short names, scope and subresources
follow upstream's v1.32 discovery document.

Validation as upstream where it guards an invariant a consumer relies on: a
StorageClass must name its provisioner, and its provisioner, parameters and
reclaimPolicy never change after creation; a CSIStorageCapacity names its
StorageClass and that name is immutable; a VolumeAttachment's spec is immutable.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import Cause
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS"]

GROUP = "storage.k8s.io"
Object = dict[str, Any]


def _immutable(obj: Object, old: Object, *fields: str) -> list[Cause]:
    return [Cause("FieldValueInvalid", "Forbidden: updates to this field are forbidden", name)
            for name in fields if obj.get(name) != old.get(name)]


class StorageClassStrategy(StandardStrategy):
    def default(self, obj: Object) -> None:
        super().default(obj)
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")

    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        if not obj.get("provisioner"):
            causes.append(Cause("FieldValueRequired", "Required value", "provisioner"))
        if obj.get("reclaimPolicy") not in ("Delete", "Retain"):
            causes.append(Cause("FieldValueNotSupported",
                                f'Unsupported value: "{obj.get("reclaimPolicy")}": supported values: "Delete", "Retain"',
                                "reclaimPolicy"))
        if obj.get("volumeBindingMode") not in ("Immediate", "WaitForFirstConsumer"):
            causes.append(Cause("FieldValueNotSupported",
                                f'Unsupported value: "{obj.get("volumeBindingMode")}": supported values: '
                                '"Immediate", "WaitForFirstConsumer"', "volumeBindingMode"))
        return causes

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return [*super().validate_update(obj, old),
                *_immutable(obj, old, "provisioner", "parameters", "reclaimPolicy", "volumeBindingMode")]


class CSIStorageCapacityStrategy(StandardStrategy):
    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        if not obj.get("storageClassName"):
            causes.append(Cause("FieldValueRequired", "Required value", "storageClassName"))
        return causes

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return [*super().validate_update(obj, old), *_immutable(obj, old, "storageClassName")]


class VolumeAttachmentStrategy(StandardStrategy):
    def validate(self, obj: Object) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        for name in ("attacher", "nodeName"):
            if not spec.get(name):
                causes.append(Cause("FieldValueRequired", "Required value", f"spec.{name}"))
        return causes

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        causes = super().validate_update(obj, old)
        if obj.get("spec") != old.get("spec"):
            causes.append(Cause("FieldValueInvalid", "field is immutable", "spec"))
        return causes


DEFINITIONS = [
    ResourceDefinition(
        group=GROUP, version="v1", kind="StorageClass", plural="storageclasses", singular="storageclass",
        namespaced=False, short_names=("sc",),
        strategy=StorageClassStrategy(GROUP, "v1", "StorageClass"),
        openapi_name="io.k8s.api.storage.v1.StorageClass",
    ),
    ResourceDefinition(
        group=GROUP, version="v1", kind="CSIDriver", plural="csidrivers", singular="csidriver",
        namespaced=False,
        strategy=StandardStrategy(GROUP, "v1", "CSIDriver"),
        openapi_name="io.k8s.api.storage.v1.CSIDriver",
    ),
    ResourceDefinition(
        group=GROUP, version="v1", kind="CSINode", plural="csinodes", singular="csinode",
        namespaced=False,
        strategy=StandardStrategy(GROUP, "v1", "CSINode"),
        openapi_name="io.k8s.api.storage.v1.CSINode",
    ),
    ResourceDefinition(
        group=GROUP, version="v1", kind="CSIStorageCapacity", plural="csistoragecapacities",
        singular="csistoragecapacity", namespaced=True,
        strategy=CSIStorageCapacityStrategy(GROUP, "v1", "CSIStorageCapacity"),
        openapi_name="io.k8s.api.storage.v1.CSIStorageCapacity",
    ),
    ResourceDefinition(
        group=GROUP, version="v1", kind="VolumeAttachment", plural="volumeattachments", singular="volumeattachment",
        namespaced=False, subresources=frozenset({"status"}),
        strategy=VolumeAttachmentStrategy(GROUP, "v1", "VolumeAttachment", has_status=True),
        openapi_name="io.k8s.api.storage.v1.VolumeAttachment",
    ),
]
