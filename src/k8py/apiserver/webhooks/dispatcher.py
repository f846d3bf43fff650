"""What mutating and validating webhooks share: should this webhook be called,
and call it.

:class:`WebhookCaller` runs one webhook for one request, as upstream's
``generic.Webhook`` + the dispatchers' ``callHook``:

1. ``should_call``: rules (with matchPolicy), namespaceSelector,
   objectSelector, then matchConditions (CEL; all must be true; an
   evaluation error obeys failurePolicy);
2. dry run: a webhook whose sideEffects is not None/NoneOnDryRun is not
   sent a dryRun request — the request fails (``does not support dry run``);
3. the AdmissionReview round trip within ``timeoutSeconds``;
4. the answer: warnings and audit annotations recorded on the request (the
   annotations keyed ``<webhook>/<key>``), a denial turned into upstream's
   Status (``admission webhook "x" denied the request: …``, code ≥ 400).

A webhook that cannot be called or answers garbage fails the request with
``Internal error occurred: failed calling webhook "x": …`` under
``failurePolicy: Fail`` and is skipped under ``Ignore`` (logged, and the
``failed-open`` audit annotation set, as upstream).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping

import orjson

from k8py.api.errors import BadRequest, Cause, InternalError, StatusError
from k8py.apiserver.webhooks.attributes import GroupVersionKind, GroupVersionResource, RequestAttributes
from k8py.apiserver.webhooks.client import CallError, WebhookClient
from k8py.apiserver.webhooks.conditions import activation, evaluate
from k8py.apiserver.webhooks.configurations import Webhook
from k8py.apiserver.webhooks.review import ReviewResponse, build_review, parse_response
from k8py.apiserver.webhooks.rules import namespace_selector_matches, object_selector_matches, rules_match

if TYPE_CHECKING:
    from k8py.apiserver.cel.authorizer import Authorize  # (the CEL engine loads on first use: k8py.apiserver.cel)

__all__ = ["WebhookCaller", "Invocation", "denied", "calling_failed"]

log = logging.getLogger(__name__)
Object = dict[str, Any]


def denied(webhook: str, status: Mapping[str, Any] | None) -> StatusError:
    """upstream's ``webhookerrors.ToStatusErr``."""
    status = dict(status or {})
    code = int(status.get("code") or 0)
    if code < 400:
        code = 400
    prefix = f'admission webhook "{webhook}" denied the request'
    if status.get("message"):
        message = f"{prefix}: {status['message']}"
    elif status.get("reason"):
        message = f"{prefix}: {status['reason']}"
    else:
        message = f"{prefix} without explanation"
    details = status.get("details") or {}
    causes = [Cause(str(c.get("reason", "")), str(c.get("message", "")), str(c.get("field", "")))
              for c in details.get("causes") or [] if isinstance(c, dict)]
    return StatusError(message, code=code, reason=str(status.get("reason") or ""), causes=causes,
                       name=str(details.get("name", "")), group=str(details.get("group", "")),
                       kind=str(details.get("kind", "")))


def calling_failed(webhook: str, reason: str) -> InternalError:
    text = f'failed calling webhook "{webhook}": {reason}'
    return InternalError(f"Internal error occurred: {text}", causes=[Cause("", text)])


Convert = Callable[[Any, str, str, str, str], Awaitable[Any]]
"""(object, group, resource, from version, to version) -> the object in ``to version``."""


class Invocation:
    """A webhook that applies to a request, as the request is described to it.

    ``sent`` is the object the webhook was sent (converted to the matched
    version under ``matchPolicy: Equivalent``): its patch applies to that."""

    __slots__ = ("webhook", "kind", "resource", "sent")

    def __init__(self, webhook: Webhook, kind: GroupVersionKind, resource: GroupVersionResource) -> None:
        self.webhook = webhook
        self.kind = kind
        self.resource = resource
        self.sent: Object | None = None


