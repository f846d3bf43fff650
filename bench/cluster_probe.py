"""What the ``k8py up`` benchmarks read of a running cluster, and how fast the machine is.

``admin_context`` (TLS as the cluster admin), ``get`` and ``until`` (poll a
check), ``pss_mb`` (proportional set size of some processes), and
``reference_speed``: a fixed piece of Python work of the kind the cluster
does (JSON of a pod, dict walks, small objects), timed. These machines are
shared and their speed varies from hour to hour by a half or more, and the
CPU a process uses for the same work varies with it, so a benchmark prints
this figure at its start and end: two figures of the cluster are comparable
when the reference figures beside them are.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from typing import Any, Callable

__all__ = ["admin_context", "get", "until", "pss_mb", "reference_speed"]

#: a Deployment's pod as the API server stores it, for the reference work
_POD = {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "many-5d4f8c7b9-x2x7q", "namespace": "default", "uid": "8a3c1f52-0000-4000-8000-000000000001",
                     "labels": {"app": "many", "pod-template-hash": "5d4f8c7b9"}, "resourceVersion": "12345",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "many-5d4f8c7b9",
                                          "uid": "8a3c1f52-0000-4000-8000-000000000002", "controller": True}]},
        "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}], "nodeName": "sim-0",
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]},
        "status": {"phase": "Running", "conditions": [{"type": t, "status": "True"} for t in ("Initialized", "Ready", "PodScheduled")]}}


def reference_speed(rounds: int = 3) -> float:
    """Milliseconds for the reference work (the best of ``rounds``: the machine at its least
    disturbed in that moment). Lower is faster: 42-43 ms on this project's 2-core machine of 2026-12-06."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(3000):
            pod = json.loads(json.dumps(_POD))
            pod["metadata"]["name"] = f"p-{i}"
            labels = {k: v for k, v in pod["metadata"]["labels"].items() if k != "pod-template-hash"}
            ready = [c for c in pod["status"]["conditions"] if c["type"] == "Ready" and c["status"] == "True"]
            assert labels and ready
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def admin_context(data: str) -> Any:
    """TLS as the cluster admin, trusting the cluster CA (None until ``k8py up`` has made them)."""
    import ssl

    pki = os.path.join(data, "pki")
    files = [os.path.join(pki, f) for f in ("ca.crt", "admin.crt", "admin.key")]
    if not all(os.path.exists(f) for f in files):
        return None
    try:
        ctx = ssl.create_default_context(cafile=files[0])
        ctx.load_cert_chain(files[1], files[2])
    except (OSError, ssl.SSLError):  # a file half written: ask again
        return None
    return ctx


def get(url: str, ctx: Any = None) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=60, context=ctx) as r:
            body = r.read()
            return json.loads(body) if body[:1] == b"{" else body.decode()
    except OSError:
        return None


def until(check: Callable[[], Any], timeout: float = 300, every: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step timed out")
        time.sleep(every)


def pss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total / 1024
