"""Fixtures for the API server's unit tests: the real registry of built-in
kinds, and the in-memory store (``tests/support/fake_storage``) whose watch a
test can lag or break, under a real Cacher and ObjectStore."""

from __future__ import annotations

from typing import AsyncIterator

import pytest

from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.resources import register_builtins
from k8py.apiserver.watch.cacher import Cacher
from tests.support.fake_storage import MemoryStorage


@pytest.fixture
def registry() -> Registry:
    r = Registry()
    register_builtins(r)
    return r


def definition(registry: Registry, plural: str, group: str = "", version: str = "v1") -> ResourceDefinition:
    d = registry.get(group, version, plural)
    assert d is not None
    return d


@pytest.fixture
def pods(registry: Registry) -> ResourceDefinition:
    return definition(registry, "pods")


@pytest.fixture
def configmaps(registry: Registry) -> ResourceDefinition:
    return definition(registry, "configmaps")


@pytest.fixture
def nodes(registry: Registry) -> ResourceDefinition:
    return definition(registry, "nodes")


@pytest.fixture
async def memory() -> AsyncIterator[MemoryStorage]:
    store = MemoryStorage()
    await store.start()
    yield store
    await store.close()


@pytest.fixture
async def cacher(memory: MemoryStorage, registry: Registry) -> AsyncIterator[Cacher]:
    c = Cacher(memory, registry, capacity=100)
    await c.start()
    yield c
    await c.close()
