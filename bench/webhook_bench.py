"""Admission webhook round-trip overhead per create (issue 15).

The API server runs as its own process (``python -m k8py apiserver``); a tiny
HTTPS webhook (aiohttp, a certificate from ``k8py.client.certs``) runs in a
third process (``--serve-webhook``), so neither shares an interpreter with
the load; ConfigMap creates come from this process over loopback with the
raw HTTP client of ``http_load``. Three runs in one
server, each in its own namespace (each webhook matches one namespace):

1. no webhook: the baseline;
2. a validating webhook that allows;
3. a mutating webhook that adds a label (a JSONPatch applied).

For each: sequential create latency p50/p99 (one client; what one create
costs; the three runs interleaved in four rounds after a warm-up) and
creates/s from 16 concurrent clients. The overhead per create is the
difference of the p50s.

    python bench/webhook_bench.py [--creates 2000] [--sequential 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import orjson
from aiohttp import web

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from http_load import HttpConnection  # noqa: E402
from tests.support.webhook_server import HTTPSServer, allow, patch_response, review_app  # noqa: E402


def start_server(data_dir: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "apiserver", "--data-dir", data_dir, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"listening on http://([\d.]+):(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
            return proc, f"{m.group(1)}:{m.group(2)}"
    raise RuntimeError("the API server did not start")


def configmap(name: str) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                         "data": {f"k{i}": "v" * 32 for i in range(8)}})


def webhook_config(kind: str, name: str, namespace: str, url: str, ca_bundle: str) -> bytes:
    return orjson.dumps({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
                         "webhooks": [{"name": f"{name}.bench.k8py.io", "sideEffects": "None",
                                       "admissionReviewVersions": ["v1"], "clientConfig": {"url": url, "caBundle": ca_bundle},
                                       "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                                       "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                                  "resources": ["configmaps"]}]}]})


async def check(conn: HttpConnection, method: str, path: str, body: bytes = b"") -> bytes:
    status, data = await conn.request(method, path, body)
    if status >= 300:
        raise RuntimeError(f"{method} {path}: {status} {data[:300]!r}")
    return data


async def sequential(addr: str, namespace: str, n: int, prefix: str = "warm") -> list[float]:
    conn = await HttpConnection.open(addr)
    latencies = []
    for i in range(n):
        started = time.perf_counter()
        await check(conn, "POST", f"/api/v1/namespaces/{namespace}/configmaps", configmap(f"seq-{prefix}-{i}"))
        latencies.append(time.perf_counter() - started)
    return latencies


async def concurrent(addr: str, namespace: str, n: int, clients: int = 16) -> float:
    conns = [await HttpConnection.open(addr) for _ in range(clients)]
    counter = iter(range(n))

    async def worker(conn: HttpConnection) -> None:
        for i in counter:
            await check(conn, "POST", f"/api/v1/namespaces/{namespace}/configmaps", configmap(f"c-{i}"))

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    return n / (time.perf_counter() - started)


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def serve_webhook() -> None:
    """The webhook process: print the URL and CA bundle, serve until stdin closes."""
    app = review_app({"/validate": lambda req: allow(),
                      "/mutate": lambda req: patch_response([{"op": "add", "path": "/metadata/labels", "value": {"bench": "yes"}}])})
    with HTTPSServer(app) as hook:
        print(orjson.dumps({"url": hook.url, "ca_bundle": hook.ca_bundle}).decode(), flush=True)
        sys.stdin.read()
        print(len(hook.requests), flush=True)


class WebhookProcess:
    def __enter__(self) -> "WebhookProcess":
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-webhook"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        info = orjson.loads(self.proc.stdout.readline())
        self.url, self.ca_bundle = info["url"], info["ca_bundle"]
        return self

    def requests_served(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        return int(self.proc.stdout.readline() or 0)

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(10)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, WebhookProcess() as hook:
        proc, addr = start_server(tmp)
        try:
            conn = await HttpConnection.open(addr)
            runs = [("no webhook", "plain", None), ("validating webhook", "validated", "ValidatingWebhookConfiguration"),
                    ("mutating webhook", "mutated", "MutatingWebhookConfiguration")]
            for _, namespace, kind in runs:
                await check(conn, "POST", "/api/v1/namespaces", orjson.dumps({"metadata": {"name": namespace}}))
                if kind is not None:
                    plural = kind.lower() + "s"
                    path = "/validate" if kind.startswith("Validating") else "/mutate"
                    await check(conn, "POST", f"/apis/admissionregistration.k8s.io/v1/{plural}",
                                webhook_config(kind, namespace, namespace, hook.url + path, hook.ca_bundle))
            await asyncio.sleep(0.5)  # the configurations reach the watch cache (the bench, not a test)
            probe = orjson.loads(await check(conn, "POST", "/api/v1/namespaces/mutated/configmaps", configmap("probe")))
            mutated = (probe["metadata"].get("labels") or {}).get("bench") == "yes"
            print(f"webhook bench: {args.sequential} sequential + {args.creates} concurrent (16 clients) ConfigMap creates per run")
            print(f"  (mutating webhook applied: {mutated})")
            await sequential(addr, "plain", 100)  # warm-up: caches, connections, the allocator
            latencies: dict[str, list[float]] = {namespace: [] for _, namespace, _ in runs}
            for round_index in range(4):  # interleaved, so drift in the machine's load hits every run alike
                for _, namespace, _ in runs:
                    latencies[namespace] += await sequential(addr, namespace, args.sequential // 4, prefix=f"r{round_index}")
            base_p50 = quantile(latencies["plain"], 50) * 1000
            for label, namespace, _ in runs:
                rate = await concurrent(addr, namespace, args.creates)
                p50, p99 = quantile(latencies[namespace], 50) * 1000, quantile(latencies[namespace], 99) * 1000
                extra = "" if namespace == "plain" else f"  overhead p50 {p50 - base_p50:+.2f} ms"
                print(f"  {label:20s} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  {rate:7.0f} creates/s{extra}")
            print(f"  webhook requests served: {hook.requests_served()}")
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--creates", type=int, default=2000)
    parser.add_argument("--sequential", type=int, default=300)
    parser.add_argument("--serve-webhook", action="store_true", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.serve_webhook:
        serve_webhook()
    else:
        asyncio.run(main(parsed))
