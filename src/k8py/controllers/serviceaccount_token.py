"""``serviceaccount-token``: fill and clean up legacy ``kubernetes.io/service-account-token`` Secrets.

Upstream's ``tokens_controller``, for Secrets a user creates with the
annotation ``kubernetes.io/service-account.name`` (nothing makes them on its
own since v1.24):

- the named ServiceAccount missing, or not the one whose uid the Secret's
  ``kubernetes.io/service-account.uid`` annotation names: the Secret is
  deleted (guarded by its uid);
- else, when ``token``, ``ca.crt`` or ``namespace`` is missing or stale, the
  Secret gets a legacy JWT (issuer ``kubernetes/serviceaccount``, signed with
  ``--service-account-private-key-file``), the ``--root-ca-file`` bundle, its
  namespace, and the uid annotation;
- a ServiceAccount deleted: its token Secrets are deleted.

Runs only with a private key (upstream starts it only then). Queue
``serviceaccount_tokens_secret`` of Secret keys; ServiceAccount deletions
queue the Secrets that reference them.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from k8py.api.errors import Conflict, NotFound
from k8py.api.service_account_keys import SigningKey, load_signing_key
from k8py.api.service_account_token import Ref, legacy_claims, sign
from k8py.client.resources import SECRETS, SERVICE_ACCOUNTS
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController, unwrap_tombstone

__all__ = ["TokensController", "new_controller", "SECRET_TYPE", "NAME_ANNOTATION", "UID_ANNOTATION"]

logger = logging.getLogger(__name__)

SECRET_TYPE = "kubernetes.io/service-account-token"
NAME_ANNOTATION = "kubernetes.io/service-account.name"
UID_ANNOTATION = "kubernetes.io/service-account.uid"


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


class TokensController(KeyedController):
    def __init__(self, ctx: ControllerContext, key: SigningKey, root_ca: bytes) -> None:
        super().__init__(ctx, name="serviceaccount-token", queue_name="serviceaccount_tokens_secret")
        self.key = key
        self.root_ca = root_ca
        self.secrets = ctx.informers.informer(SECRETS)
        self.accounts = ctx.informers.informer(SERVICE_ACCOUNTS)
        self.wait_for(self.secrets, self.accounts)
        self.secrets.add_event_handler(on_add=self._secret, on_update=lambda old, new: self._secret(new))
        self.accounts.add_event_handler(on_delete=self._account_deleted)

    def _secret(self, secret: Any) -> None:
        if secret.get("type") == SECRET_TYPE:
            self.enqueue(secret)

    def _account_deleted(self, obj: Any) -> None:
        sa = unwrap_tombstone(obj)
        if sa is None:
            return
        meta = sa.get("metadata") or {}
        for secret in self.secrets.lister.list(namespace=meta.get("namespace")):
            annotations = (secret.get("metadata") or {}).get("annotations") or {}
            if secret.get("type") == SECRET_TYPE and annotations.get(NAME_ANNOTATION) == meta.get("name"):
                self.enqueue(secret)

    async def sync(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        secret = self.secrets.lister.try_get(namespace, name)
        if secret is None or secret.get("type") != SECRET_TYPE:
            return
        meta = secret.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        sa_name = annotations.get(NAME_ANNOTATION, "")
        sa = self.accounts.lister.try_get(namespace, sa_name) if sa_name else None
        if sa is None and sa_name:
            try:  # the cache may be behind a ServiceAccount just made
                sa = await self.client.get(SERVICE_ACCOUNTS, namespace, sa_name)
            except NotFound:
                sa = None
        sa_uid = ((sa or {}).get("metadata") or {}).get("uid", "")
        wanted_uid = annotations.get(UID_ANNOTATION, "")
        if sa is None or (wanted_uid and wanted_uid != sa_uid):
            await self._delete(secret)
            return
        data = dict(secret.get("data") or {})
        want = {"namespace": _b64(namespace)}
        if self.root_ca:
            want["ca.crt"] = _b64(self.root_ca)
        if data.get("token") and all(data.get(k) == v for k, v in want.items()) and wanted_uid == sa_uid:
            return
        if not data.get("token"):
            token = sign(legacy_claims(namespace=namespace, service_account=Ref(sa_name, sa_uid), secret_name=name), self.key)
            data["token"] = _b64(token)
        data.update(want)
        updated = {**secret, "data": data,
                   "metadata": {**meta, "annotations": {**annotations, UID_ANNOTATION: sa_uid}}}
        try:
            await self.client.update(SECRETS, updated)
        except NotFound:
            return
        except Conflict:
            self.enqueue(secret)

    async def _delete(self, secret: dict[str, Any]) -> None:
        meta = secret.get("metadata") or {}
        try:
            await self.client.delete(SECRETS, meta.get("namespace"), meta.get("name", ""), preconditions={"uid": meta.get("uid", "")})
        except (NotFound, Conflict):
            return
        logger.info("deleted the token secret of a missing service account",
                    extra={"secret": f"{meta.get('namespace')}/{meta.get('name')}"})


def new_controller(ctx: ControllerContext) -> TokensController | None:
    opts = ctx.options
    if not opts.service_account_private_key_file:
        logger.warning("serviceaccount-token not started: give --service-account-private-key-file")
        return None
    key = load_signing_key(opts.service_account_private_key_file, flag="--service-account-private-key-file")
    root_ca = b""
    if opts.root_ca_file:
        with open(opts.root_ca_file, "rb") as f:
            root_ca = f.read()
    return TokensController(ctx, key, root_ca)
