"""Fixtures for the network half of k8py.client: a REST client on a real server."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable

import pytest

from k8py.client.config import ClientConfig
from k8py.client.rest import RestClient, RetryPolicy


@pytest.fixture
async def client(apiserver) -> AsyncIterator[RestClient]:
    async with RestClient(ClientConfig(server=apiserver.url), retry=RetryPolicy(initial=0.02, cap=0.2)) as c:
        yield c


def configmap(name: str, namespace: str = "default", **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": dict(data)}


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``check`` every 20 ms until true; fail after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)
