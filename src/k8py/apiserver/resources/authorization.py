"""authorization.k8s.io/v1: the access reviews (create only, never stored).

SubjectAccessReview and SelfSubjectAccessReview ask "may this user do this?",
LocalSubjectAccessReview the same within its namespace, and
SelfSubjectRulesReview "what may I do in this namespace?" (``kubectl auth
can-i [--list]``). A POST is answered by
:mod:`k8py.apiserver.handlers.access_review` (the server registers the create
handlers).
"""

from __future__ import annotations

from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import StandardStrategy

__all__ = ["DEFINITIONS", "GROUP"]

GROUP = "authorization.k8s.io"


def _review(kind: str, plural: str, *, namespaced: bool = False) -> ResourceDefinition:
    return ResourceDefinition(
        group=GROUP, version="v1", kind=kind, plural=plural, singular=kind.lower(), namespaced=namespaced,
        verbs=("create",), strategy=StandardStrategy(GROUP, "v1", kind), openapi_name=f"io.k8s.api.authorization.v1.{kind}",
    )


DEFINITIONS = [
    _review("LocalSubjectAccessReview", "localsubjectaccessreviews", namespaced=True),
    _review("SelfSubjectAccessReview", "selfsubjectaccessreviews"),
    _review("SelfSubjectRulesReview", "selfsubjectrulesreviews"),
    _review("SubjectAccessReview", "subjectaccessreviews"),
]
