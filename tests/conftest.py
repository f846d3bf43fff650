"""Fixtures shared by every test: real API servers on free loopback ports."""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from tests.support.kube import Kubectl, official_client
from tests.support.servers import ServerThread, sqlite_storage


@pytest.fixture
def apiserver(tmp_path) -> Iterator[ServerThread]:
    """A real API server on the embedded store, in a background thread."""
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0) as server:
        yield server


@pytest.fixture
def k8s(apiserver):
    """The official kubernetes client's ApiClient pointed at ``apiserver``."""
    client = official_client(apiserver.url)
    yield client
    client.close()


@pytest.fixture
def kubectl(apiserver, tmp_path) -> Kubectl:
    return Kubectl(apiserver.url, str(tmp_path / "home"))
