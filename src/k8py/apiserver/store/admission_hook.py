"""The seam through which the object store runs admission, without knowing it.

The store sits below admission, so it sees admission only as this protocol
(upstream's ``rest.ValidateObjectFunc`` plus the mutating transformers of
``rest.UpdatedObjectInfo``). The handlers build one hook per request
(``admission.request.RequestAdmission``) and pass it to ``create``,
``update``, ``guaranteed_update`` and ``delete_object``; internal writers
(bootstrap, quota charges, the endpoint reconciler) pass none and are not
admitted.

Where the store calls it, as upstream's generic registry does:

- create: ``mutate(obj, None)`` after defaulting and ``prepare_for_create``;
  ``validate(obj, None)`` after the strategy's validation, before writing;
- update (inside the guaranteed-update function, so ``old`` is the object
  the write is guarded on, and a conflict re-runs both on the fresh read):
  ``mutate(new, old)`` after the mutation and defaulting, before
  ``prepare_for_update``; ``validate(new, old)`` after validation;
- delete: ``delete(old)`` after the preconditions, before marking or removing;
- ``abort()`` when the write is then not stored (an error, or a dry run's end
  is no abort: plugins see ``dry_run`` and do not charge).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["AdmissionHook"]

Object = dict[str, Any]


class AdmissionHook(Protocol):
    async def mutate(self, obj: Object, old: Object | None) -> Object:
        """Run the mutating plugins; returns the object to carry on with (maybe replaced)."""
        ...

    async def validate(self, obj: Object, old: Object | None) -> None:
        """Run the validating plugins (again after a conflict: the previous attempt's charges are undone first)."""

    async def delete(self, old: Object) -> None:
        """Admit deleting ``old`` (mutating then validating plugins, with no new object)."""

    async def abort(self) -> None:
        """The write failed after ``validate``: undo what the plugins charged."""

    def for_create(self) -> "AdmissionHook":
        """The same request, admitted as a CREATE (a PUT or apply that creates the object)."""
        ...
