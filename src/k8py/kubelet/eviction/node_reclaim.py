"""Node-level reclaim: what the kubelet frees itself before it evicts a pod for disk.

Upstream, under DiskPressure from ``nodefs`` or ``imagefs``, the eviction manager first runs
the node's reclaim functions — delete every unused container, then every unused image — and
evicts only if the threshold is still met after that. Both go through the runtime's own
services (``ListContainers``/``RemoveContainer``, ``ListImages``/``RemoveImage``), so any
runtime behind the protocols is served:

- :func:`delete_dead_containers` (upstream's ``DeleteAllUnusedContainers``): every exited
  container of a pod whose runtime should be removed (the kubelet no longer runs it: it is
  terminated, or unknown), and of the others every exited attempt but the newest of each
  container name (the one ``lastState`` and the restart back-off read, upstream's
  ``MaxPerPodContainer`` of 1). Their log files go with them, as upstream's log manager
  cleans them;
- :func:`delete_unused_images`: every image that no container left on the node uses — by id,
  tag or digest;
- :func:`reclaim_disk`: the two in that order; returns how many things were removed.
"""

from __future__ import annotations

import glob
import logging
import os
import stat
from typing import Callable

from k8py.kubelet.runtime.protocols import ContainerState, ContainerStatus, ImageSpec, NotFoundError, Runtime, RuntimeErrorStatus

__all__ = ["delete_dead_containers", "delete_unused_images", "reclaim_disk"]

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


def _remove_logs(path: str) -> None:
    """The container's log file and its rotated ones (``<path>.<suffix>``), regular files only:
    a runtime may name a device as the log of a container that has none (the simulated
    runtime's is ``/dev/null``), and that must never be unlinked."""
    if not path:
        return
    for f in [path, *glob.glob(glob.escape(path) + ".*")]:
        try:
            if stat.S_ISREG(os.lstat(f).st_mode):
                os.unlink(f)
        except OSError:
            pass


async def delete_dead_containers(runtime: Runtime, *, active: Callable[[], set[str]]) -> int:
    """Remove the exited containers the kubelet no longer needs (see the module docstring);
    ``active()``: the uids of the pods the kubelet still runs. Returns how many were removed."""
    owner = {sb.id: sb.uid for sb in await runtime.list_pod_sandboxes()}
    live = active()
    newest: dict[tuple[str, str], ContainerStatus] = {}
    doomed: list[ContainerStatus] = []
    for c in sorted(await runtime.list_containers(), key=lambda c: (c.attempt, c.created_at)):
        if c.state is not ContainerState.EXITED:
            continue
        uid = owner.get(c.sandbox_id, "")
        if uid not in live:
            doomed.append(c)
            continue
        older = newest.get((uid, c.name))
        if older is not None:
            doomed.append(older)
        newest[(uid, c.name)] = c
    removed = 0
    for c in doomed:
        try:
            await runtime.remove_container(c.id)
        except (NotFoundError, RuntimeErrorStatus) as err:
            logger.info("dead container not removed", extra={"container": c.id, "error": str(err)})
            continue
        _remove_logs(c.log_path)
        removed += 1
        logger.info("removed a dead container to reclaim disk", extra={"container": c.id, "name": c.name})
    return removed


async def reclaim_disk(runtime: Runtime, *, active: Callable[[], set[str]]) -> int:
    """Upstream's node reclaim for disk: dead containers, then the images they no longer hold."""
    return await delete_dead_containers(runtime, active=active) + await delete_unused_images(runtime)
