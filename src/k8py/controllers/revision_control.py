"""Writing ControllerRevision history for a StatefulSet or DaemonSet.

The I/O half of :mod:`k8py.controllers.history` (upstream's
``constructHistory`` in the DaemonSet controller and ``getStatefulSetRevisions``
in the StatefulSet one), shared by both controllers:

- :meth:`RevisionControl.claim` adopts orphaned revisions the owner's selector
  matches, as upstream's ``ControllerRevisionControllerRefManager``;
- :meth:`RevisionControl.current` finds the revision whose data equals the
  owner's template; if it is not the newest, it is renumbered to newest + 1
  (this is what makes ``kubectl rollout undo`` a new revision); if there is
  none, it creates one. A name already taken by different data is a hash
  collision: ``status.collisionCount`` is bumped by the caller and the sync
  retried (:class:`HashCollision`), as upstream;
- :meth:`RevisionControl.trim` deletes the oldest revisions beyond
  ``revisionHistoryLimit`` that no live pod uses.
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.api.errors import AlreadyExists, NotFound
from k8py.client.resource import Resource
from k8py.client.rest import RestClient
from k8py.api.selectors import label_selector_from_dict
from k8py.controllers import history
from k8py.controllers.controller_ref_manager import ControllerRefManager, recheck_owner
from k8py.controllers.owner_refs import controller_ref

__all__ = ["CONTROLLER_REVISIONS", "HashCollision", "RevisionControl"]

CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions", True, "ControllerRevision")


class HashCollision(Exception):
    """A revision of this name exists with other data; bump ``collisionCount``."""


class RevisionControl:
    def __init__(self, client: RestClient, lister: Any, kind: str) -> None:
        self.client = client
        self.lister = lister
        self.kind = kind

    async def claim(self, owner: Mapping[str, Any], owner_resource: Resource) -> list[dict[str, Any]]:
        """The owner's revisions, adopting orphans its selector matches (left by an
        ``--cascade=orphan`` delete) and releasing ones that stopped matching."""
        selector = label_selector_from_dict((owner.get("spec") or {}).get("selector"))
        manager = ControllerRefManager(self.client, owner, owner_resource, CONTROLLER_REVISIONS, selector,
                                       recheck_owner(self.client, owner_resource, owner))
        return await manager.claim(self.lister.list(namespace=owner["metadata"]["namespace"]))

    def owned(self, owner: Mapping[str, Any]) -> list[dict[str, Any]]:
        uid = owner["metadata"]["uid"]
        return [r for r in self.lister.list(namespace=owner["metadata"]["namespace"])
                if (controller_ref(r) or {}).get("uid") == uid]

    async def current(self, owner: Mapping[str, Any], revisions: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(the revision of the owner's template, all owned revisions after the change)."""
        collision_count = (owner.get("status") or {}).get("collisionCount")
        number = history.next_revision_number(revisions)
        wanted = history.new_revision(owner, kind=self.kind, revision=number, collision_count=collision_count)
        equal = history.equal_revisions(revisions, wanted)
        if equal:
            found = dict(equal[-1])
            if int(found.get("revision", 0)) != number - 1:
                found["revision"] = number
                found = await self.client.update(CONTROLLER_REVISIONS, found)
                revisions = [found if r["metadata"]["name"] == found["metadata"]["name"] else r for r in revisions]
            return found, revisions
        namespace = owner["metadata"]["namespace"]
        try:
            created = await self.client.create(CONTROLLER_REVISIONS, wanted, namespace=namespace)
        except AlreadyExists:
            existing = await self.client.get(CONTROLLER_REVISIONS, namespace, wanted["metadata"]["name"])
            if existing.get("data") == wanted["data"] and \
                    (controller_ref(existing) or {}).get("uid") == owner["metadata"]["uid"]:
                return existing, [*revisions, existing]
            raise HashCollision(wanted["metadata"]["name"]) from None
        return created, [*revisions, created]

    async def trim(self, owner: Mapping[str, Any], revisions: list[dict[str, Any]], *, live_hashes: set[str],
                   live_names: set[str]) -> None:
        limit = int((owner.get("spec") or {}).get("revisionHistoryLimit", 10))
        for rev in history.revisions_to_trim(revisions, limit=limit, live_hashes=live_hashes, live_names=live_names):
            try:
                await self.client.delete(CONTROLLER_REVISIONS, rev["metadata"]["namespace"], rev["metadata"]["name"])
            except NotFound:
                pass
