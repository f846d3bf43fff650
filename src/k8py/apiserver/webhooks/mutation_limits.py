"""The limits upstream puts on a MutatingAdmissionPolicy's mutations.

- **What an ApplyConfiguration may touch**: nothing atomic. An atomic list
  (``x-kubernetes-list-type: atomic``, or a list with no merge strategy),
  atomic map or atomic struct (``x-kubernetes-map-type: atomic``, a
  LabelSelector say) is replaced whole by a merge, so a configuration that
  meant to set one field in it would silently drop the others; upstream
  refuses it: ``invalid ApplyConfiguration: may not mutate atomic arrays,
  maps or structs: .spec.selector`` (every such path, comma-separated, in the
  order met). :func:`atomic_paths` finds them, walking the configuration
  along the resource's schema; with no schema there is nothing to check.
- **What the expressions may cost**: each evaluation of a (policy, binding,
  param) has upstream's runtime budget (``RuntimeCELCostBudget``, 10,000,000
  cel-go units) for its mutations together, and each expression its per-call
  limit (1,000,000). :class:`CostBudget` carries what is left from one
  mutation to the next; an evaluation that would pass it fails with cel-go's
  ``operation cancelled: actual cost limit exceeded``.
"""

from __future__ import annotations

from typing import Any

from k8py.api.patch import schema_walk as sw
from k8py.apiserver.cel import PER_CALL_LIMIT, RUNTIME_BUDGET

__all__ = ["atomic_paths", "CostBudget", "ATOMIC_MESSAGE"]

ATOMIC_MESSAGE = "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: "


def _key(item: Any, keys: tuple[str, ...] | list[str]) -> str:
    if not isinstance(item, dict):
        return "[=" + repr(item) + "]"
    parts = []
    for k in keys:
        value = item.get(k)
        parts.append(f'{k}="{value}"' if isinstance(value, str) else f"{k}={value}")
    return "[" + ",".join(parts) + "]"


def atomic_paths(value: Any, schema: sw.Schema | None, path: str = "") -> list[str]:
    """The paths (``.spec.selector``) where ``value`` sets an atomic list, map or struct."""
    if schema is None:
        return []
    shape = sw.shape_of(schema)
    if isinstance(value, dict):
        if shape.kind in ("map", "struct") and shape.atomic:
            return [path or "."]
        out: list[str] = []
        for key, child in value.items():
            out += atomic_paths(child, sw.field_schema(schema, key), f"{path}.{key}")
        return out
    if isinstance(value, list):
        if shape.kind != "list" or shape.atomic:
            return [path or "."]
        items = sw.items_schema(schema)
        out = []
        for index, item in enumerate(value):
            element = _key(item, shape.keys) if shape.list_type == "map" else f"[{index}]"
            out += atomic_paths(item, items, f"{path}{element}")
        return out
    return []


class CostBudget:
    """What one evaluation of a policy may still spend."""

    def __init__(self, budget: int = RUNTIME_BUDGET) -> None:
        self.remaining = budget

    @property
    def limit(self) -> int:
        """The cost limit of the next expression: its per-call limit, or what is left if less."""
        return max(0, min(PER_CALL_LIMIT, self.remaining))

    def spend(self, cost: int) -> None:
        self.remaining -= cost
