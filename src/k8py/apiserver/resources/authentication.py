"""authentication.k8s.io/v1: TokenReview and SelfSubjectReview (create only, never stored).

A POST is answered by :mod:`k8py.apiserver.handlers.token_review` or
:mod:`k8py.apiserver.authn.self_subject_review` (the server registers them as
the resources' create handlers); ``serviceaccounts/token`` (TokenRequest) is a
subresource of core/v1 ServiceAccounts.
"""

from __future__ import annotations

from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

GROUP = "authentication.k8s.io"

DEFINITIONS = [
    ResourceDefinition(
        group=GROUP,
        version="v1",
        kind="TokenReview",
        plural="tokenreviews",
        singular="tokenreview",
        namespaced=False,
        verbs=("create",),
        strategy=StandardStrategy(GROUP, "v1", "TokenReview"),
        openapi_name="io.k8s.api.authentication.v1.TokenReview",
    ),
    ResourceDefinition(
        group=GROUP,
        version="v1",
        kind="SelfSubjectReview",
        plural="selfsubjectreviews",
        singular="selfsubjectreview",
        namespaced=False,
        verbs=("create",),
        strategy=StandardStrategy(GROUP, "v1", "SelfSubjectReview"),
        openapi_name="io.k8s.api.authentication.v1.SelfSubjectReview",
    ),
]
