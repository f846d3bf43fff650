"""``GET /containerLogs/NS/POD/CONTAINER``: a container's log, as the API server's ``pods/log`` relays it.

Options (the API server passes ``PodLogOptions`` through): ``follow``,
``previous``, ``timestamps``, ``tailLines``, ``sinceSeconds``, ``sinceTime``,
``limitBytes``. The attempt is chosen by :mod:`.containers`; the file is read
by :mod:`.cri_logs`. The answer is ``text/plain``, chunked, flushed as records
arrive; a refusal is a ``Status`` with its HTTP code.
"""

from __future__ import annotations

import time
from typing import Awaitable, Callable

from aiohttp import web

from k8py.api.stream_channels import query_flag
from k8py.kubelet.runtime.protocols import ContainerState, NotFoundError
from k8py.kubelet.server.containers import KubeletError, pick_attempt
from k8py.kubelet.server.cri_logs import LogOptions, parse_timestamp_ns, read_log
from k8py.kubelet.server_context import ServerContext

__all__ = ["container_logs_handler", "log_options_from_query"]


def _int(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise KubeletError(400, f"{key} must be an integer, not {raw!r}") from None


def log_options_from_query(query: "dict[str, str]", now: Callable[[], float] = time.time) -> LogOptions:
    since_ns = None
    if "sinceSeconds" in query:
        since_ns = int((now() - _int("sinceSeconds", query["sinceSeconds"])) * 1_000_000_000)
    elif "sinceTime" in query:
        try:
            since_ns = parse_timestamp_ns(query["sinceTime"])
        except ValueError:
            raise KubeletError(400, f"sinceTime must be an RFC 3339 time, not {query['sinceTime']!r}") from None
    return LogOptions(
        follow=query_flag(query.get("follow")),
        timestamps=query_flag(query.get("timestamps")),
        tail_lines=_int("tailLines", query["tailLines"]) if "tailLines" in query else None,
        since_ns=since_ns,
        limit_bytes=_int("limitBytes", query["limitBytes"]) if "limitBytes" in query else None,
    )


def container_logs_handler(ctx: ServerContext, *, poll_interval: float = 0.1) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        ns, pod, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        query = {k: request.query[k] for k in request.query}
        try:
            options = log_options_from_query(query)
            attempt = await pick_attempt(ctx, ns, pod, container, previous=query_flag(query.get("previous")))
        except KubeletError as err:
            return web.Response(status=err.code, body=err.body(), content_type="application/json")

        async def still_running() -> bool:
            try:
                status = await ctx.runtime.container_status(attempt.id)
            except NotFoundError:
                return False
            return status.state in (ContainerState.RUNNING, ContainerState.CREATED)

        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            async for chunk in read_log(attempt.log_path, options, still_running=still_running, poll_interval=poll_interval):
                await response.write(chunk)
            await response.write_eof()
        except ConnectionError:  # the reader went away
            pass
        return response

    return handler
