"""authentication.k8s.io/v1: SelfSubjectReview (create-only, never stored).

Listed here so discovery and ``kubectl api-resources`` show it; requests are
answered by :mod:`k8py.apiserver.authn.self_subject_review` (the app routes
them there before the generic handlers). Its own storage prefix keeps its
always-empty watch cache apart from everything else.
"""

from __future__ import annotations

from k8py.apiserver.registry import ResourceDefinition

GROUP = "authentication.k8s.io"

DEFINITIONS = [
    ResourceDefinition(
        group=GROUP,
        version="v1",
        kind="SelfSubjectReview",
        plural="selfsubjectreviews",
        singular="selfsubjectreview",
        namespaced=False,
        verbs=("create",),
        storage_resource=f"{GROUP}/selfsubjectreviews",
    ),
]