class WebhookCaller:
    def __init__(self, client: WebhookClient, *, namespace_labels: Callable[[str], Mapping[str, str] | None],
                 equivalents: Callable[[str, str], Iterable[str]], kind_of: Callable[[str, str, str], str | None],
                 mutating: bool, authorize: Callable[[], Authorize | None] = lambda: None,
                 convert: Convert | None = None) -> None:
        self.client = client
        #: objects into the matched version (None: sent as the request has them)
        self.convert = convert
        #: the authorizer library's decisions for matchConditions (a getter: built after the plugins)
        self.authorize = authorize
        self.namespace_labels = namespace_labels
        self.equivalents = equivalents
        self.kind_of = kind_of
        self.mutating = mutating
        self.kind_name = "mutating" if mutating else "validating"

    async def should_call(self, webhook: Webhook, attrs: RequestAttributes) -> Invocation | None:
        spec = webhook.spec
        matched = rules_match(spec.get("rules"), attrs, match_policy=spec.get("matchPolicy") or "Equivalent",
                              equivalents=self.equivalents)
        if matched is None:
            return None
        if not namespace_selector_matches(spec.get("namespaceSelector"), attrs, self.namespace_labels):
            return None
        if not object_selector_matches(spec.get("objectSelector"), attrs):
            return None
        if webhook.conditions and not await self._conditions_match(webhook, attrs):
            return None
        group, version, resource = matched
        if (group, version) == (attrs.resource.group, attrs.resource.version):
            return Invocation(webhook, attrs.kind, attrs.resource)
        kind = self.kind_of(group, version, resource) or attrs.kind.kind
        return Invocation(webhook, GroupVersionKind(group, version, kind), GroupVersionResource(group, version, resource))

    async def _conditions_match(self, webhook: Webhook, attrs: RequestAttributes) -> bool:
        variables = activation(attrs)
        authorize = self.authorize()
        errors: list[str] = []
        for condition in webhook.conditions:
            if condition.program is None:
                errors.append(f"compilation failed for matchCondition {condition.name!r}: {condition.error}")
                continue
            try:
                value = await evaluate(condition.program, variables, authorize)
            except Exception as err:  # an evaluation error (no such key, type error) is the expression's, not ours
                errors.append(f"matchCondition {condition.name!r}: {err}")
                continue
            if value is not True:
                return False  # a false condition skips the webhook, even when another errored
        if not errors:
            return True
        if (webhook.spec.get("failurePolicy") or "Fail") == "Ignore":
            return False
        raise calling_failed(webhook.name, "failed to evaluate match conditions: " + "; ".join(errors))

    async def call(self, invocation: Invocation, attrs: RequestAttributes, *, round_index: int = 0) -> ReviewResponse | None:
        """The webhook's answer (allowed, maybe with a patch), or None when it
        failed open; raises the denial or the failure."""
        webhook = invocation.webhook
        spec = webhook.spec
        if attrs.dry_run and spec.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise BadRequest(f'admission webhook "{webhook.name}" does not support dry run')
        obj, old = await self.versioned(invocation, attrs)
        invocation.sent = obj
        review = build_review(attrs, kind=invocation.kind, resource=invocation.resource, obj=obj, old_obj=old)
        uid = review["request"]["uid"]
        timeout = float(spec.get("timeoutSeconds") or 10)
        try:
            answer = await self.client.post(spec.get("clientConfig") or {}, review, timeout=timeout)
            try:
                response = parse_response(answer, uid, mutating=self.mutating)
            except CallError as err:
                raise CallError(f"received invalid webhook response: {err}") from None
        except CallError as err:
            reason = str(err) if str(err).startswith("received invalid") else f"failed to call webhook: {err}"
            if (spec.get("failurePolicy") or "Fail") == "Ignore":
                log.warning("failed calling webhook, failing open", extra={"webhook": webhook.name, "error": reason})
                attrs.add_audit_annotation(
                    f"failed-open.{self.kind_name}.webhook.admission.k8s.io/round_{round_index}_index_{webhook.index}", webhook.name)
                return None
            raise calling_failed(webhook.name, reason) from None
        for warning in response.warnings:
            attrs.add_warning(warning)
        for key, value in response.audit_annotations.items():
            attrs.add_audit_annotation(f"{webhook.name}/{key}", value)
        if not response.allowed:
            raise denied(webhook.name, response.status)
        return response


    async def versioned(self, invocation: Invocation, attrs: RequestAttributes) -> tuple[Object | None, Object | None]:
        """The object and old object as the webhook's matched version has them."""
        group, version, resource = attrs.resource
        if self.convert is None or invocation.resource.version == version:
            return attrs.object, attrs.old_object
        to = invocation.resource.version
        return (await self.convert(attrs.object, group, resource, version, to),
                await self.convert(attrs.old_object, group, resource, version, to))

    async def unversioned(self, invocation: Invocation, attrs: RequestAttributes, obj: Object) -> Object:
        """A (patched) object of the webhook's matched version back in the request's version."""
        group, version, resource = attrs.resource
        if self.convert is None or invocation.resource.version == version:
            return obj
        converted = await self.convert(obj, group, resource, invocation.resource.version, version)
        return converted if isinstance(converted, dict) else obj


def annotation_value(**fields: Any) -> str:
    return orjson.dumps(fields).decode()
