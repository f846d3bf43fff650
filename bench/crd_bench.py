"""Custom resources against a ConfigMap of the same size (issue 15), same run.

A CRD with a 20-field structural schema (types, an enum, a pattern, min/max,
defaults) and three CEL validation rules on its spec (``RULES``; ``--no-cel``
leaves them out) is served by an API server process; creates/s from 16 concurrent clients and the latency of a
full list are measured for its objects and for ConfigMaps carrying the same
20 values as data, interleaved in one run. The issue's bar: the CR path costs
at most 30% more.

    python bench/crd_bench.py [--creates 2000] [--lists 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from apiserver_bench import start_server  # noqa: E402
from http_load import HttpConnection  # noqa: E402

FIELDS = 20
GROUP = "bench.example.com"
RULES = [
    {"rule": "self.f1 <= self.f5 + 1000000", "message": "f1 must not exceed f5 by a million"},
    {"rule": "self.f0.startsWith('name-') && size(self.f4) < 64"},
    {"rule": "self.f2 in ['red', 'green', 'blue'] && (self.f3 || !self.f7)",
     "messageExpression": "'bad colour ' + self.f2"},
]


def crd(cel: bool = True) -> bytes:
    props: dict = {}
    for i in range(FIELDS):
        kind = i % 4
        if kind == 0:
            props[f"f{i}"] = {"type": "string", "pattern": "^[a-z0-9-]+$", "maxLength": 63}
        elif kind == 1:
            props[f"f{i}"] = {"type": "integer", "minimum": 0, "maximum": 1_000_000}
        elif kind == 2:
            props[f"f{i}"] = {"type": "string", "enum": ["red", "green", "blue"]}
        else:
            props[f"f{i}"] = {"type": "boolean", "default": True}
    return orjson.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": props,
                                                               **({"x-kubernetes-validations": RULES} if cel else {})}}}}}]},
    })


def values(i: int) -> dict:
    out: dict = {}
    for f in range(FIELDS):
        kind = f % 4
        out[f"f{f}"] = [f"name-{i}-{f}", i * 7 + f, "green", False][kind]
    return out


def thing(i: int) -> bytes:
    return orjson.dumps({"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": f"t-{i}"},
                         "spec": values(i)})


def configmap(i: int) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c-{i}"},
                         "data": {k: str(v) for k, v in values(i).items()}})


async def creates(addr: str, path: str, body, start: int, n: int, concurrency: int = 16) -> float:
    conns = [await HttpConnection.open(addr) for _ in range(concurrency)]

    async def worker(c: HttpConnection, idx: range) -> None:
        for i in idx:
            status, reply = await c.request("POST", path, body(i))
            assert status == 201, (status, reply[:300])

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c, range(start + w, start + n, concurrency)) for w, c in enumerate(conns)))
    elapsed = time.perf_counter() - t0
    for c in conns:
        c.close()
    return n / elapsed


async def list_latency(addr: str, path: str, times: int) -> float:
    c = await HttpConnection.open(addr)
    samples = []
    for _ in range(times):
        t0 = time.perf_counter()
        status, _ = await c.request("GET", path)
        assert status == 200
        samples.append(time.perf_counter() - t0)
    c.close()
    return statistics.median(samples)


async def main(n: int, lists: int, cel: bool) -> None:
    with tempfile.TemporaryDirectory() as data:
        proc, addr, _ = start_server(data)
        try:
            c = await HttpConnection.open(addr)
            status, _ = await c.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(cel))
            assert status == 201
            deadline = time.monotonic() + 30
            while True:  # served once Established
                status, _ = await c.request("GET", f"/apis/{GROUP}/v1/namespaces/default/things")
                if status == 200 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            c.close()
            cr_path = f"/apis/{GROUP}/v1/namespaces/default/things"
            cm_path = "/api/v1/namespaces/default/configmaps"
            # interleaved rounds in alternating order, so load on the shared
            # machine hits both alike; rates are total objects / total time
            rounds, per = 6, n // 6
            cm_time = cr_time = 0.0
            for r in range(rounds):
                order = [(cm_path, configmap), (cr_path, thing)]
                for path, body in order if r % 2 == 0 else reversed(order):
                    elapsed = per / await creates(addr, path, body, r * per, per)
                    if path == cm_path:
                        cm_time += elapsed
                    else:
                        cr_time += elapsed
            cm_rate, cr_rate = rounds * per / cm_time, rounds * per / cr_time
            cm_samples, cr_samples = [], []
            for _ in range(lists):
                cm_samples.append(await list_latency(addr, cm_path, 1))
                cr_samples.append(await list_latency(addr, cr_path, 1))
            cm_list, cr_list = statistics.median(cm_samples), statistics.median(cr_samples)
            n = rounds * per
            print(f"custom resource: {FIELDS}-field schema, {len(RULES) if cel else 0} CEL rules")
            print(f"creates/s   ConfigMap {cm_rate:8.0f}   custom resource {cr_rate:8.0f}   "
                  f"CR cost x{cm_rate / cr_rate:.2f}")
            print(f"list of {n}  ConfigMap {cm_list * 1000:6.1f} ms  custom resource {cr_list * 1000:6.1f} ms  "
                  f"CR cost x{cr_list / cm_list:.2f}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=2000)
    parser.add_argument("--lists", type=int, default=20)
    parser.add_argument("--no-cel", action="store_true", help="the same schema without its CEL rules")
    args = parser.parse_args()
    asyncio.run(main(args.creates, args.lists, not args.no_cel))
