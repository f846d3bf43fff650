"""A docker-registry (open, and one behind htpasswd) per test module, and a fresh puller per test."""

from __future__ import annotations

import shutil
from typing import Iterator

import pytest

from tests.support.oci_registry import Registry


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is missing: scripts/test installs it (Debian package {'apache2-utils' if tool == 'htpasswd' else tool})")


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Iterator[Registry]:
    _need("docker-registry")
    with Registry(str(tmp_path_factory.mktemp("registry"))) as reg:
        yield reg


@pytest.fixture(scope="module")
def auth_registry(tmp_path_factory) -> Iterator[Registry]:
    _need("docker-registry")
    _need("htpasswd")
    with Registry(str(tmp_path_factory.mktemp("auth-registry")), users={"alice": "wonderland"}) as reg:
        yield reg
