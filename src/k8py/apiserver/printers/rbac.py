"""Printers for ``rbac.authorization.k8s.io``: bindings print
``NAME  ROLE  AGE`` (wide: ``USERS  GROUPS  SERVICEACCOUNTS``), as upstream's
printRoleBinding/printClusterRoleBinding; Roles and ClusterRoles print
``NAME  CREATED AT`` as upstream's printRole does."""

from __future__ import annotations

from datetime import datetime

from .cells import dig, object_age
from .columns import META, Column, Printer, Object, name_column
from .durations import rfc3339

__all__ = ["PRINTERS"]


def _subjects(obj: Object) -> tuple[str, str, str]:
    users: list[str] = []
    groups: list[str] = []
    sas: list[str] = []
    for s in obj.get("subjects") or []:
        kind = s.get("kind")
        if kind == "User":
            users.append(s.get("name", ""))
        elif kind == "Group":
            groups.append(s.get("name", ""))
        elif kind == "ServiceAccount":
            sas.append(f"{s.get('namespace', '')}/{s.get('name', '')}")
    return ", ".join(users), ", ".join(groups), ", ".join(sas)


def _binding_cells(obj: Object, now: datetime) -> list[object]:
    ref = obj.get("roleRef") or {}
    return [dig(obj, "metadata", "name", default=""), f"{ref.get('kind', '')}/{ref.get('name', '')}",
            object_age(obj, now), *_subjects(obj)]


BINDING = Printer(
    (
        name_column(),
        Column("Role", doc=("io.k8s.api.rbac.v1.RoleBinding", "roleRef")),
        Column("Age", doc=(META, "creationTimestamp")),
        Column("Users", priority=1, doc="Users in the roleBinding"),
        Column("Groups", priority=1, doc="Groups in the roleBinding"),
        Column("ServiceAccounts", priority=1, doc="ServiceAccounts in the roleBinding"),
    ),
    _binding_cells,
)

ROLE = Printer(
    (name_column(), Column("Created At", type="date", doc=(META, "creationTimestamp"))),
    lambda obj, now: [dig(obj, "metadata", "name", default=""), rfc3339(dig(obj, "metadata", "creationTimestamp"))],
)

PRINTERS = {"RoleBinding": BINDING, "ClusterRoleBinding": BINDING, "Role": ROLE, "ClusterRole": ROLE}
