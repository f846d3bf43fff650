"""What authorization adds to a create, measured A/B in one process so load on the machine hits both alike.

Two API servers on HTTPS with a token file: one ``AlwaysAllow``, one ``Node,RBAC`` where the
ordinary user ``bench-user`` (group ``bench-users``) may create pods only through a
ClusterRoleBinding. The same user's creates go to both, interleaved one by one; the p50 and mean
latencies differ by what RBAC (attributes, the decision, the Node authorizer) costs per request.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import statistics
import tempfile
import time

import aiohttp
import orjson

from k8py.apiserver.server import APIServer, APIServerConfig
from k8py.storage.sqlite import SqliteStorage

__all__ = ["measure_interleaved"]

RBAC = "rbac.authorization.k8s.io"


async def measure_interleaved(creates: int = 1500, warmup: int = 100) -> dict[str, tuple[float, float]]:
    """name -> (p50, mean) seconds, for ``AlwaysAllow`` and ``Node,RBAC``."""
    tmp = tempfile.mkdtemp(prefix="k8py-rbac-ab-")
    tokens = os.path.join(tmp, "tokens.csv")
    with open(tokens, "w") as f:
        f.write('admin-token,admin,1,"system:masters"\nuser-token,bench-user,2,"bench-users"\n')
    servers: dict[str, APIServer] = {}
    try:
        for name, modes in (("AlwaysAllow", ("AlwaysAllow",)), ("Node,RBAC", ("Node", "RBAC"))):
            server = APIServer(SqliteStorage(os.path.join(tmp, f"{name}.db")), APIServerConfig(
                authorization_modes=modes, endpoint_reconciler_interval=0.0, secure_port=0, insecure_port=None,
                cert_dir=os.path.join(tmp, f"{name}-certs"), token_auth_file=tokens))
            await server.start()
            servers[name] = server
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the servers' own self-signed pairs; loopback only
        latencies: dict[str, list[float]] = {name: [] for name in servers}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http:
            admin = {"Authorization": "Bearer admin-token", "Content-Type": "application/json"}
            secured = servers["Node,RBAC"].url
            for path, body in (
                (f"/apis/{RBAC}/v1/clusterroles", {"metadata": {"name": "pod-writer"}, "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]}),
                (f"/apis/{RBAC}/v1/clusterrolebindings", {"metadata": {"name": "pod-writer"},
                                                        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "pod-writer"},
                                                        "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": "bench-users"}]})):
                async with http.post(secured + path, data=orjson.dumps(body), headers=admin) as response:
                    assert response.status == 201, response.status
            user = {"Authorization": "Bearer user-token", "Content-Type": "application/json"}
            for i in range(creates + warmup):
                for name, server in servers.items():
                    body = orjson.dumps({"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
                    started = time.perf_counter()
                    async with http.post(f"{server.url}/api/v1/namespaces/default/pods", data=body, headers=user) as response:
                        await response.read()
                        assert response.status == 201, response.status
                    if i >= warmup:
                        latencies[name].append(time.perf_counter() - started)
        return {name: (sorted(v)[len(v) // 2], statistics.mean(v)) for name, v in latencies.items()}
    finally:
        for server in servers.values():
            await server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    figures = asyncio.run(measure_interleaved())
    for name, (p50, mean) in figures.items():
        print(f"create over HTTPS (token), {name:<12} p50 {p50 * 1e3:.2f} ms, mean {mean * 1e3:.2f} ms")
