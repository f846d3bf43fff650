"""The ValidatingAdmissionWebhook plugin: webhooks that may only say no.

Every matching webhook is called at once (upstream calls them in parallel);
the request fails if any of them denies it or fails closed. When several
fail, the first in configuration order is reported (upstream reports the
first to arrive; ordering them makes the answer reproducible).
"""

from __future__ import annotations

import asyncio

from k8py.api.errors import StatusError
from k8py.apiserver.webhooks.attributes import RequestAttributes
from k8py.apiserver.webhooks.configurations import WebhookSource
from k8py.apiserver.webhooks.dispatcher import Invocation, WebhookCaller
from k8py.apiserver.webhooks.rules import is_exempt

__all__ = ["ValidatingWebhookDispatcher"]


class ValidatingWebhookDispatcher:
    name = "ValidatingAdmissionWebhook"

    def __init__(self, source: WebhookSource, caller: WebhookCaller) -> None:
        self.source = source
        self.caller = caller

    def handles(self, operation: str) -> bool:
        return operation in ("CREATE", "UPDATE", "DELETE", "CONNECT")

    async def validate(self, attrs: RequestAttributes) -> None:
        if is_exempt(attrs):
            return
        invocations: list[Invocation] = []
        for webhook in self.source.webhooks():
            invocation = await self.caller.should_call(webhook, attrs)
            if invocation is not None:
                invocations.append(invocation)
        if not invocations:
            return
        if len(invocations) == 1:
            await self.caller.call(invocations[0], attrs)
            return
        results = await asyncio.gather(*(self.caller.call(i, attrs) for i in invocations), return_exceptions=True)
        for result in results:
            if isinstance(result, StatusError):
                raise result
            if isinstance(result, BaseException):
                raise result
