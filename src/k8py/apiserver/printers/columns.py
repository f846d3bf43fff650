"""Column definitions and the printer contract each API-group module fills in.

A :class:`Printer` is what upstream registers with ``TableHandler``: the
column definitions of one kind plus a pure function from one object to its
cells. Cells are produced for **every** column, including ``priority: 1``
ones; the API server always generates wide tables (upstream passes
``Wide: true``) and ``kubectl -o wide`` decides what to show.

Invariants:

- ``len(cells(obj, now)) == len(columns)`` for every printer;
- cells are JSON scalars (str, int, bool) typed as the column says;
- descriptions come from the upstream OpenAPI definitions
  (:mod:`k8py.api.schema`), the same text upstream takes from ``SwaggerDoc()``,
  and are resolved lazily so importing a printer costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from k8py.api import schema

__all__ = [
    "Object",
    "Cells",
    "Column",
    "Printer",
    "META",
    "name_column",
    "age_column",
    "containers_column",
    "images_column",
]

Object = dict[str, Any]
Cells = list[Any]

#: OpenAPI definition of ObjectMeta, the source of the Name and Age descriptions.
META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@dataclass(frozen=True, slots=True)
class Column:
    """One ``TableColumnDefinition``.

    ``doc`` is either the literal description or a ``(definition, field)``
    pair naming the upstream field whose description upstream shows.
    """

    name: str
    type: str = "string"
    doc: str | tuple[str, str] = ""
    priority: int = 0
    format: str = ""

    def description(self) -> str:
        if isinstance(self.doc, str):
            return self.doc
        definition_name, field = self.doc
        definition = schema.definition(definition_name) or {}
        prop = (definition.get("properties") or {}).get(field) or {}
        return str(prop.get("description", ""))

    def to_dict(self) -> dict[str, Any]:
        # All five fields are always present on the wire (no omitempty upstream).
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description(),
            "priority": self.priority,
        }


@dataclass(frozen=True, slots=True)
class Printer:
    """The columns of a kind and how to fill them.

    ``cells(obj, now)`` returns one value per column; ``conditions(obj)``
    returns the row's ``TableRowCondition`` list, or None (only pods have
    them upstream: ``Completed`` for Succeeded/Failed pods).
    """

    columns: tuple[Column, ...]
    cells: Callable[[Object, datetime], Cells]
    conditions: Callable[[Object], list[dict[str, str]] | None] | None = None


def name_column() -> Column:
    return Column("Name", format="name", doc=(META, "name"))


def age_column() -> Column:
    return Column("Age", doc=(META, "creationTimestamp"))


def containers_column() -> Column:
    return Column("Containers", priority=1, doc="Names of each container in the template.")


def images_column() -> Column:
    return Column("Images", priority=1, doc="Images referenced by each container in the template.")
