"""apps/v1: deployments, replicasets, daemonsets, statefulsets, controllerrevisions."""

from __future__ import annotations

from k8py.apiserver.registry import ResourceDefinition, ScaleSpec
from k8py.apiserver.resources.strategies import DeploymentStrategy, StandardStrategy, path_getter


def _apps(kind: str, plural: str, short: str, *, scalable: bool, strategy: type[StandardStrategy] = StandardStrategy,
          **kw: object) -> ResourceDefinition:
    return ResourceDefinition(
        group="apps",
        version="v1",
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=True,
        short_names=(short,),
        categories=("all",),
        subresources=frozenset({"status", "scale"} if scalable else {"status"}),
        strategy=strategy("apps", "v1", kind, has_status=True, tracks_generation=True),
        scale=ScaleSpec() if scalable else None,
        openapi_name=f"io.k8s.api.apps.v1.{kind}",
        **kw,  # type: ignore[arg-type]
    )


DEFINITIONS = [
    _apps("Deployment", "deployments", "deploy", scalable=True, strategy=DeploymentStrategy),
    _apps(
        "ReplicaSet",
        "replicasets",
        "rs",
        scalable=True,
        field_getters={"status.replicas": path_getter("status", "replicas")},
    ),
    _apps("DaemonSet", "daemonsets", "ds", scalable=False),
    _apps("StatefulSet", "statefulsets", "sts", scalable=True),
    # the template history of StatefulSets and DaemonSets (``kubectl rollout
    # history|undo`` read it); written only by those controllers
    ResourceDefinition(
        group="apps",
        version="v1",
        kind="ControllerRevision",
        plural="controllerrevisions",
        singular="controllerrevision",
        namespaced=True,
        strategy=StandardStrategy("apps", "v1", "ControllerRevision"),
        openapi_name="io.k8s.api.apps.v1.ControllerRevision",
    ),
]
