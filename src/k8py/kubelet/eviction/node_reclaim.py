"""Node-level reclaim: what the kubelet frees itself before it evicts a pod for disk.

Upstream, under DiskPressure from ``nodefs`` or ``imagefs``, the eviction manager first deletes
unused images (and dead containers) and evicts only if the threshold is still met after that.
Here :func:`delete_unused_images` does the image half through the runtime's own image service
(``ListImages``/``RemoveImage``, so any runtime behind the protocols is served): every image
that no container on the node uses — by id, tag or digest — is removed. Dead containers are
left alone: the kubelet still reads the newest one of each container for ``lastState`` and the
restart back-off (a documented gap).
"""

from __future__ import annotations

import logging

from k8py.kubelet.runtime.protocols import ImageSpec, NotFoundError, Runtime, RuntimeErrorStatus

__all__ = ["delete_unused_images"]

logger = logging.getLogger(__name__)


async def delete_unused_images(runtime: Runtime) -> int:
    """Remove the images no container uses; returns how many were removed."""
    in_use: set[str] = set()
    for c in await runtime.list_containers():
        in_use.update(x for x in (c.image, c.image_ref) if x)
    before = await runtime.list_images()
    for image in before:
        names = {image.id, *image.repo_tags, *image.repo_digests}
        if names & in_use:
            continue
        ref = image.repo_tags[0] if image.repo_tags else image.id
        try:
            await runtime.remove_image(ImageSpec(ref))
        except (NotFoundError, RuntimeErrorStatus) as err:
            logger.info("unused image not removed", extra={"image": ref, "error": str(err)})
    # counted from what is left: a runtime may keep an image it holds no disk for (the process runtime's catalog)
    left = {i.id for i in await runtime.list_images()}
    gone = [i for i in before if i.id not in left]
    for image in gone:
        logger.info("removed an unused image to reclaim disk", extra={"image": image.repo_tags[:1] or image.id})
    return len(gone)
