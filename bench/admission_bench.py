"""What the admission chain costs per pod create, in process: ``ObjectStore.create`` of a pod
with dry run (no store write, so only the server's own work is timed) through the default
chain, beside the same create with no admission at all; and one PodSecurity evaluation of a
pod at ``restricted``.

    python bench/admission_bench.py [--creates 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import sys
import tempfile
import time

from k8py.apiserver.admission.attributes import AdmissionAttributes, GroupVersionKind, GroupVersionResource, Operation
from k8py.apiserver.admission.pod_security_checks import evaluate
from k8py.apiserver.admission.request import RequestAdmission
from k8py.apiserver.server import APIServer, APIServerConfig
from k8py.storage.sqlite import SqliteStorage

POD = {"metadata": {"name": "p", "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


async def measure(creates: int) -> tuple[float, float, float]:
    """(µs per dry-run create without admission, with the default chain, µs per restricted evaluation)."""
    tmp = tempfile.mkdtemp(prefix="k8py-admission-bench-")
    server = APIServer(SqliteStorage(os.path.join(tmp, "db")), APIServerConfig(endpoint_reconciler_interval=0.0))
    await server.start()
    try:
        pods = server.registry.get("", "v1", "pods")
        assert pods is not None
        chain = server.admission

        def hook() -> RequestAdmission:
            return RequestAdmission(chain, AdmissionAttributes(
                Operation.CREATE, GroupVersionKind("", "v1", "Pod"), GroupVersionResource("", "v1", "pods"),
                namespace="default", definition=pods, dry_run=True))

        async def run(with_admission: bool) -> float:
            start = time.perf_counter()
            for _ in range(creates):
                await server.store.create(pods, "default", copy.deepcopy(POD), dry_run=True,
                                          admission=hook() if with_admission else None)
            return (time.perf_counter() - start) / creates * 1e6

        await run(True)  # warm up
        bare, admitted = [], []
        for _ in range(3):  # interleaved, so load on the machine hits both alike
            bare.append(await run(False))
            admitted.append(await run(True))
        start = time.perf_counter()
        for _ in range(creates):
            evaluate("restricted", POD["metadata"], POD["spec"])
        psa = (time.perf_counter() - start) / creates * 1e6
        return min(bare), min(admitted), psa
    finally:
        await server.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--creates", type=int, default=3000)
    args = ap.parse_args()
    bare, admitted, psa = asyncio.run(measure(args.creates))
    print(f"pod create (dry run, in process), no admission:   {bare:8.1f} µs")
    print(f"pod create (dry run, in process), default chain:  {admitted:8.1f} µs   (+{admitted - bare:.1f} µs, "
          f"{(admitted / bare - 1) * 100:.0f}%)")
    print(f"PodSecurity restricted evaluation of one pod:     {psa:8.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
