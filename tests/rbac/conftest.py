"""A real API server (embedded store only: RBAC does not depend on the backend)."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.support.kube import Kubectl, official_client
from tests.support.servers import ServerThread, sqlite_storage


@pytest.fixture
def apiserver(tmp_path) -> Iterator[ServerThread]:
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0) as server:
        yield server


@pytest.fixture
def k8s(apiserver):
    client = official_client(apiserver.url)
    yield client
    client.close()
    client.rest_client.pool_manager.clear()


@pytest.fixture
def kubectl(apiserver, tmp_path) -> Kubectl:
    return Kubectl(apiserver.url, str(tmp_path / "home"))
