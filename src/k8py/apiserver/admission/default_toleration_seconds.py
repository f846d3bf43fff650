"""DefaultTolerationSeconds admission: every new pod tolerates a lost node for
a while (upstream ``plugin/pkg/admission/defaulttolerationseconds``).

On pod create, unless the pod already tolerates it, a toleration is appended
for each of

- ``node.kubernetes.io/not-ready:NoExecute`` and
- ``node.kubernetes.io/unreachable:NoExecute``

with ``operator: Exists`` and ``tolerationSeconds: 300`` (the
``--default-not-ready-toleration-seconds`` / ``--default-unreachable-toleration-seconds``
defaults). A toleration "already tolerates" the taint when its key is that key
or empty (any key) and its effect is ``NoExecute`` or empty (any effect), as
upstream decides. So a pod on a node that stops reporting is evicted by the
taint-eviction controller five minutes after the node is tainted, not at once.
"""

from __future__ import annotations

from typing import Any

from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.registry import ResourceDefinition

__all__ = ["DefaultTolerationSeconds", "NOT_READY", "UNREACHABLE"]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def _tolerates(tolerations: list[dict[str, Any]], key: str) -> bool:
    return any((t.get("key") or "") in (key, "") and (t.get("effect") or "") in ("NoExecute", "")
               for t in tolerations if isinstance(t, dict))


class DefaultTolerationSeconds:
    """The ``DefaultTolerationSeconds`` plugin (mutating, pod creates)."""

    name = "DefaultTolerationSeconds"

    def handles(self, operation: Operation) -> bool:
        return operation is Operation.CREATE

    def concerns(self, group: str, resource: str, subresource: str) -> bool:
        """Pods themselves only (what ``is_core("pods")`` lets through)."""
        return group == "" and resource == "pods" and not subresource

    async def admit(self, attributes: AdmissionAttributes) -> None:
        if attributes.object is not None and attributes.definition is not None and attributes.is_core("pods"):
            self.admit_new(attributes.definition, attributes.object)

    def __init__(self, *, not_ready_seconds: int = 300, unreachable_seconds: int = 300) -> None:
        self.seconds = {NOT_READY: not_ready_seconds, UNREACHABLE: unreachable_seconds}

    def admit_new(self, definition: ResourceDefinition, obj: dict[str, Any]) -> None:
        if definition.group != "" or definition.kind != "Pod":
            return
        spec = obj.setdefault("spec", {})
        tolerations = spec.get("tolerations")
        if not isinstance(tolerations, list):
            tolerations = []
        added = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
                 for key, seconds in self.seconds.items() if not _tolerates(tolerations, key)]
        if added:
            spec["tolerations"] = tolerations + added
