"""The MutatingAdmissionWebhook plugin: webhooks that may change the object.

Webhooks run one after another (configurations by name, then their order);
each JSONPatch answer is applied to the object before the next webhook sees
it. Reinvocation as upstream's ``reinvocationPolicy: IfNeeded``: when a
webhook changes the object, every IfNeeded webhook called before it is called
once more after the first round (the object it judged has changed); a second
round changes nothing further. A change by a later plugin (in k8py nothing
mutating runs after the webhooks, but the chain's reinvocation pass may have a
policy change the object again) calls the IfNeeded webhooks not yet called
twice once more, in that pass (:meth:`reinvoke`,
:mod:`k8py.apiserver.admission.reinvocation`).

Each applied patch is recorded in the request's audit annotations
(``patch.webhook.admission.k8s.io/round_<r>_index_<i>`` and
``mutation.webhook.admission.k8s.io/round_<r>_index_<i>``), as upstream.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import StatusError
from k8py.api.patch.json_patch import apply_json_patch
from k8py.apiserver.admission.reinvocation import context_of
from k8py.apiserver.webhooks.attributes import RequestAttributes
from k8py.apiserver.webhooks.configurations import WebhookSource
from k8py.apiserver.webhooks.dispatcher import WebhookCaller, annotation_value, calling_failed
from k8py.apiserver.webhooks.rules import is_exempt

__all__ = ["MutatingWebhookDispatcher"]

Object = dict[str, Any]


class MutatingWebhookDispatcher:
    name = "MutatingAdmissionWebhook"

    def __init__(self, source: WebhookSource, caller: WebhookCaller) -> None:
        self.source = source
        self.caller = caller

    def handles(self, operation: str) -> bool:
        return operation in ("CREATE", "UPDATE", "DELETE", "CONNECT")

    async def admit(self, attrs: RequestAttributes) -> None:
        hooks = self.source.webhooks()
        if not hooks or is_exempt(attrs):
            return
        changes = 0
        #: webhook index -> the change count when an IfNeeded webhook last ran
        seen_at: dict[int, int] = {}
        for webhook in hooks:
            changed = await self._run(webhook, attrs, 0)
            if changed:
                changes += 1
            if (webhook.spec.get("reinvocationPolicy") or "Never") == "IfNeeded" and webhook.index not in seen_at:
                if changed is not None:
                    seen_at[webhook.index] = changes
        again = [w for w in hooks if w.index in seen_at and seen_at[w.index] < changes]
        for webhook in again:
            await self._run(webhook, attrs, 1)
        context = context_of(attrs)
        if context is not None:
            state = context.plugin(self.name)
            state.invoked = [w.index for w in hooks if w.index in seen_at and w not in again]
            state.finished(attrs.object)
            if changes:
                context.should_reinvoke = True

    async def reinvoke(self, attrs: RequestAttributes) -> None:
        """The chain's second pass: IfNeeded webhooks called once, again, if the object changed since."""
        context = context_of(attrs)
        if context is None or attrs.object is None:
            return
        state = context.plugin(self.name)
        if not state.invoked or not state.changed_since(attrs.object):
            return
        pending, state.invoked = state.invoked, []
        for webhook in self.source.webhooks():
            if webhook.index in pending:
                await self._run(webhook, attrs, 1)
        state.finished(attrs.object)

    async def _run(self, webhook: Any, attrs: RequestAttributes, round_index: int) -> bool | None:
        """True if the webhook changed the object, False if not, None if it was not called."""
        invocation = await self.caller.should_call(webhook, attrs)
        if invocation is None:
            return None
        response = await self.caller.call(invocation, attrs, round_index=round_index)
        if response is None or not response.patch or attrs.object is None:
            return False
        try:
            patched = apply_json_patch(invocation.sent if invocation.sent is not None else attrs.object, response.patch)
        except StatusError as err:
            raise calling_failed(webhook.name, f"received invalid webhook response: {err.message}"
                                 + (f": {err.causes[0].message}" if err.causes else "")) from None
        if not isinstance(patched, dict):
            raise calling_failed(webhook.name, "received invalid webhook response: the patched object is not an object")
        patched = await self.caller.unversioned(invocation, attrs, patched)  # back to the request's version
        changed = patched != attrs.object
        key = f"round_{round_index}_index_{webhook.index}"
        attrs.add_audit_annotation(f"patch.webhook.admission.k8s.io/{key}", annotation_value(
            configuration=webhook.configuration, webhook=webhook.name, patch=response.patch, patchType="JSONPatch"))
        attrs.add_audit_annotation(f"mutation.webhook.admission.k8s.io/{key}", annotation_value(
            configuration=webhook.configuration, webhook=webhook.name, mutated=changed))
        if changed:
            attrs.object.clear()
            attrs.object.update(patched)  # in place: the chain's later plugins and the store see it
        return changed
