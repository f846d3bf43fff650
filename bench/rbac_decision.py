"""What one RBAC decision costs, in process: the authorizer chain (Node,RBAC) asked for
a user bound through a RoleBinding, with the bootstrap policy and N more bindings in
the watch cache. The figure the RBAC-on create path adds (the role: system:aggregate-to-edit, what edit aggregates) for a non-privileged user."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time

from k8py.apiserver.authn.user import ALL_AUTHENTICATED, UserInfo
from k8py.apiserver.authz.attributes import Attributes, Decision
from k8py.apiserver.server import APIServer, APIServerConfig
from k8py.storage.sqlite import SqliteStorage

__all__ = ["measure_rbac_decision"]

RBAC = "rbac.authorization.k8s.io"


async def measure_rbac_decision(bindings: int = 1_000, decisions: int = 20_000) -> tuple[float, float]:
    """(microseconds per allowed decision, microseconds per decision after a policy change)."""
    tmp = tempfile.mkdtemp(prefix="k8py-rbac-bench-")
    server = APIServer(SqliteStorage(os.path.join(tmp, "db")),
                       APIServerConfig(authorization_modes=("Node", "RBAC"), endpoint_reconciler_interval=0.0))
    await server.start()
    try:
        rb = server.registry.get(RBAC, "v1", "rolebindings")
        assert rb is not None

        async def bind(i: int) -> None:
            await server.store.create(rb, "default", {"metadata": {"name": f"b-{i}"},
                                                      "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "system:aggregate-to-edit"},
                                                      "subjects": [{"kind": "User", "name": f"user-{i}", "apiGroup": RBAC}]})

        for start in range(0, bindings, 100):
            await asyncio.gather(*(bind(i) for i in range(start, min(start + 100, bindings))))
        await server.cacher.wait_consistent(timeout=30)
        user = UserInfo(f"user-{bindings - 1}", groups=(ALL_AUTHENTICATED,))
        attrs = Attributes(user=user, verb="create", api_version="v1", resource="pods", namespace="default")
        assert (await server.authorizer.authorize(attrs))[0] is Decision.ALLOW
        started = time.perf_counter()
        for _ in range(decisions):
            await server.authorizer.authorize(attrs)
        warm = (time.perf_counter() - started) / decisions * 1e6
        await bind(bindings)  # a policy change: the index is rebuilt on the next decision
        await server.cacher.wait_consistent(timeout=30)
        started = time.perf_counter()
        await server.authorizer.authorize(attrs)
        cold = (time.perf_counter() - started) * 1e6
        return warm, cold
    finally:
        await server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    warm, cold = asyncio.run(measure_rbac_decision())
    print(f"RBAC decision (1,000 bindings): {warm:.1f} µs; first after a policy change: {cold:.0f} µs")
