"""CRD conversion ``Webhook``: ConversionReview v1 to the CRD's webhook.

A CRD whose ``spec.conversion.strategy`` is ``Webhook`` stores every object
in its storage version; each other served version's definition gets a
:class:`WebhookConverter`, which the request path awaits (it is an
:class:`~k8py.apiserver.registry.AsyncConverter`): writes are converted to the
storage version before they are validated-and-stored bytes, reads (get, list,
watch events) from it, each batch in one review, as upstream's
``webhookConverter``.

The call goes through :class:`~k8py.apiserver.webhooks.client.WebhookClient`
(``clientConfig.url`` or ``service``, the ``caBundle``, upstream's 30 s
timeout). The answer is checked as upstream checks it: the same ``uid``,
``result.status: Success``, as many objects as sent, each in the desired
``apiVersion`` and the same ``kind``; of ``metadata`` only ``labels`` and
``annotations`` may change (the rest is restored). Any failure is a 500
``Internal error occurred: conversion webhook for <group>/<version>,
Kind=<Kind> failed: <why>``.

After conversion the served version's schema defaults are filled, as
upstream defaults what it decodes.
"""

from __future__ import annotations

import copy
import logging
import uuid
from typing import Any, Mapping

from k8py.api.errors import Cause, InternalError
from k8py.apiserver.validation import structural
from k8py.apiserver.webhooks.client import CallError, WebhookClient

__all__ = ["WebhookConverter", "ConversionFailed", "TIMEOUT"]

log = logging.getLogger(__name__)

Object = dict[str, Any]

#: upstream's conversion webhook timeout
TIMEOUT = 30.0


class ConversionFailed(InternalError):
    """The conversion webhook could not convert (500, upstream's wording)."""


def _failed(gvk: str, detail: str) -> ConversionFailed:
    text = f"conversion webhook for {gvk} failed: {detail}"
    return ConversionFailed(f"Internal error occurred: {text}", causes=[Cause("", text)])


class WebhookConverter:
    """Between one served version and the storage version, through the webhook."""

    is_async = True
    field_aliases: dict[str, str] = {}

    def __init__(self, client: WebhookClient, webhook: Mapping[str, Any], *, group: str, kind: str, served: str,
                 stored: str, schema: Object | None) -> None:
        self.client = client
        self.config = webhook.get("clientConfig") or {}
        self.group, self.kind = group, kind
        self.served = f"{group}/{served}"
        self.stored = f"{group}/{stored}"
        self.schema = schema
        #: the storage version's own definition (see VersionConverter)
        self.reads_stored_form = served == stored

    # the sync Converter methods: never on the request path (see registry.AsyncConverter)
    def to_storage(self, obj: Object) -> Object:
        raise RuntimeError("a conversion webhook is awaited: use registry.to_stored")

    def from_storage(self, obj: Object) -> Object:
        raise RuntimeError("a conversion webhook is awaited: use registry.to_served")

    async def to_storage_many(self, objs: list[Object]) -> list[Object]:
        return await self._convert(objs, self.stored)

    async def from_storage_many(self, objs: list[Object]) -> list[Object]:
        out = await self._convert(objs, self.served)
        if self.schema is not None:
            for obj in out:
                structural.apply_defaults(obj, self.schema)
        return out

    async def _convert(self, objs: list[Object], desired: str) -> list[Object]:
        todo = [i for i, o in enumerate(objs) if o.get("apiVersion") != desired]
        if not todo:
            return objs
        source = objs[todo[0]].get("apiVersion", "")
        gvk = f"{source}, Kind={self.kind}"
        uid = str(uuid.uuid4())
        review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                  "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [objs[i] for i in todo]}}
        try:
            answer = await self.client.post(self.config, review, timeout=TIMEOUT)
        except CallError as err:
            raise _failed(gvk, str(err)) from None
        converted = self._check(answer, uid, desired, [objs[i] for i in todo], gvk)
        out = list(objs)
        for i, obj in zip(todo, converted):
            out[i] = obj
        return out

    def _check(self, answer: Object, uid: str, desired: str, sent: list[Object], gvk: str) -> list[Object]:
        response = answer.get("response")
        if not isinstance(response, dict):
            raise _failed(gvk, "conversion webhook response was absent")
        if response.get("uid") != uid:
            raise _failed(gvk, f'expected response uid "{uid}", got "{response.get("uid", "")}"')
        result = response.get("result") or {}
        if result.get("status") != "Success":
            raise _failed(gvk, str(result.get("message") or "conversion failed without a message"))
        objects = response.get("convertedObjects")
        if not isinstance(objects, list) or len(objects) != len(sent):
            count = len(objects) if isinstance(objects, list) else 0
            raise _failed(gvk, f"returned {count} objects, expected {len(sent)}")
        out = []
        for i, (obj, original) in enumerate(zip(objects, sent)):
            if not isinstance(obj, dict):
                raise _failed(gvk, f"invalid converted object at index {i}: not an object")
            if obj.get("apiVersion") != desired:
                raise _failed(gvk, f'invalid converted object at index {i}: invalid apiVersion '
                                   f'"{obj.get("apiVersion", "")}", expected "{desired}"')
            if obj.get("kind") != original.get("kind"):
                raise _failed(gvk, f'invalid converted object at index {i}: invalid kind "{obj.get("kind", "")}", '
                                   f'expected "{original.get("kind", "")}"')
            out.append(_restore_meta(obj, original))
        return out


def _restore_meta(obj: Object, original: Object) -> Object:
    """Upstream's ``restoreObjectMeta``: only labels and annotations come from the webhook."""
    meta = copy.deepcopy(original.get("metadata") or {})
    got = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    for key in ("labels", "annotations"):
        if isinstance(got.get(key), dict) and got[key]:
            meta[key] = got[key]
        else:
            meta.pop(key, None)
    return {**obj, "metadata": meta}
