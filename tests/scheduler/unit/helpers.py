"""Builders for unit tests: NodeInfo and PodInfo views without any server."""

from __future__ import annotations

from typing import Any

from k8py.scheduler.framework.types import NodeInfo, PodInfo
from tests.scheduler.conftest import node as node_obj
from tests.scheduler.conftest import pod as pod_obj


def node_info(name: str = "n", *pods: PodInfo, **kw: Any) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node(node_obj(name, **kw))
    for p in pods:
        info.add_pod(p.with_node(name) if not p.node_name else p)
    return info


def pod_info(name: str = "p", **kw: Any) -> PodInfo:
    obj = pod_obj(name, **kw)
    obj["metadata"]["uid"] = f"uid-{name}"
    return PodInfo(obj)
