"""TaintNodesByCondition admission: a new Node starts tainted not-ready
(upstream ``plugin/pkg/admission/nodetaint``).

On Node create (mutating), ``node.kubernetes.io/not-ready:NoSchedule`` is
added unless a taint with that key and effect is already there, so no pod is
scheduled to a node before the node lifecycle controller has seen it Ready;
that controller (``k8py.controllers.node_lifecycle``, in the controller
manager) removes the taint as soon as the node reports Ready, on the node's
add event. Without a controller manager nothing would lift it, which is why
k8py leaves this plugin out of a bare API server's defaults and ``k8py up``
turns it on (``plugins.DEFAULT_ON``).
"""

from __future__ import annotations

from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation

__all__ = ["TaintNodesByCondition", "NOT_READY_TAINT"]

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


class TaintNodesByCondition:
    name = "TaintNodesByCondition"

    def handles(self, operation: Operation) -> bool:
        return operation is Operation.CREATE

    async def admit(self, a: AdmissionAttributes) -> None:
        node = a.object
        if node is None or not a.is_core("nodes"):
            return
        spec = node.setdefault("spec", {})
        taints = spec.get("taints") if isinstance(spec.get("taints"), list) else []
        if any(isinstance(t, dict) and t.get("key") == NOT_READY_TAINT["key"] and t.get("effect") == NOT_READY_TAINT["effect"]
               for t in taints):
            return
        spec["taints"] = [*taints, dict(NOT_READY_TAINT)]
