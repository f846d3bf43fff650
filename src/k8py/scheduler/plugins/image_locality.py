"""ImageLocality (Score): prefer nodes that already have the pod's images,
weighted by image size and by how widely the image is spread (so one node
with the image does not attract every pod), as upstream: the summed scaled
sizes are clamped to [23 MB, 1000 MB × containers] and mapped to [0, 100]."""

from __future__ import annotations

from typing import Any, Callable

from k8py.scheduler.framework.interfaces import MAX_NODE_SCORE, CycleState
from k8py.scheduler.framework.status import Code, Status
from k8py.scheduler.framework.types import NodeInfo, PodInfo
from k8py.scheduler.plugins.names import IMAGE_LOCALITY

__all__ = ["ImageLocality", "image_score", "normalized_image_name", "MIN_THRESHOLD", "MAX_CONTAINER_THRESHOLD"]

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        return name + ":latest"
    return name


def image_score(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality:
    name = IMAGE_LOCALITY

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        self.handle = handle

    def _images(self, pod: PodInfo) -> list[str]:
        spec = pod.spec
        return [normalized_image_name(c.get("image") or "") for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ()))]

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        spread: Callable[[str], int] | None = getattr(self.handle, "image_node_count", None)
        if spread is None or not any(spread(i) for i in self._images(pod)):
            return Status(Code.SKIP)  # no node has any of the images: every score would be 0
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        images = self._images(pod)
        total_nodes = max(len(self.handle.nodes), 1)
        total = 0
        for image in images:
            size = node.images.get(image)
            if size:
                total += size * self.handle.image_node_count(image) // total_nodes
        return image_score(total, len(images))
