"""ControllerRefManager: adopt the orphans a controller's selector matches,
release the objects it owns that stop matching (upstream ``ClaimObjects``).

For each candidate object, as ``pkg/controller/controller_ref_manager.go``:

- owned by another controller: ignored;
- owned by us and still matching: claimed; no longer matching: released
  (our ownerReference removed), unless we are being deleted;
- an orphan that matches, is not being deleted, while we are not being
  deleted: adopted (our controller reference added), after one fresh read of
  the owner from the API server (``can_adopt``) confirms it still exists with
  the same uid and no deletionTimestamp, so a controller deleted a moment ago
  (its cache stale) never adopts anything.

Adoption and release are strategic-merge patches of ``ownerReferences``
(merge key ``uid``) that also carry the object's ``metadata.uid``: the uid is
immutable, so the patch fails instead of touching a same-named replacement.
A NotFound while patching means the object is gone: it is simply not claimed.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Mapping

from k8py.api.errors import NotFound, StatusError
from k8py.api.selectors import LabelSelector
from k8py.client.resource import Resource
from k8py.client.rest import PatchType, RestClient
from k8py.controllers.object_meta import meta as _meta
from k8py.controllers.owner_refs import controller_ref, new_controller_ref
from k8py.controllers.selectors import labels_matcher

__all__ = ["ControllerRefManager", "recheck_owner"]

logger = logging.getLogger(__name__)

CanAdopt = Callable[[], Awaitable[None]]


def recheck_owner(client: RestClient, resource: Resource, owner: Mapping[str, Any]) -> CanAdopt:
    """A ``can_adopt`` that re-reads ``owner`` once (upstream ``RecheckDeletionTimestamp``)."""
    checked: list[bool] = []

    async def check() -> None:
        if checked:
            return
        meta = _meta(owner)
        fresh = await client.get(resource, meta.get("namespace"), meta["name"])
        fresh_meta = _meta(fresh)
        if fresh_meta.get("uid") != meta.get("uid"):
            raise RuntimeError(f"original {resource.kind} {meta.get('namespace')}/{meta['name']} is gone: "
                               f"got uid {fresh_meta.get('uid')}, wanted {meta.get('uid')}")
        if fresh_meta.get("deletionTimestamp"):
            raise RuntimeError(f"{resource.kind} {meta.get('namespace')}/{meta['name']} has just been deleted "
                               f"at {fresh_meta['deletionTimestamp']}")
        checked.append(True)

    return check


class ControllerRefManager:
    """Claims objects of ``child`` resource for ``owner`` (of ``owner_resource``)."""

    def __init__(
        self,
        client: RestClient,
        owner: Mapping[str, Any],
        owner_resource: Resource,
        child: Resource,
        selector: LabelSelector,
        can_adopt: CanAdopt,
    ) -> None:
        self.client = client
        self.owner = owner
        self.owner_resource = owner_resource
        self.child = child
        self.selector = selector
        self._can_adopt = can_adopt
        self._uid = _meta(owner).get("uid")
        self._owner_deleting = bool(_meta(owner).get("deletionTimestamp"))

    async def claim(self, objects: list[Any], *, matches: Callable[[Any], bool] | None = None) -> list[Any]:
        """The objects that belong to the owner after adopting and releasing.

        Raises the first adoption/release error after handling every object
        (the others still claimed), so that the caller's sync is retried.
        """
        if matches is None:
            labels_match = labels_matcher(self.selector)
            match: Callable[[Any], bool] = lambda obj: labels_match((obj.get("metadata") or {}).get("labels"))  # noqa: E731
        else:
            match = matches
        claimed: list[Any] = []
        errors: list[Exception] = []
        uid = self._uid
        for obj in objects:
            ref = controller_ref(obj)
            if ref is not None and ref.get("uid") == uid and match(obj):
                claimed.append(obj)  # ours and still matching: the common case, decided without a coroutine
                continue
            try:
                result = await self._claim_one(obj, match)
            except Exception as err:  # noqa: BLE001 - collected and re-raised below
                errors.append(err)
                continue
            if result is not None:
                claimed.append(result)
        if errors:
            raise errors[0]
        return claimed

    async def _claim_one(self, obj: Any, match: Callable[[Any], bool]) -> Any | None:
        ref = controller_ref(obj)
        if ref is not None:
            if ref.get("uid") != self._uid:
                return None
            if match(obj):
                return obj
            if self._owner_deleting:
                return None
            await self.release(obj)
            return None
        if self._owner_deleting or not match(obj) or _meta(obj).get("deletionTimestamp"):
            return None
        await self._can_adopt()
        try:
            return await self.adopt(obj)
        except NotFound:
            return None

    async def adopt(self, obj: Any) -> dict[str, Any]:
        meta = _meta(obj)
        patch = {"metadata": {"ownerReferences": [new_controller_ref(self.owner, self.owner_resource)], "uid": meta.get("uid")}}
        return await self.client.patch(self.child, meta.get("namespace"), meta["name"], patch, patch_type=PatchType.STRATEGIC)

    async def release(self, obj: Any) -> None:
        meta = _meta(obj)
        patch = {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": self._uid}], "uid": meta.get("uid")}}
        try:
            await self.client.patch(self.child, meta.get("namespace"), meta["name"], patch, patch_type=PatchType.STRATEGIC)
        except NotFound:
            return  # gone: nothing to release
        except StatusError as err:
            if err.reason == "Invalid":
                return  # the uid differs: a replacement object; ours is gone
            raise
        logger.info("released object", extra={"kind": self.child.kind, "object": f"{meta.get('namespace')}/{meta['name']}"})
