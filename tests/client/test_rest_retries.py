"""Retry rules of the REST client, against a small aiohttp server that misbehaves on purpose."""

from __future__ import annotations

import pytest
from aiohttp import web

from k8py.api.errors import InternalError, ServiceUnavailable
from k8py.client.config import ClientConfig
from k8py.client.resources import CONFIGMAPS
from k8py.client.rest import RestClient, RetryPolicy


async def _serve(handler) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


def _status(code: int, reason: str) -> web.Response:
    return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": reason}, status=code)


@pytest.fixture
async def flaky():
    calls: list[str] = []
    plan: list[web.Response] = []

    async def handler(request: web.Request) -> web.Response:
        calls.append(request.method)
        if plan:
            return plan.pop(0)
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "x"}})

    runner, url = await _serve(handler)
    client = RestClient(ClientConfig(server=url), retry=RetryPolicy(max_attempts=4, initial=0.01, cap=0.02))
    yield client, calls, plan
    await client.close()
    await runner.cleanup()


async def test_get_is_retried_on_5xx_and_429(flaky):
    client, calls, plan = flaky
    plan += [_status(503, "ServiceUnavailable"), _status(429, "TooManyRequests"), _status(500, "InternalError")]
    assert (await client.get(CONFIGMAPS, "default", "x"))["metadata"]["name"] == "x"
    assert calls == ["GET"] * 4


async def test_post_is_not_retried_on_a_500_whose_outcome_is_unknown(flaky):
    client, calls, plan = flaky
    plan += [_status(500, "InternalError")]
    with pytest.raises(InternalError):
        await client.create(CONFIGMAPS, {"metadata": {"name": "x"}})
    assert calls == ["POST"]


async def test_post_is_retried_on_429_and_on_503_with_retry_after(flaky):
    client, calls, plan = flaky
    busy = _status(503, "ServiceUnavailable")
    busy.headers["Retry-After"] = "0"
    plan += [_status(429, "TooManyRequests"), busy]
    await client.create(CONFIGMAPS, {"metadata": {"name": "x"}})
    assert calls == ["POST"] * 3


async def test_retries_stop_after_max_attempts(flaky):
    client, calls, plan = flaky
    plan += [_status(503, "ServiceUnavailable") for _ in range(10)]
    with pytest.raises(ServiceUnavailable):
        await client.get(CONFIGMAPS, "default", "x")
    assert len(calls) == 4


async def test_a_body_that_is_not_a_status_maps_by_http_code(flaky):
    client, calls, plan = flaky
    plan += [web.Response(status=404, text="404 page not found")]
    from k8py.api.errors import NotFound

    with pytest.raises(NotFound):
        await client.get(CONFIGMAPS, "default", "x")
