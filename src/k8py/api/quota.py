"""What an object costs against a ResourceQuota (upstream ``quota/v1/evaluator/core``).

Shared by the API server's ResourceQuota admission (which charges a new
object to every quota of its namespace before it is stored) and the
resource-quota controller (which recomputes ``status.used`` from the objects
that exist). Pure functions over JSON-shaped dicts; amounts are exact
:class:`~fractions.Fraction` values, printed back as quantities by
:func:`format_amount`.

Names charged:

- every object: ``count/<plural>`` (``count/<plural>.<group>`` outside core);
  the legacy names ``pods``, ``services``, ``configmaps``, ``secrets``,
  ``replicationcontrollers``, ``resourcequotas``, ``persistentvolumeclaims``
  too, and ``services.nodeports`` / ``services.loadbalancers``;
- a pod that is not terminal (Succeeded/Failed): ``requests.cpu`` (= ``cpu``),
  ``requests.memory`` (= ``memory``), ``limits.cpu``, ``limits.memory``, and
  ``requests.``/``limits.ephemeral-storage``, summed over containers, with
  init containers counted as upstream (the max of each init container against
  the sum of the others).

Scopes (``spec.scopes`` and ``scopeSelector``) restrict a quota to pods that
are ``Terminating`` (``activeDeadlineSeconds`` set) or ``NotTerminating``,
``BestEffort`` (no requests or limits anywhere) or ``NotBestEffort``, or whose
``PriorityClass`` matches the selector.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable, Mapping

from k8py.api.quantity import parse_quantity

__all__ = ["usage", "matches_scopes", "format_amount", "COMPUTE", "is_terminal"]

Object = Mapping[str, Any]
COMPUTE = ("cpu", "memory", "ephemeral-storage")
_LEGACY = {"pods", "services", "configmaps", "secrets", "replicationcontrollers", "resourcequotas", "persistentvolumeclaims"}


def is_terminal(pod: Object) -> bool:
    return ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed")


def _sum(containers: Iterable[Object], part: str) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for c in containers:
        for name, value in ((c.get("resources") or {}).get(part) or {}).items():
            out[name] = out.get(name, Fraction(0)) + parse_quantity(value)
    return out


def _pod_compute(pod: Object, part: str) -> dict[str, Fraction]:
    spec = pod.get("spec") or {}
    total = _sum(spec.get("containers") or (), part)
    for init in spec.get("initContainers") or ():
        for name, value in _sum([init], part).items():
            total[name] = max(total.get(name, Fraction(0)), value)
    return total


def usage(plural: str, group: str, obj: Object) -> dict[str, Fraction]:
    """What ``obj`` (of ``plural`` in ``group``) charges; a terminal pod charges only its count."""
    out: dict[str, Fraction] = {f"count/{plural}" + (f".{group}" if group else ""): Fraction(1)}
    if not group and plural in _LEGACY:
        out[plural] = Fraction(1)
    if not group and plural == "services":
        stype = (obj.get("spec") or {}).get("type")
        if stype in ("NodePort", "LoadBalancer"):
            out["services.nodeports"] = Fraction(len((obj.get("spec") or {}).get("ports") or ()))
        if stype == "LoadBalancer":
            out["services.loadbalancers"] = Fraction(1)
    if not group and plural == "pods":
        if is_terminal(obj):
            out.pop("pods", None)
            return out
        for part in ("requests", "limits"):
            for name, amount in _pod_compute(obj, part).items():
                out[f"{part}.{name}"] = amount
                if part == "requests" and name in COMPUTE[:2]:
                    out[name] = amount
    return out


def _best_effort(pod: Object) -> bool:
    spec = pod.get("spec") or {}
    for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        res = c.get("resources") or {}
        if any(k in COMPUTE[:2] for k in (res.get("requests") or {})) or any(k in COMPUTE[:2] for k in (res.get("limits") or {})):
            return False
    return True


def _scope_matches(scope: str, pod: Object, operator: str = "Exists", values: Iterable[str] = ()) -> bool:
    spec = pod.get("spec") or {}
    if scope == "Terminating":
        return spec.get("activeDeadlineSeconds") is not None
    if scope == "NotTerminating":
        return spec.get("activeDeadlineSeconds") is None
    if scope == "BestEffort":
        return _best_effort(pod)
    if scope == "NotBestEffort":
        return not _best_effort(pod)
    if scope == "PriorityClass":
        name = spec.get("priorityClassName")
        values = set(values)
        return {"In": name in values, "NotIn": name not in values, "Exists": bool(name),
                "DoesNotExist": not name}.get(operator, False)
    return False


def matches_scopes(quota: Object, plural: str, group: str, obj: Object) -> bool:
    """Whether ``quota``'s scopes select ``obj`` (scopes apply to pods only; any other kind
    is selected only by a quota without scopes)."""
    spec = quota.get("spec") or {}
    scopes = [(s, "Exists", ()) for s in spec.get("scopes") or ()]
    scopes += [(e.get("scopeName"), e.get("operator") or "Exists", e.get("values") or ())
               for e in ((spec.get("scopeSelector") or {}).get("matchExpressions") or ())]
    if not scopes:
        return True
    if group or plural != "pods":
        return False
    return all(_scope_matches(s, obj, op, vals) for s, op, vals in scopes)


def format_amount(name: str, amount: Fraction) -> str:
    """A quantity as upstream prints the common cases: ``500m``, ``2``, ``1Gi``."""
    if amount.denominator != 1:
        return f"{int(amount * 1000)}m"
    n = int(amount)
    if not name.endswith(("cpu",)) and n >= 1024:
        for suffix, power in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
            if n % (1 << power) == 0:
                return f"{n >> power}{suffix}"
    return str(n)
