"""Cell formatting shared by several kinds, byte-for-byte as upstream prints it.

Each function names the upstream helper it mirrors, because users compare our
``kubectl get`` output with a real cluster's:

- :func:`format_labels` — ``labels.FormatLabels`` (``a=b,c=d``, ``<none>``);
- :func:`selector_string` — ``LabelSelectorAsSelector(...).String()``;
- :func:`format_label_selector` — ``metav1.FormatLabelSelector`` (``<none>``
  when empty);
- :func:`container_cells` — ``layoutContainerCells``;
- :func:`bool_ptr` — ``printBoolPtr`` (``True``/``False``/``<unset>``);
- :func:`list_with_more` — ``listWithMoreString`` (``a,b,c + 2 more...``).

All take plain JSON-shaped dicts and never raise on missing fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from k8py.api.errors import BadRequest
from k8py.api.selectors import label_selector_from_dict

from .durations import since

__all__ = [
    "format_labels",
    "selector_string",
    "format_label_selector",
    "container_cells",
    "bool_ptr",
    "list_with_more",
    "join_host_port",
    "dig",
]


def dig(obj: Any, *path: str, default: Any = None) -> Any:
    """``obj[p0][p1]...`` or ``default`` if any step is missing or not a dict."""
    cur = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return default
        cur = cur.get(key)
        if cur is None:
            return default
    return cur


def format_labels(labels: Mapping[str, str] | None) -> str:
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def selector_string(selector: Mapping[str, Any] | None) -> str:
    """A ``LabelSelector`` as ``labels.Selector.String()``; empty or nil gives ``""``."""
    if not selector:
        return ""
    try:
        return label_selector_from_dict(selector).to_string()
    except BadRequest:
        return "<invalid>"  # a stored object is printed, never rejected


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    return selector_string(selector) or "<none>"


def container_cells(containers: list[Mapping[str, Any]] | None) -> tuple[str, str]:
    """``(names, images)``, each comma-joined in spec order."""
    containers = containers or []
    names = ",".join(str(c.get("name", "")) for c in containers)
    images = ",".join(str(c.get("image", "")) for c in containers)
    return names, images


def bool_ptr(value: Any) -> str:
    if value is None:
        return "<unset>"
    return "True" if value else "False"


def list_with_more(
    items: list[str], count: int, maximum: int = 3, *, empty: str = "<unset>"
) -> str:
    """The first ``maximum`` of ``count`` items, then `` + N more...``."""
    text = ",".join(items[:maximum])
    if count > maximum:
        return f"{text} + {count - maximum} more..."
    return text or empty


def join_host_port(host: str, port: int | str) -> str:
    """``net.JoinHostPort``: IPv6 literals get brackets."""
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def object_age(obj: Mapping[str, Any], now: datetime) -> str:
    """The AGE cell: time since ``metadata.creationTimestamp``."""
    return since(dig(obj, "metadata", "creationTimestamp"), now)
