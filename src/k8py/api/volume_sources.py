"""The source fields of a core/v1 ``Volume`` (upstream ``VolumeSource``), in upstream's field order.

A Volume names exactly one of these. The API server's defaulting (a Volume
with none becomes an ``emptyDir``) and its validation (exactly one, says which
when there are several) both read this list, so the two cannot disagree.

Invariant: the names are the JSON field names, as they appear in the object.
"""

from __future__ import annotations

__all__ = ["VOLUME_SOURCES"]

VOLUME_SOURCES: tuple[str, ...] = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret",
    "nfs", "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder",
    "cephfs", "flocker", "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume",
    "quobyte", "azureDisk", "photonPersistentDisk", "projected", "portworxVolume", "scaleIO",
    "storageos", "csi", "ephemeral", "image",
)
