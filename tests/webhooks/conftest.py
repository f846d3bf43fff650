"""An API server on the test's own event loop, for the dispatchers' tests
(they call the admission plugins directly, with a request's attributes)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import pytest

from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.server import APIServer, APIServerConfig
from k8py.apiserver.webhooks.attributes import GroupVersionKind, GroupVersionResource
from k8py.storage.sqlite import SqliteStorage


@dataclass
class Attrs:
    """A request's admission attributes, as the chain hands them to a plugin."""

    operation: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    name: str = ""
    namespace: str = ""
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    subresource: str = ""
    user: UserInfo = field(default_factory=lambda: UserInfo("alice", groups=("devs", "system:authenticated")))
    dry_run: bool = False
    options: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)

    def add_warning(self, text: str) -> None:
        self.warnings.append(text)

    def add_audit_annotation(self, key: str, value: str) -> None:
        self.annotations.setdefault(key, value)


def configmap_create(name: str = "cm", namespace: str = "default", labels: dict[str, str] | None = None,
                     data: dict[str, str] | None = None, **kw: Any) -> Attrs:
    obj = {"kind": "ConfigMap", "apiVersion": "v1",
           "metadata": {"name": name, "namespace": namespace, **({"labels": labels} if labels else {})},
           "data": dict(data or {})}
    return Attrs("CREATE", GroupVersionKind("", "v1", "ConfigMap"), GroupVersionResource("", "v1", "configmaps"),
                 name=name, namespace=namespace, object=obj,
                 options={"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}, **kw)


@pytest.fixture
async def server(tmp_path) -> AsyncIterator[APIServer]:
    os.makedirs(tmp_path / "data", exist_ok=True)
    api = APIServer(SqliteStorage(str(tmp_path / "data" / "k8py.db")), APIServerConfig(endpoint_reconciler_interval=0.0, secure_port=None, insecure_port=0))
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


async def put(server: APIServer, group: str, plural: str, obj: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    """Create ``obj`` through the store and wait until the watch cache shows it."""
    definition = server.registry.get(group, "v1", plural)
    assert definition is not None
    created = await server.store.create(definition, namespace, obj)
    await server.cacher.wait_consistent(timeout=10.0)
    return created
